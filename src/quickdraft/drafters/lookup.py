"""Prompt lookup decoding (Saxena 2023): draft what followed an earlier occurrence of the context's
final n-gram, longest n first.

The index maps each n-gram (n = min_ngram..max_ngram) to the end of its first (or latest)
occurrence and is extended with the new tokens only, so one step costs O(new tokens), not
O(context): a 50,000-token prompt is indexed once and looked up in constant time afterwards.

Draft length. A match of at least `min_ngram` tokens drafts `num_tokens` (a match of a single token,
where min_ngram is 1, drafts `single_match_tokens`), or `growth` times the match's whole length where the
output has been copying that place for longer (the context's last m tokens equal the m before the match's
end), up to `max_tokens`: a long copy is drafted in long passes, as a prediction's long runs are. The
engine's cost-aware cap (sizing.py) then trims drafts to what pays on the machine. The defaults (3-grams
only, 24 tokens, growth 2 up to 128) come from replaying the drafter on plain decoding's outputs of the
benchmark (`scripts/draft_replay.py`): where a pass of a few
tokens costs several one-token passes, drafts after 1- and 2-token matches are wrong often enough on prose to
make it slower than plain decoding, while 3-gram matches are rarely wrong and still keep the long copies of
summaries and code (measured: docs/drafters.md#prompt-lookup).

Example (max_ngram 2, num_tokens 3, growth 0): context [1, 2, 3, 4, 1, 2] ends with (1, 2), which first
ended at index 2; the draft is context[2:5] = (3, 4, 1). With growth 2 the copy (1, 2) is 2 tokens long, so the
draft is 4 tokens, context[2:6] = (3, 4, 1, 2).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..core import EMPTY_DRAFT, Draft, Verdict
from ..errors import QuickdraftError
from .base import Drafter


# A copy m tokens long drafts up to GROWTH * m tokens, at most MAX_TOKENS: the prediction drafter's growth and longest
# draft (drafters/prediction.py), chosen by replay (measured: docs/drafters.md#prompt-lookup)
GROWTH = 2
MAX_TOKENS = 128


@dataclass(frozen=True)
class LookupConfig:
    max_ngram: int = 3
    min_ngram: int = 3  # shorter matches do not draft (see the module docstring)
    num_tokens: int = 24  # draft length after a match of >= 2 tokens
    single_match_tokens: int = 2  # draft length after a match of 1 token, when min_ngram is 1 (0: do not draft)
    prefer: str = "first"  # which earlier occurrence to continue: "first" or "latest"
    growth: int = GROWTH  # a copy m tokens long drafts up to growth * m tokens (0: num_tokens whatever m)
    max_tokens: int = MAX_TOKENS  # the most a long copy drafts

    def __post_init__(self) -> None:
        if not 1 <= self.min_ngram <= self.max_ngram:
            raise QuickdraftError(f"lookup n-gram sizes must satisfy 1 <= min <= max; got {self.min_ngram}..{self.max_ngram}")
        if self.prefer not in ("latest", "first"):
            raise QuickdraftError(f"lookup prefer must be 'first' or 'latest'; got {self.prefer!r}")
        if self.num_tokens < 1 or self.single_match_tokens < 0:
            raise QuickdraftError(f"lookup draft lengths must be num_tokens >= 1 and single_match_tokens >= 0; "
                                  f"got {self.num_tokens}, {self.single_match_tokens}")
        if self.growth < 0 or self.max_tokens < 1:
            raise QuickdraftError(f"lookup growth must be >= 0 and max_tokens >= 1; "
                                  f"got {self.growth}, {self.max_tokens}")


class PromptLookupDrafter(Drafter):
    def __init__(self, config: LookupConfig = LookupConfig()):
        self.config = config
        self._index: dict[tuple[int, ...], int] = {}  # n-gram -> end of its first/latest occurrence
        self._indexed = 0  # n-grams ending at 1.._indexed are in the index

    def begin(self, prompt: Sequence[int]) -> None:
        self._index = {}
        self._indexed = 0

    def _extend(self, context: Sequence[int]) -> None:
        # Index n-grams ending before the last token: the suffix itself must not match itself.
        lo, hi = self.config.min_ngram, self.config.max_ngram
        latest = self.config.prefer == "latest"
        for end in range(self._indexed + 1, len(context)):
            for n in range(lo, min(hi, end) + 1):
                gram = tuple(context[end - n : end])
                if latest or gram not in self._index:
                    self._index[gram] = end
        self._indexed = max(self._indexed, len(context) - 1)

    def propose(self, context: Sequence[int], budget: int) -> Draft:
        self._extend(context)
        T = len(context)
        for n in range(min(self.config.max_ngram, T), self.config.min_ngram - 1, -1):
            end = self._index.get(tuple(context[T - n :]))
            if end is not None:
                k = self.config.num_tokens if n >= 2 else self.config.single_match_tokens
                if n >= 2 and self.config.growth:
                    k = max(k, min(self.config.max_tokens, self.config.growth * self._copied(context, end, n)))
                k = min(budget, k)
                return Draft(tokens=tuple(context[end : end + k]), source="lookup") if k > 0 else EMPTY_DRAFT
        return EMPTY_DRAFT

    def _copied(self, context: Sequence[int], end: int, n: int) -> int:
        """How many of the context's last tokens equal those before `end` (at least the n matched), counted up to
        the length at which the draft stops growing."""
        T, m = len(context), n
        cap = -(-self.config.max_tokens // self.config.growth)
        while m < cap and m < end and context[end - 1 - m] == context[T - 1 - m]:
            m += 1
        return m

    def observe(self, context: Sequence[int], verdict: Verdict) -> None:
        pass
