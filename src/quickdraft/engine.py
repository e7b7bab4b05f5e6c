"""The draft-and-verify loop for one sequence. Token ids in, steps out: no tokenizer, no I/O.

    prefill(prompt[:-1])
    while not done:
        draft   = drafter.propose(context, budget)
        logits  = runner.forward([context[-1], *draft])     # one target pass (forward_tree for a tree)
        verdict = verify(draft, logits)                      # accepted prefix (or path) + bonus token
        runner.rollback(len(context) + verdict.accepted)     # cache keeps the accepted tokens (keep: a path)
        context += verdict.tokens; drafter.observe(context, verdict)
        yield the step's tokens, cut where a stopping rule fires

Stopping is checked token by token in output order, exactly as plain decoding would meet the same
tokens, so a drafted block never runs past an EOS, a stop string or a limit that plain decoding
would have stopped at.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

from .acceptance import Acceptance, verify
from .core import EMPTY_DRAFT, Stats, Step
from .drafters.base import Drafter, NoDrafter
from .errors import ContextLengthError, QuickdraftError
from .runners.base import Runner
from .sampling import SamplingParams
from .sizing import DraftSizer, PassCosts, block_fit

# Given the output so far and how many of its tokens are new this step, return how many output
# tokens to keep if a stop sequence was completed by one of the new tokens, else None.
StopCheck = Callable[[Sequence[int], int], "int | None"]


@dataclass(frozen=True)
class Limits:
    max_new_tokens: int
    eos_token_ids: frozenset[int] = frozenset()

    def __post_init__(self) -> None:
        if not isinstance(self.max_new_tokens, int) or self.max_new_tokens <= 0:
            raise QuickdraftError(f"max_new_tokens must be a positive integer; got {self.max_new_tokens!r}")


def check_prompt(prompt: Sequence[int], runner: Runner) -> None:
    if len(prompt) == 0:
        raise QuickdraftError("the prompt is empty: give at least one token of input")
    if len(prompt) >= runner.max_context:
        raise ContextLengthError(len(prompt), runner.max_context)


def generate(
    runner: Runner,
    prompt: Sequence[int],
    limits: Limits,
    drafter: Drafter | None = None,
    stop_check: StopCheck | None = None,
    stats: Stats | None = None,
    sampling: SamplingParams = SamplingParams(),
    acceptance: Acceptance = Acceptance(),
    sizer: DraftSizer | None = None,
    costs: PassCosts | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> Iterator[Step]:
    """Yield one Step per target pass until a stopping rule fires; fills `stats` as it goes.

    sizer: caps each draft at the length that pays on this runner (sizing.py); None: drafts as proposed.
    costs: where each pass's seconds are recorded when there is no sizer (a sizer records into its own),
    for drafters that size their drafts themselves (Ouroboros's lengthening).
    clock: seconds, for the stats and the pass costs (a replay passes a runner's virtual clock:
    runners/scripted.py TimedScriptedRunner).

    Greedy (temperature 0) output equals plain greedy decoding token for token; sampled output is
    distributed as plain sampling from the target's processed distribution, unless a lossy
    acceptance rule (mentored, typical, threshold) was asked for, and with drafts that carry no
    distributions (prediction, lookup, trees) it is plain sampling's own, token for token, for the
    same seed (acceptance/rejection.verify_walk).
    """
    check_prompt(prompt, runner)
    acceptance.check(sampling)
    drafter = drafter or NoDrafter()
    rng = None if sampling.greedy else sampling.generator()
    stats = stats if stats is not None else Stats()
    stats.prompt_tokens = len(prompt)
    stats.acceptance, stats.kl_bound, stats.lossy = acceptance.rule, acceptance.kl_bound, acceptance.lossy

    t0 = clock()
    runner.reset()
    stats.cached_tokens = runner.prefill(prompt[:-1]) or 0  # rows taken from an earlier sequence's cache (prefix reuse)
    drafter.begin(prompt)
    # sampled drafts are trimmed causally: a drafter that rates its tokens can stop where the trim will cut (Drafter.keep)
    drafter.keep = sizer.keeps if sizer is not None and not sampling.greedy else None
    stats.prefill_s = clock() - t0

    context = list(prompt)
    out: list[int] = []
    source = ""  # the drafter that proposed last
    row_block = runner.row_block  # rows per product where passes run in fixed blocks (Runner.row_block)
    while True:
        t_step = clock()
        # A pass emits at most len(draft) + 1 tokens: never draft past the limits.
        budget = min(limits.max_new_tokens - len(out), runner.max_context - len(context)) - 1
        if sizer is not None and sizer.rates_itself(source):  # a draft model: its drafting costs, so it drafts no
            budget = sizer.cap(source, budget)  # more than pays, or nothing while it rests (sizing.py)
        draft = drafter.propose(context, budget) if budget > 0 else EMPTY_DRAFT
        if sizer is not None and draft.tokens:
            if draft.confidence is not None:  # rated by its drafter: the prefix worth a pass
                draft = sizer.trim(draft)
            else:  # drafted from the context: cut to what pays for its own source, whichever drafted last
                draft = draft.head(sizer.cap(draft.source, budget))
        if row_block and draft.parents is None and (sampling.greedy or not draft.forwards):
            # a pass of whole row blocks (sizing.block_fit); cut by length only where the draft is the context's
            # function (lookup, predictions) or greedy: a sampled draft model's length follows its drawn tokens
            draft = draft.head(block_fit(len(draft), row_block))
        source = draft.source or source
        t_drafted = clock()
        if draft.parents is None:
            logits = runner.forward([context[-1], *draft.tokens])  # [len(draft) + 1, vocab_size]
        else:  # a tree (trees.py): every branch in one pass
            if not runner.supports_trees:
                raise QuickdraftError(f"{type(runner).__name__} cannot verify tree drafts; use a drafter without trees")
            logits = runner.forward_tree([context[-1], *draft.tokens], draft.parents)
        t_verified = clock()
        verdict = verify(draft, logits, sampling, acceptance, rng)
        if sizer is not None:
            # a model drafter's seconds count against its drafts; lookup and predictions cost ~0 (and on a
            # scripted runner their microseconds would rival the pass itself)
            sizer.record(draft.source, len(draft), verdict.accepted, len(draft) + 1, t_verified - t_drafted,
                         t_drafted - t_step if draft.forwards else 0.0, tree=draft.parents is not None)
        elif costs is not None:
            costs.record(len(draft) + 1, t_verified - t_drafted, tree=draft.parents is not None)
        if verdict.path is None:
            runner.rollback(len(context) + verdict.accepted)
        else:  # keep the root and the accepted path's rows of this pass
            runner.keep(len(context) - 1, (0, *(i + 1 for i in verdict.path)))
        context.extend(verdict.tokens)
        drafter.observe(context, verdict)

        tokens, finish = _within_limits(verdict.tokens, len(prompt), len(out), limits, runner.max_context)
        out.extend(tokens)
        if stop_check is not None and tokens and (keep := stop_check(out, len(tokens))) is not None:
            del tokens[len(tokens) - (len(out) - keep) :]
            del out[keep:]
            finish = "stop"

        from_draft = tuple(i < verdict.accepted for i in range(len(tokens)))
        _account(stats, verdict.draft.source, len(draft), sum(from_draft), len(tokens))
        stats.draft_forwards += draft.forwards
        stats.kl += sum(verdict.kls[: len(tokens)])  # the emitted tokens' positions only (lossy rules)
        stats.drafter_s += t_drafted - t_step
        stats.decode_s += clock() - t_step
        yield Step(tokens=tuple(tokens), from_draft=from_draft, verdict=verdict, finish_reason=finish)
        if finish:
            return


def _within_limits(
    new: Sequence[int], n_prompt: int, n_out: int, limits: Limits, max_context: int
) -> tuple[list[int], str | None]:
    """The new tokens that plain decoding would also emit, meeting them one by one, and why it stops.

    Example: new (5, 6, EOS, 7) -> ([5, 6], "stop"); with 1 token left before max_new_tokens,
    new (5, 6) -> ([5], "length").
    """
    tokens: list[int] = []
    for t in new:
        if t in limits.eos_token_ids:
            return tokens, "stop"
        tokens.append(t)
        total = n_out + len(tokens)
        if total >= limits.max_new_tokens or n_prompt + total >= max_context:
            return tokens, "length"
    return tokens, None


def _account(stats: Stats, source: str, drafted: int, accepted: int, emitted: int) -> None:
    stats.target_passes += 1
    stats.completion_tokens += emitted
    stats.draft_tokens += drafted
    stats.accepted_prediction_tokens += accepted
    stats.rejected_prediction_tokens += drafted - accepted
    if drafted:
        per = stats.by_source.setdefault(source or "draft", [0, 0])
        per[0] += accepted
        per[1] += drafted - accepted
