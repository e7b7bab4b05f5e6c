"""quickdraft's drafters as vLLM's speculative proposer (vLLM's experimental `custom_class` hook).

vLLM owns the loop, the KV cache and the batch; after every step its model runner asks the proposer for
the next draft of each running request. This class keeps one quickdraft Drafter per request, built by
drafters/build.py exactly as quickdraft's own engine builds it, and maps vLLM's per-step state onto the
Drafter protocol:

    first step of a request    begin(prompt), then observe() for each output token it already has
    every step                 observe(context, Verdict(last draft, accepted, tokens sampled this step))
                               propose(context, budget) -> the draft vLLM verifies next
    request gone               its drafter is dropped

Glossary as in core.py. vLLM's step emits `accepted + 1` tokens per request (accepted draft tokens, then
the bonus token): the same Verdict the engine builds.

What each request drafts from (SamplingParams.extra_args, filled by patches.py from the OpenAI request):
    qd_prediction_ids  the prediction's token ids: tokenized and bounded (at most max_model_len) in the API
                    server process, so that nothing here works on a text of a client's choosing
    qd_drafter      "auto" (prediction+lookup if a prediction is given, the prediction alone under policy
                    "openai"; else prompt lookup), "prediction", "lookup",
                    "prediction+lookup" or "none"; default: QUICKDRAFT_VLLM_DRAFTER, else "auto"
    qd_policy       prediction policy, "default" or "openai"; default QUICKDRAFT_VLLM_POLICY, else "default"
    qd_sizing       "cost" (drafts cut to what pays in this step, below) or "off" (drafts as proposed);
                    default QUICKDRAFT_VLLM_SIZING, else "cost"

Sizing (batch_sizing.py): the proposer times vLLM's steps (from the end of one call to
the start of the next: the forward, sampling and scheduling of the step it drafted for) against their
tokens, which gives t(T) under the current load; each request's acceptance is counted (DraftRates:
after a fully accepted draft and after anything else); each step keeps the draft tokens of all rows,
most likely first, while one more token adds more output than it costs: long drafts for one request on
a flat t, fewer and only the likeliest as the batch fills, none where they do not pay. The drafters keep
their own length rules (the prediction drafter's doubling while it stays right: replayed with vLLM's
fitted step costs it beat drafting all it has, docs/results/2026-11-24-vllm-sizing/vllm_replay.py); the cut comes on top. It changes
how much is verified, never the output.

Budget: vLLM verifies whatever the proposer returns, and a step that accepts more than
num_speculative_tokens crashes its metrics (vllm 0.32, v1/metrics/stats.py), so every draft is cut to
num_speculative_tokens; to the tokens the request may still emit (max_tokens, the model length), so
that no accepted draft token is cut off by a length limit; and after the first end-of-generation token,
since nothing after it can be output.

Failure: the proposer runs inside vLLM's engine step, where an exception stops the engine and fails every request
on the server. So a request whose drafting raises is logged and left without drafts from then on (drafting nothing
never changes the output); the other requests draft on.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

from ..core import EMPTY_DRAFT, Draft, Verdict
from ..drafters.base import Drafter
from ..drafters.build import NEEDS_PREDICTION, build_drafter
from ..drafters.lookup import LookupConfig
from ..errors import QuickdraftError
from ..batch_sizing import StepCosts, batch_lengths
from ..sizing import DraftRates, draft_gains

# Prompt lookup without its short matches here: the step's sizing rates a request's drafts together, not per source
# (_size), so guesses from one- and two-token matches would pull down the cut of its real matches
# (docs/vllm.md#what-runs-where)
LOOKUP = LookupConfig(short_ngram=0)

DRAFTER_ENV, POLICY_ENV, SIZING_ENV = "QUICKDRAFT_VLLM_DRAFTER", "QUICKDRAFT_VLLM_POLICY", "QUICKDRAFT_VLLM_SIZING"
SIZINGS = ("cost", "off")
_log = logging.getLogger("vllm.quickdraft")


@dataclass
class _Request:
    """One request's drafter and what it has seen: the context it observed, the draft it was last given."""

    drafter: Drafter
    prompt_len: int
    context: list[int]  # prompt + output tokens observed so far
    draft: Draft = EMPTY_DRAFT
    stop_ids: frozenset[int] = frozenset()
    max_len: int = 0  # the context length at which the request must end (max_tokens or the model length)
    sized: bool = True  # its drafts are cut by the step's costs (qd_sizing "cost")
    rates: DraftRates = field(default_factory=DraftRates)
    running: bool = False  # its last non-empty draft was accepted in full


