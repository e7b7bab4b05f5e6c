"""What runs one method on one task: the loaded model(s), the engines, the prompts; and what a run produced."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..options import DecodeOptions
from . import engines
from . import workloads as workloads_mod
from .config import BenchConfig
from .methods import Method


COUNTS = ("completion_tokens", "accepted", "rejected", "draft_tokens", "target_passes", "draft_forwards")
TIMES = ("prefill_s", "decode_s")


@dataclass
class Outcome:
    """What one method produced for one task, over all its turns."""

    tokens: list[list[int]] = field(default_factory=list)  # per turn
    finish: list[str] = field(default_factory=list)
    prompt_tokens: list[int] = field(default_factory=list)
    counts: dict[str, int | None] = field(default_factory=lambda: {k: 0 for k in COUNTS})
    times: dict[str, float | None] = field(default_factory=lambda: {k: 0.0 for k in TIMES})
    by_source: dict[str, list[int]] = field(default_factory=dict)
    kl: float = 0.0  # lossy acceptance: KL(target || emitted) summed over the decided positions (nats)

    def add(self, counts: dict[str, int | None], times: dict[str, float | None]) -> None:
        for k in COUNTS:
            a, b = self.counts.get(k), counts.get(k)
            self.counts[k] = None if a is None or b is None else a + b
        for k in TIMES:
            a, b = self.times.get(k), times.get(k)
            self.times[k] = None if a is None or b is None else a + b


def render_plain(messages: list[dict[str, str]]) -> str:
    """A conversation as plain text, for a tokenizer without a chat template (tiny test models)."""
    return "\n\n".join(m["content"] for m in messages)


class Session:
    """The loaded model(s) and what runs each engine; one per benchmark invocation."""

    def __init__(self, gen: Any, config: BenchConfig, model_path: Path | None = None):
        self.gen, self.config, self.model_path = gen, config, model_path
        # Every method pays its own prefill: runners that keep earlier requests' prompt chunks (prefix reuse,
        # runners/hf.HFRunner) would otherwise hand the second method on a task the first one's prompt for free.
        for runner in (gen.runner, gen.draft_runner):
            if runner is not None and runner.reuse_prefix:  # Runner.reuse_prefix
                runner.reuse_prefix = False
        self.chat = bool(gen.tokenizer.has_chat_template)
        self.llama: dict[str, Any] = {}  # stock llama.cpp models by configuration (engines.run_llama_cpp)
        self.pool_scope = "bench-repeat-0"  # set per run (see run)
        self._options = {f.name for f in dataclasses.fields(DecodeOptions)}  # what a quickdraft method may set

    # which methods can run, and why not -------------------------------------------------------
    def unavailable(self, method: Method) -> str | None:
        if method.planned:
            return method.planned
        for need in method.needs:
            if need.startswith("api:"):
                option = need[4:]
                if option not in self._options:
                    return (f"the API option {option}= is not available yet (DecodeOptions has no "
                            f"{option!r} field): skipped until it lands")
            elif need == "draft-model" and self.gen.draft_runner is None:
                return "no draft model loaded (pass --draft-model)"
            elif need == "transformers-runner" and not hasattr(self.gen.runner, "model"):
                return "the target runs on llama.cpp: transformers' generate() needs --runner transformers"
            elif need == "transformers-runner" and "assistant_model" in method.kwargs \
                    and not hasattr(self.gen.draft_runner, "model"):
                return "the draft model runs on llama.cpp: transformers' assistant_model needs --draft-runner transformers"
            elif need == "llama-cpp":
                try:
                    import llama_cpp  # noqa: F401
                except ImportError:
                    return "llama-cpp-python is not installed (optional: pip install -e '.[llamacpp]')"
            elif need == "gguf" and self.gguf_path() is None:
                return "the model is not a GGUF file or packaged alias: llama.cpp needs a GGUF"
        return None

    def gguf_path(self) -> Path | None:
        from .. import models

        name = self.config.model
        if name in models.ALIASES:
            return models.pull(name, progress=False)  # pulled when the model loaded: returns at once
        p = Path(name).expanduser()
        return p if p.is_file() and p.suffix.lower() == ".gguf" else None

    # prompts --------------------------------------------------------------------------------
    def prompt(self, messages: list[dict[str, str]]) -> Any:
        return messages if self.chat else render_plain(messages)

    def prompt_ids(self, messages: list[dict[str, str]]) -> list[int]:
        return self.gen.encode_prompt(self.prompt(messages))

    # running ---------------------------------------------------------------------------------
    def run(self, method: Method, task: workloads_mod.Task, seed: int = 0, repeat: int = 0) -> Outcome:
        """Every turn of the task with `method`; later turns follow the method's own answers.

        seed: the sampling seed of sampled methods (turn i uses seed + i). repeat: which repeat this
        is; Ouroboros keeps one phrase pool per repeat (warm start across the tasks of a repeat, as a
        server would across requests, but never from an earlier repeat of the same task)."""
        self.pool_scope = f"bench-repeat-{repeat}"
        outcome = Outcome()
        messages = list(task.messages)
        turns = [None, *task.followups]
        for i, followup in enumerate(turns):
            if followup is not None:
                messages = messages + [{"role": "user", "content": followup}]
            prediction = task.prediction if method.uses_prediction and i == 0 else None
            turn = engines.ENGINES[method.engine](self, method, messages, prediction, seed + i)
            outcome.tokens.append(turn.tokens)
            outcome.finish.append(turn.finish)
            outcome.prompt_tokens.append(turn.prompt_tokens)
            outcome.add(turn.counts, turn.times)
            outcome.kl += turn.kl
            for src, (a, r) in turn.by_source.items():
                acc = outcome.by_source.setdefault(src, [0, 0])
                acc[0] += a
                acc[1] += r
            messages = messages + [{"role": "assistant", "content": self.gen.tokenizer.decode(turn.tokens)}]
        return outcome
