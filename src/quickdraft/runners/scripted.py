"""A scripted target: its greedy output is a fixed token sequence, whatever the context says.

Used by the accounting tests and the Predicted Outputs study, where what matters is which draft
tokens the target agrees with, not what a real model would write. The logits at the position of
output token i put all their mass on script[i]; past the end of the script they choose `eos`.
"""

from __future__ import annotations

from typing import Callable, Sequence

import torch

from .. import trees
from .base import Runner


class ScriptedRunner(Runner):
    def __init__(self, script: Sequence[int], vocab_size: int, eos: int, max_context: int = 1 << 20):
        if not all(0 <= t < vocab_size for t in script) or not 0 <= eos < vocab_size:
            raise ValueError("script tokens and eos must lie in [0, vocab_size)")
        self.script = list(script)
        self.vocab_size = vocab_size
        self.eos = eos
        self.max_context = max_context
        self.prompt_len = 0
        self._length = 0
        self.passes = 0  # forward calls, for tests
        self.supports_trees = True

    @property
    def length(self) -> int:
        return self._length

    def reset(self) -> None:
        self._length = 0
        self.passes = 0

    def prefill(self, tokens: Sequence[int]) -> None:
        self._length += len(tokens)
        self.prompt_len = self._length + 1  # the engine keeps the last prompt token for forward

    def forward(self, tokens: Sequence[int]) -> torch.Tensor:
        return self.forward_tree(tokens, trees.chain(len(tokens) - 1))

    def forward_tree(self, tokens: Sequence[int], parents: Sequence[int]) -> torch.Tensor:
        self.passes += 1
        first = self._length + 1 - self.prompt_len  # output index predicted by the first row
        logits = torch.zeros(len(tokens), self.vocab_size)  # [n, vocab_size]
        for row, depth in enumerate(trees.depths(parents)):
            i = first + depth
            logits[row, self.script[i] if i < len(self.script) else self.eos] = 10.0
        self._length += len(tokens)
        return logits

    def keep(self, start: int, rows: Sequence[int]) -> None:
        self.rollback(start + len(rows))

    def rollback(self, length: int) -> None:
        if length > self._length:
            raise ValueError(f"cannot roll back to {length} tokens: the cache holds only {self._length}")
        self._length = length


class TimedScriptedRunner(ScriptedRunner):
    """A ScriptedRunner whose passes take modelled time on a virtual clock: drafting rules replayed on a
    known output (plain decoding's) through the engine itself, sizing included, with measured pass costs
    in place of a model (scripts/draft_replay.py). Pass `runner.clock` as the engine's clock.

    pass_seconds(n): what a pass of n tokens costs. Prefill takes no time here (replays leave it out).
    """

    def __init__(self, script: Sequence[int], vocab_size: int, eos: int, pass_seconds: Callable[[int], float],
                 max_context: int = 1 << 20):
        super().__init__(script, vocab_size, eos, max_context)
        self.pass_seconds = pass_seconds
        self.now = 0.0  # seconds of modelled target time so far

    def clock(self) -> float:
        return self.now

    def forward_tree(self, tokens: Sequence[int], parents: Sequence[int]) -> torch.Tensor:
        self.now += self.pass_seconds(len(tokens))
        return super().forward_tree(tokens, parents)
