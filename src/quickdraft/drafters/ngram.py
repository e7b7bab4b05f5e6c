"""Prompt lookup decoding (Saxena 2023): draft what followed the last occurrence of the context's
final n-gram, longest n first.

The index maps each n-gram (n = min_ngram..max_ngram) to the end of its latest occurrence and is
extended with the new tokens only, so one step costs O(new tokens), not O(context): a
50,000-token prompt is indexed once and looked up in constant time afterwards.

Example (max_ngram 2, num_tokens 3): context [1, 2, 3, 4, 1, 2] ends with (1, 2), which last
ended at index 2 before the current suffix; the draft is context[2:5] = (3, 4, 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..core import EMPTY_DRAFT, Draft, Verdict
from ..errors import QuickdraftError


@dataclass(frozen=True)
class LookupConfig:
    max_ngram: int = 3
    min_ngram: int = 1
    num_tokens: int = 10  # most draft tokens per proposal

    def __post_init__(self) -> None:
        if not 1 <= self.min_ngram <= self.max_ngram:
            raise QuickdraftError(f"lookup n-gram sizes must satisfy 1 <= min <= max; got {self.min_ngram}..{self.max_ngram}")
        if self.num_tokens < 1:
            raise QuickdraftError(f"lookup num_tokens must be >= 1; got {self.num_tokens}")


class PromptLookupDrafter:
    def __init__(self, config: LookupConfig = LookupConfig()):
        self.config = config
        self._index: dict[tuple[int, ...], int] = {}  # n-gram -> end of its latest occurrence
        self._indexed = 0  # n-grams ending at 1.._indexed are in the index

    def begin(self, prompt: Sequence[int]) -> None:
        self._index = {}
        self._indexed = 0

    def _extend(self, context: Sequence[int]) -> None:
        # Index n-grams ending before the last token: the suffix itself must not match itself.
        lo, hi = self.config.min_ngram, self.config.max_ngram
        for end in range(self._indexed + 1, len(context)):
            for n in range(lo, min(hi, end) + 1):
                self._index[tuple(context[end - n : end])] = end
        self._indexed = max(self._indexed, len(context) - 1)

    def propose(self, context: Sequence[int], budget: int) -> Draft:
        self._extend(context)
        k = min(budget, self.config.num_tokens)
        if k <= 0:
            return EMPTY_DRAFT
        T = len(context)
        for n in range(min(self.config.max_ngram, T), self.config.min_ngram - 1, -1):
            end = self._index.get(tuple(context[T - n :]))
            if end is not None:
                return Draft(tokens=tuple(context[end : end + k]), source="lookup")
        return EMPTY_DRAFT

    def observe(self, context: Sequence[int], verdict: Verdict) -> None:
        pass