def observe_step(drafter: Drafter, context: list[int], draft: Draft, new: Sequence[int]) -> int:
    """Tell `drafter` that `new` tokens followed `context` after `draft` was verified; extends `context`.

    Worked example: draft (5, 6, 7), new (5, 6, 9): one verdict, accepted 2, tokens (5, 6, 9). new tokens
    beyond accepted + 1 (a step that emitted more than one verdict's worth: a resumed request) are fed
    as one-token verdicts without a draft. Returns the draft tokens accepted.
    """
    if not new:
        return 0
    accepted = 0
    while accepted < min(len(draft), len(new) - 1) and draft.tokens[accepted] == new[accepted]:
        accepted += 1
    context.extend(new[: accepted + 1])
    drafter.observe(context, Verdict(draft, accepted, tuple(new[: accepted + 1])))
    for t in new[accepted + 1 :]:
        context.append(t)
        drafter.observe(context, Verdict(EMPTY_DRAFT, 0, (t,)))
    return accepted


def cut_draft(draft: Draft, budget: int, stop_ids: frozenset[int]) -> Draft:
    """The draft cut to `budget` tokens and after its first stop token (inclusive)."""
    draft = draft.head(max(budget, 0))
    for i, t in enumerate(draft.tokens):
        if t in stop_ids:
            return draft.head(i + 1)
    return draft


def check_sizing(sizing: str, where: str = "draft sizing") -> None:
    if sizing not in SIZINGS:
        raise QuickdraftError(f"{where} must be one of {', '.join(SIZINGS)}; got {sizing!r}")


def check_server_defaults(drafter: str, policy: str, sizing: str = "cost") -> None:
    """A server default drafter, policy and sizing that build_drafter can build (QuickdraftError otherwise)."""
    check_sizing(sizing)
    build_drafter(request_drafter(None, drafter, has_prediction=False), None, policy)
    if drafter in NEEDS_PREDICTION:
        build_drafter(drafter, [], policy)


def request_drafter(asked: str | None, server_default: str, has_prediction: bool) -> str:
    """The drafter a request gets: the one it asked for (vllm_xargs qd_drafter), else the server's default
    read for this request: "prediction" drafts nothing without a prediction, "prediction+lookup" looks up.
    Checked (drafters/build.check_drafter) where the request arrives, so that a bad choice is a 400."""
    if asked is not None:
        return asked
    if not has_prediction and server_default in NEEDS_PREDICTION:
        return "none" if server_default == "prediction" else "lookup"
    return server_default


