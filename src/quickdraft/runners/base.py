"""The Runner protocol: what the engine needs from a model.

A runner owns the model's KV cache for one sequence. The engine keeps this invariant: the cache holds
every context token but the last one, which goes in as the first input of the next `forward`.

    prefill(prompt[:-1])             cache = prompt[:-1]
    forward([prompt[-1], d1, d2])    cache = prompt + [d1, d2]; logits [3, vocab]: row i predicts
                                     the token after input i
    rollback(len(prompt) + 1)        cache = prompt + [d1]  (d1 accepted, d2 rejected)

Tree drafts (trees.py) need two more methods, which a runner offers only where it can do them
exactly (`supports_trees`):

    forward_tree([root, a, b, c], parents=(-1, 0, 0))   cache = prompt + [a, b, c]; each input
                                     attends to its ancestors only; logits [4, vocab]
    keep(len(prompt) - 1, rows=(0, 2))                   cache = prompt + [b]  (path root-b kept)

Rollback is position bookkeeping: a runner whose cache cannot be cut back must refuse at construction
(UnsupportedModelError), never silently produce different text.
"""

from __future__ import annotations

from typing import Protocol, Sequence

import torch


class Runner(Protocol):
    """What the engine needs from a model, and what it may do with it.

    The capabilities below are declared with the value that means "not this runner": a runner that subclasses
    Runner inherits them and sets only the ones it has (the transformers runner, which does not subclass it, sets
    every one the engine and the Generator read in its constructor). The engine reads them as attributes.
    """

    vocab_size: int  # width of the logits rows
    max_context: int  # most tokens (prompt + output) the model can attend over
    # verifies tree drafts (TreeRunner: forward_tree and keep); False where it cannot (e.g. sliding-window caches)
    supports_trees: bool = False
    # where every pass is computed in products of this many rows (the transformers runner in bf16 with AMX:
    # invariance.FixedRows), so a pass costs whole blocks: the engine keeps a linear draft from spilling a few rows
    # into another block (sizing.block_fit). None: passes cost by their tokens
    row_block: int | None = None
    # "cost" where every draft should be capped at the length that pays because a pass costs nearly in proportion
    # to its tokens (llama.cpp); draft_sizing "auto" follows it (sizing.sizing_for). None: no preference
    draft_sizing: str | None = None
    # whether a pass gives each row the bits a one-token pass gives it, as the load's check found (the
    # transformers runner: runners/load.exact_runner); None where the runner does not check (Stats.row_invariant)
    row_invariant: bool | None = None
    # prefix reuse (the transformers and llama.cpp runners set both True): reuse_prefix, whether the runner keeps
    # the prefill chunks of earlier sequences at all (the bench turns it off, so that every method pays its own
    # prefill); take_prefix, whether prefill may take them (a request with prefix_reuse False turns it off for its
    # own run: api.Stream)
    reuse_prefix: bool = False
    take_prefix: bool = False

    @property
    def length(self) -> int:
        """Number of tokens in the cache."""
        ...

    def reset(self) -> None:
        """Drop the cache: start a new sequence."""
        ...

    def prefill(self, tokens: Sequence[int]) -> int | None:
        """Append `tokens` to the cache; no logits are returned (the engine does not need them). Returns how many
        of them were not computed but taken from the cache of an earlier sequence (prefix reuse; only where the
        rows are the bits computing them would give), or 0 / None where none were."""
        ...

    def forward(self, tokens: Sequence[int]) -> torch.Tensor:
        """Append `tokens` to the cache and return their logits, float32 [len(tokens), vocab_size]."""
        ...

    def rollback(self, length: int) -> None:
        """Keep the first `length` cached tokens, drop the rest."""
        ...


class TreeRunner(Runner, Protocol):
    """A runner that verifies tree drafts: supports_trees True, and these two methods."""

    def forward_tree(self, tokens: Sequence[int], parents: Sequence[int]) -> torch.Tensor:
        """Append `tokens` ([root, *draft]) to the cache, each attending to the cache and its ancestors
        (parents: the draft's, trees.py); return their logits, float32 [len(tokens), vocab_size]."""
        ...

    def keep(self, start: int, rows: Sequence[int]) -> None:
        """Keep the first `start` cached tokens and, after them, the tokens at offsets `rows` (increasing)
        from `start`; drop the rest."""
        ...


def draft_sizing_preference(runner: object) -> str | None:
    """Runner.draft_sizing, read with its default: the transformers runner does not declare it (it does not subclass
    Runner), and sizing.sizing_for is also asked about objects that are no runner at all (tests)."""
    return getattr(runner, "draft_sizing", None)


def reusable_prefix(chunked: Sequence[int], tokens: Sequence[int], chunk: int) -> int:
    """How many of `tokens` a new sequence can take from a cache whose first rows hold `chunked` (computed by whole
    prefill passes of `chunk` tokens from position 0): their common prefix, cut down to whole chunks.

    Example, chunk 4: chunked (1 2 3 4 5 6 7 8), tokens (1 2 3 4 5 6 9 9 9) -> 4."""
    common = 0
    for a, b in zip(chunked, tokens):
        if a != b:
            break
        common += 1
    return common - common % chunk
