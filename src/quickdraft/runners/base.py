"""The Runner protocol: what the engine needs from a model.

A runner owns the model's KV cache for one sequence. The engine keeps this invariant: the cache holds
every context token but the last one, which goes in as the first input of the next `forward`.

    prefill(prompt[:-1])             cache = prompt[:-1]
    forward([prompt[-1], d1, d2])    cache = prompt + [d1, d2]; logits [3, vocab]: row i predicts
                                     the token after input i
    rollback(len(prompt) + 1)        cache = prompt + [d1]  (d1 accepted, d2 rejected)

Rollback is position bookkeeping: a runner whose cache cannot be cut back must refuse at construction
(UnsupportedModelError), never silently produce different text.
"""

from __future__ import annotations

from typing import Protocol, Sequence

import torch


class Runner(Protocol):
    vocab_size: int  # width of the logits rows
    max_context: int  # most tokens (prompt + output) the model can attend over

    @property
    def length(self) -> int:
        """Number of tokens in the cache."""
        ...

    def reset(self) -> None:
        """Drop the cache: start a new sequence."""
        ...

    def prefill(self, tokens: Sequence[int]) -> None:
        """Append `tokens` to the cache; no logits are returned (the engine does not need them)."""
        ...

    def forward(self, tokens: Sequence[int]) -> torch.Tensor:
        """Append `tokens` to the cache and return their logits, float32 [len(tokens), vocab_size]."""
        ...

    def rollback(self, length: int) -> None:
        """Keep the first `length` cached tokens, drop the rest."""
        ...