class Proposer:
    """vLLM custom proposer: `--speculative-config '{"model": "quickdraft.vllm.Proposer", "num_speculative_tokens": K}'`.

    Constructed by vLLM in each worker with the engine's config; patches.py hands it the model runner
    (`bind_runner`), through which a batch row's request id, prompt, output and sampling parameters are read.
    """

    def __init__(self, vllm_config: Any):
        from .versions import check_version

        check_version()  # a vLLM the plugin was not tested with: its patches are not applied (register)
        from .patches import _state

        if not _state["applied"]:  # fail at start, not at the first request (propose needs the runner patches hand it)
            raise RuntimeError("quickdraft's vLLM proposer is configured, but the quickdraft plugin did not load in "
                               "this process (VLLM_PLUGINS leaves it out?) or could not patch this vLLM (its log says why): "
                               "allow the plugin 'quickdraft', or reinstall quickdraft")
        self.configure(vllm_config.speculative_config.num_speculative_tokens, vllm_config.model_config.max_model_len)

    def configure(self, k: int, max_model_len: int) -> None:
        """Settings from vLLM's config (and the server's defaults from the environment); the tests call it on
        a Proposer made without vLLM."""
        self.k, self.max_model_len = k, max_model_len
        self.default_drafter = os.environ.get(DRAFTER_ENV, "auto")
        self.default_policy = os.environ.get(POLICY_ENV, "default")
        self.default_sizing = os.environ.get(SIZING_ENV, "cost")
        check_server_defaults(self.default_drafter, self.default_policy, self.default_sizing)  # at start, not per request
        self.runner: Any = None
        self.requests: dict[str, _Request] = {}
        self.failed: set[str] = set()  # requests whose drafting raised: they draft nothing more
        self.costs = StepCosts()
        self.source_rates: dict[str, DraftRates] = {}  # every request's counts per drafter: a new request's prior
        self._step: tuple[float, int] | None = None  # (when the last call returned, tokens of the step it drafted for)

    def bind_runner(self, runner: Any) -> None:
        self.runner = runner

    def load_model(self, target_model: Any) -> None:  # vLLM's CPU runner calls it on every proposer
        pass

    def propose(self, sampled_token_ids: list[list[int]], num_tokens_no_spec: Any, token_ids_cpu: Any,
                slot_mappings: Any = None) -> list[list[int]]:
        """One draft per batch row (vLLM's order: runner.input_batch.req_ids); [] where nothing is drafted."""
        if self.runner is None:
            raise RuntimeError("quickdraft's vLLM proposer was not handed the model runner: the quickdraft plugin "
                               "(entry point vllm.general_plugins) did not load in this worker; reinstall quickdraft")
        started = time.perf_counter()
        req_ids = self.runner.input_batch.req_ids
        rows: list[_Request | None] = []
        drafts: list[Draft] = []
        clean = self._step is not None  # the step just run verified decode rows only (no prefill): a cost sample
        for i, sampled in enumerate(sampled_token_ids):
            if not sampled:  # a prefill chunk or a request that did not run this step
                rows.append(None)
                drafts.append(EMPTY_DRAFT)
                clean = False
                continue
            rid = req_ids[i]
            if rid not in self.requests and rid not in self.failed:
                clean = False  # its prefill ran in this step
            state = None if rid in self.failed else self._row(rid)
            rows.append(state)
            drafts.append(EMPTY_DRAFT if state is None else state.draft)
        if clean:
            self.costs.record(self._step[1], started - self._step[0])
        self._size(rows, drafts)
        for rid in [r for r in self.requests if r not in self.runner.requests]:
            del self.requests[rid]  # finished or aborted
        self.failed &= set(self.runner.requests)
        self._step = (time.perf_counter(), sum(1 + len(d) for new, d in zip(sampled_token_ids, drafts) if new))
        return [list(d.tokens) for d in drafts]

    def _row(self, rid: str) -> _Request | None:
        """A running request's next draft (in its state), after observing what its last step emitted; None, and no
        drafts for it from then on, if that raises (logged): see "Failure" above."""
        try:
            cached = self.runner.requests[rid]
            state = self.requests.get(rid) or self._begin(rid, cached)
            output = cached.output_token_ids
            seen = len(state.context) - state.prompt_len
            accepted = observe_step(state.drafter, state.context, state.draft, output[seen:])
            self._count(state, accepted)
            budget = min(self.k, state.max_len - len(state.context) - 1)
            state.draft = cut_draft(state.drafter.propose(state.context, budget), budget, state.stop_ids)
            return state
        except Exception:
            _log.exception("quickdraft: drafting for request %s failed; it goes on without drafts", rid)
            self.requests.pop(rid, None)
            self.failed.add(rid)
            return None

    def _count(self, state: _Request, accepted: int) -> None:
        """The fate of the request's last draft, in its rates and its drafter's (a new request's prior)."""
        draft = state.draft
        if not len(draft):
            return
        state.rates.record(state.running, len(draft), accepted)
        self.source_rates.setdefault(draft.source, DraftRates()).record(state.running, len(draft), accepted)
        state.running = accepted == len(draft)

    def _size(self, rows: list[_Request | None], drafts: list[Draft]) -> None:
        """Cut the step's drafts to what pays (batch_sizing.batch_lengths); rows without sizing keep theirs."""
        gains: list[list[float] | None] = []
        for state, draft in zip(rows, drafts):
            rates = None
            if state is not None and state.sized and len(draft):
                rates = state.rates.rates(state.running)
                if rates is None and draft.source in self.source_rates:
                    rates = self.source_rates[draft.source].rates(state.running)
            gains.append(None if rates is None else draft_gains(rates, len(draft)))
        live = [i for i, state in enumerate(rows) if state is not None]
        keep = batch_lengths([gains[i] for i in live], [len(drafts[i]) for i in live], self.costs.line())
        for i, k in zip(live, keep):
            if k < len(drafts[i]):
                drafts[i] = rows[i].draft = drafts[i].head(k)

    def _begin(self, rid: str, cached: Any) -> _Request:
        params = cached.sampling_params
        extra = (params.extra_args or {}) if params is not None else {}
        ids = extra.get("qd_prediction_ids")
        if ids is not None and not (isinstance(ids, (list, tuple)) and len(ids) <= self.max_model_len
                                    and all(isinstance(t, int) for t in ids)):
            raise ValueError(f"qd_prediction_ids must be a list of at most {self.max_model_len} token ids (patches.py "
                             "makes it in the API server)")
        name = request_drafter(extra.get("qd_drafter"), self.default_drafter, ids is not None)
        sized = extra.get("qd_sizing", self.default_sizing) == "cost"
        drafter = build_drafter(name, ids, extra.get("qd_policy", self.default_policy), lookup=LOOKUP)
        prompt = list(cached.prompt_token_ids or [])
        drafter.begin(prompt)
        stop_ids = frozenset(getattr(params, "all_stop_token_ids", None) or ()) if params is not None else frozenset()
        max_len = self.max_model_len
        if params is not None and params.max_tokens is not None:
            max_len = min(max_len, len(prompt) + params.max_tokens)
        state = _Request(drafter, len(prompt), prompt, stop_ids=stop_ids, max_len=max_len, sized=sized)
        self.requests[rid] = state
        return state
