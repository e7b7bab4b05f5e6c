"""Prompt lookup decoding (Saxena 2023): draft what followed an earlier occurrence of the context's
final n-gram, longest n first.

The index maps each n-gram (n = min_ngram..max_ngram) to the ends of its first and KEPT_ENDS latest
occurrences and is extended with the new tokens only, so one step costs O(new tokens), not
O(context): a 50,000-token prompt is indexed once and looked up in constant time afterwards.

Which occurrence (`prefer`): by default the one the output has been copying longest, the most tokens before
the match equal to the context's last ones (ties: the earliest). Where a common 3-gram occurs in many places,
that is the place being copied, not the first place the 3-gram happens to appear.

Draft length. A match of at least `min_ngram` tokens drafts `num_tokens` (a match of a single token,
where min_ngram is 1, drafts `single_match_tokens`), or `growth` times the match's whole length where the
output has been copying that place for longer (the context's last m tokens equal the m before the match's
end), up to `max_tokens`: a long copy is drafted in long passes, as a prediction's long runs are. The
engine's cost-aware cap (sizing.py) then trims drafts to what pays on the machine. The defaults (3-grams, 24
tokens, growth 2 up to 128, the longest copy) come from replaying the drafter on plain decoding's outputs of the
benchmark (`scripts/draft_replay.py`): where a pass of a few tokens costs several one-token passes, drafts after 1-
and 2-token matches, sized together with the 3-gram ones, made prose slower than plain decoding, while 3-gram
matches are rarely wrong and still keep the long copies of summaries and code (measured:
docs/drafters.md#prompt-lookup).

Short matches. Where no match of min_ngram tokens exists, a match of `short_ngram` to min_ngram - 1 tokens drafts
`short_tokens` (4) under its own source, SHORT_SOURCE: the engine sizes each source on its own record of accepted
tokens (sizing.py; until a request has its own, at the rate SHORT_PRIOR), so these drafts, right less often, are
sent only while they pay and never shorten the long drafts of real matches. On the transformers runner a pass of a
few tokens costs about one of a single token, so a guess that is right now and then pays (replayed and measured:
docs/drafters.md#prompt-lookup). `short_ngram` 0 turns them off.

Example (max_ngram 2, num_tokens 3, growth 0): context [1, 2, 3, 4, 1, 2] ends with (1, 2), which
ended at index 2 (its only earlier occurrence); the draft is context[2:5] = (3, 4, 1). With growth 2 the
copy (1, 2) is 2 tokens long, so the draft is 4 tokens, context[2:6] = (3, 4, 1, 2).
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
# Occurrences of an n-gram that "longest" weighs: the first and this many latest (bounds a step's work in text that
# repeats an n-gram often)
KEPT_ENDS = 16
PREFER = ("longest", "first", "latest")
SHORT_SOURCE = "lookup-short"  # the source of drafts from short matches (module docstring)
# their acceptance rate assumed until a request's own evidence counts (sizing.PRIORS): with passes as steep as the
# llama.cpp runner's or float32's, the sizer sends none before they have shown they pay
SHORT_PRIOR = 0.3


@dataclass(frozen=True)
class LookupConfig:
    max_ngram: int = 3
    min_ngram: int = 3  # shorter matches do not draft (see the module docstring)
    num_tokens: int = 24  # draft length after a match of >= 2 tokens
    single_match_tokens: int = 2  # draft length after a match of 1 token, when min_ngram is 1 (0: do not draft)
    # which earlier occurrence to continue: "longest", the one the output has copied longest (among the first and
    # the KEPT_ENDS latest; ties: the earliest), "first" or "latest"
    prefer: str = "longest"
    growth: int = GROWTH  # a copy m tokens long drafts up to growth * m tokens (0: num_tokens whatever m)
    max_tokens: int = MAX_TOKENS  # the most a long copy drafts
    # where no match of min_ngram exists: matches of short_ngram..min_ngram - 1 tokens draft short_tokens, as their own
    # source (SHORT_SOURCE; module docstring); 0: they draft nothing
    short_ngram: int = 1
    short_tokens: int = 4

    def __post_init__(self) -> None:
        if not 1 <= self.min_ngram <= self.max_ngram:
            raise QuickdraftError(f"lookup n-gram sizes must satisfy 1 <= min <= max; got {self.min_ngram}..{self.max_ngram}")
        if self.prefer not in PREFER:
            raise QuickdraftError(f"lookup prefer must be one of {', '.join(map(repr, PREFER))}; got {self.prefer!r}")
        if self.num_tokens < 1 or self.single_match_tokens < 0:
            raise QuickdraftError(f"lookup draft lengths must be num_tokens >= 1 and single_match_tokens >= 0; "
                                  f"got {self.num_tokens}, {self.single_match_tokens}")
        if self.growth < 0 or self.max_tokens < 1:
            raise QuickdraftError(f"lookup growth must be >= 0 and max_tokens >= 1; "
                                  f"got {self.growth}, {self.max_tokens}")
        if self.short_ngram < 0 or self.short_tokens < 1:
            raise QuickdraftError("lookup short matches need short_ngram >= 0 (0: off) and short_tokens >= 1; "
                                  f"got {self.short_ngram}, {self.short_tokens}")

    @property
    def shortest(self) -> int:
        """The shortest match that drafts: min_ngram, or short_ngram where short matches draft."""
        return min(self.min_ngram, self.short_ngram) if self.short_ngram else self.min_ngram


class PromptLookupDrafter(Drafter):
    def __init__(self, config: LookupConfig = LookupConfig()):
        self.config = config
        # n-gram -> ends of its occurrences: the first, then up to KEPT_ENDS latest
        self._index: dict[tuple[int, ...], list[int]] = {}
        self._indexed = 0  # n-grams ending at 1.._indexed are in the index

    def begin(self, prompt: Sequence[int]) -> None:
        self._index = {}
        self._indexed = 0

    def _extend(self, context: Sequence[int]) -> None:
        # Index n-grams ending before the last token: the suffix itself must not match itself.
        lo, hi = self.config.shortest, self.config.max_ngram
        for end in range(self._indexed + 1, len(context)):
            for n in range(lo, min(hi, end) + 1):
                ends = self._index.setdefault(tuple(context[end - n : end]), [])
                ends.append(end)
                if len(ends) > KEPT_ENDS + 1:  # the first and the KEPT_ENDS latest
                    del ends[1]
        self._indexed = max(self._indexed, len(context) - 1)

    def propose(self, context: Sequence[int], budget: int) -> Draft:
        self._extend(context)
        T = len(context)
        c = self.config
        cap = -(-c.max_tokens // c.growth) if c.growth else c.max_tokens  # copies longer than this draft the same
        for n in range(min(c.max_ngram, T), c.shortest - 1, -1):
            ends = self._index.get(tuple(context[T - n :]))
            if not ends:
                continue
            # "longest": the place the output has copied longest, ties the earliest; else the first or latest
            places = ends if c.prefer == "longest" else [ends[0] if c.prefer == "first" else ends[-1]]
            m, end = max((self._copied(context, e, n, cap), -e) for e in places)
            end = -end
            if n < c.min_ngram:  # a short match (module docstring)
                k, source = c.short_tokens, SHORT_SOURCE
            else:
                k, source = (c.num_tokens if n >= 2 else c.single_match_tokens), "lookup"
                if n >= 2 and c.growth:
                    k = max(k, min(c.max_tokens, c.growth * m))
            k = min(budget, k)
            return Draft(tokens=tuple(context[end : end + k]), source=source) if k > 0 else EMPTY_DRAFT
        return EMPTY_DRAFT

    @staticmethod
    def _copied(context: Sequence[int], end: int, n: int, cap: int) -> int:
        """How many of the context's last tokens equal those before `end` (at least the n matched), counted up to
        cap."""
        T, m = len(context), n
        while m < cap and m < end and context[end - 1 - m] == context[T - 1 - m]:
            m += 1
        return m

    def observe(self, context: Sequence[int], verdict: Verdict) -> None:
        pass
