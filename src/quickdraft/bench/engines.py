"""The engines a benchmark method runs on, one function each: quickdraft's Generator, transformers'
own generate() on the same weights as transformers loads them (plain, prompt lookup, assisted: torch's Linear layers
and transformers' default attention in place of the runner's while it runs), and stock llama.cpp on the GGUF.

Each runs one turn of one task and returns a Turn; the harness (harness.py) times, compares and records.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ..options import DecodeOptions
from ..runners.kernels import as_transformers_loads_it
from .llamacpp_stock import stock_llama
from .methods import Method


@dataclass
class Turn:
    """One turn of one method: the tokens, why it stopped, and what the engine reports of its work.

    counts: completion_tokens, accepted, rejected, draft_tokens, target_passes, draft_forwards (None where
    an engine cannot tell). times: prefill_s, decode_s (None where it cannot tell).
    """

    tokens: list[int]
    finish: str
    prompt_tokens: int
    counts: dict[str, int | None]
    times: dict[str, float | None]
    by_source: dict[str, list[int]] = field(default_factory=dict)  # per drafter: [accepted, rejected]
    kl: float = 0.0  # lossy acceptance: KL(target || emitted) summed over the decided positions (nats)


def run_quickdraft(session: Any, method: Method, messages, prediction, seed: int) -> Turn:
    from ..sampling import SamplingParams

    sampling = SamplingParams(temperature=session.config.temperature, seed=seed) if method.sampled else SamplingParams()
    scope = {"pool_scope": session.pool_scope} if method.kwargs.get("drafter") == "ouroboros" else {}
    options = DecodeOptions(sampling=sampling, max_new_tokens=session.config.max_new_tokens, **method.kwargs, **scope)
    res = session.gen.generate(session.prompt(messages), options, prediction=prediction)
    s = res.stats
    counts = {"completion_tokens": s.completion_tokens, "accepted": s.accepted_prediction_tokens,
              "rejected": s.rejected_prediction_tokens, "draft_tokens": s.draft_tokens,
              "target_passes": s.target_passes, "draft_forwards": s.draft_forwards}
    return Turn(res.token_ids, res.finish_reason, s.prompt_tokens, counts,
                {"prefill_s": s.prefill_s, "decode_s": s.decode_s}, dict(s.by_source), s.kl)


def run_transformers(session: Any, method: Method, messages, prediction, seed: int,
                     max_new_tokens: int | None = None) -> Turn:
    import torch
    from transformers import GenerationConfig

    gen = session.gen
    ids = session.prompt_ids(messages)
    eos = sorted(gen.tokenizer.eos_token_ids)
    model = gen.runner.model
    options = method.kwargs
    assistant = gen.draft_runner.model if options.get("assistant_model") == "draft" else None
    # A fresh config: plain greedy decoding, whatever sampling defaults the model ships with.
    greedy = GenerationConfig(do_sample=False, num_beams=1, max_new_tokens=max_new_tokens or session.config.max_new_tokens,
                              eos_token_id=eos or None, pad_token_id=eos[0] if eos else 0,
                              prompt_lookup_num_tokens=options.get("prompt_lookup_num_tokens"))
    with contextlib.ExitStack() as stock:  # transformers' own layers and attention, entered and left untimed
        for m in (model, assistant):
            if m is not None:
                stock.enter_context(as_transformers_loads_it(m))
        target, drafts = _ForwardCounter(model), _ForwardCounter(assistant) if assistant is not None else None
        saved = assistant.generation_config.to_dict() if assistant is not None else None
        x = torch.tensor([ids], device=model.device)
        t0 = time.perf_counter()
        try:
            with torch.inference_mode():
                y = model.generate(x, attention_mask=torch.ones_like(x), generation_config=greedy, assistant_model=assistant)
        finally:
            target.remove()
            if drafts is not None:
                drafts.remove()
            if assistant is not None:  # transformers adapts num_assistant_tokens in place: undo it per run
                assistant.generation_config = GenerationConfig.from_dict(saved)
        if x.device.type == "cuda":
            torch.cuda.synchronize()  # generate() may return before the GPU has finished
        total = time.perf_counter() - t0
    raw = y[0, len(ids):].tolist()
    tokens = list(raw)
    finish = "length"
    for i, t in enumerate(tokens):  # generate() keeps the EOS; quickdraft does not
        if t in gen.tokenizer.eos_token_ids:
            tokens, finish = tokens[:i], "stop"
            break
    # Derived from the forward calls (each target call emits its accepted draft tokens + 1, and
    # is fed the last token + its draft, the first one the whole prompt + its draft).
    passes = target.calls
    accepted = len(raw) - passes
    drafted = target.fed - len(ids) + 1 - passes
    if accepted < 0 or drafted < accepted:
        accepted = drafted = None
    counts = {"completion_tokens": len(tokens), "accepted": accepted,
              "rejected": None if drafted is None else drafted - accepted, "draft_tokens": drafted,
              "target_passes": passes, "draft_forwards": drafts.calls if drafts is not None else 0}
    prefill = (target.first_end - t0) if target.first_end else None
    return Turn(tokens, finish, len(ids), counts, {"prefill_s": prefill, "decode_s": None if prefill is None else total - prefill})


def run_llama_cpp(session: Any, method: Method, messages, prediction, seed: int) -> Turn:  # pragma: no cover - needs llama-cpp-python
    ids = session.prompt_ids(messages)
    lookup = method.kwargs.get("num_pred_tokens")
    key = f"lookup{lookup}" if lookup else "plain"
    if key not in session.llama:
        session.llama[key] = stock_llama(session.gguf_path(), n_ctx=session.gen.runner.max_context,
                                         threads=os.cpu_count() or 1, num_pred_tokens=lookup)
    llm = session.llama[key]
    eos = set(session.gen.tokenizer.eos_token_ids) | {llm.token_eos()}
    tokens: list[int] = []
    finish = "length"
    t0 = time.perf_counter()
    first = None
    for t in llm.generate(ids, temp=0.0, top_k=1, top_p=1.0, repeat_penalty=1.0, reset=True):
        first = first or time.perf_counter()
        if t in eos:
            finish = "stop"
            break
        tokens.append(t)
        if len(tokens) >= session.config.max_new_tokens:
            break
    total = time.perf_counter() - t0
    counts = {"completion_tokens": len(tokens), "accepted": None, "rejected": None, "draft_tokens": None,
              "target_passes": None, "draft_forwards": 0}
    prefill = (first - t0) if first else None
    return Turn(tokens, finish, len(ids), counts, {"prefill_s": prefill, "decode_s": None if prefill is None else total - prefill})


ENGINES: dict[str, Callable[..., Turn]] = {"quickdraft": run_quickdraft, "transformers": run_transformers,
                                           "llama.cpp": run_llama_cpp}


class _ForwardCounter:
    """Counts forward calls of a transformers model and the tokens fed to them (hooks, removed after)."""

    def __init__(self, model: Any):
        self.calls = 0
        self.fed = 0
        self.first_end: float | None = None
        self._handles = []
        if model is not None:
            self._handles.append(model.register_forward_pre_hook(self._pre, with_kwargs=True))
            self._handles.append(model.register_forward_hook(self._post))

    def _pre(self, module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        self.calls += 1
        self.fed += int(ids.shape[-1]) if ids is not None else 0

    def _post(self, module, args, output):
        if self.first_end is None:
            self.first_end = time.perf_counter()

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
