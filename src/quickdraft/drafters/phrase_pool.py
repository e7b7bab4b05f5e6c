"""Phrase pool (Ouroboros, Zhao et al. 2024): short token sequences a draft model extends its
drafts with, several tokens per forward, indexed by the token they follow from.

A phrase's first token is the token it follows from: (5, 6, 7) means "after token 5, expect 6
then 7". The pool keeps at most `per_token` phrases per first token and `max_phrases` in all,
evicting the least recently used; a phrase that is a prefix of another with the same first token
adds nothing, so the pool keeps only the longer one. Recency lives in one OrderedDict for the
whole pool and one per first token, so adding, touching and evicting cost O(1) besides the prefix
checks over the (at most `per_token`) phrases of the new phrase's first token.

Example (phrase_length 3, per_token 2): add (5, 6, 7, 8) keeps (5, 6, 7); add (5, 6) is then
redundant; add (5, 9) and add (5, 4, 4) evict (5, 6, 7), the least recently used phrase after 5,
and lookup(5, 8) returns [(5, 4, 4), (5, 9)].

`harvest` turns one verification pass into phrases: where the target agreed with a rejected
draft's later tokens, its choices still say what follows those tokens.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from itertools import islice
from typing import Sequence

from ..errors import QuickdraftError

Phrase = tuple[int, ...]


@dataclass(frozen=True)
class PoolConfig:
    max_phrases: int = 8192  # phrases kept in all, across first tokens
    phrase_length: int = 6  # beta: longest phrase kept; longer ones are truncated
    per_token: int = 8  # phrases kept per first token

    def __post_init__(self) -> None:
        if self.max_phrases < 1:
            raise QuickdraftError(f"phrase pool max_phrases must be >= 1; got {self.max_phrases}")
        if self.phrase_length < 2:
            raise QuickdraftError(f"phrase pool phrase_length must be >= 2 (a first token and one to draft); "
                                  f"got {self.phrase_length}")
        if self.per_token < 1:
            raise QuickdraftError(f"phrase pool per_token must be >= 1; got {self.per_token}")


class PhrasePool:
    """Least-recently-used pool of phrases, looked up by first token.

    Example: after add((1, 2, 3)) and add((1, 4)), lookup(1, 2) == [(1, 4), (1, 2, 3)]; after
    touch((1, 2, 3)) it is [(1, 2, 3), (1, 4)].
    """

    def __init__(self, config: PoolConfig = PoolConfig()):
        self.config = config
        self._all: OrderedDict[Phrase, None] = OrderedDict()  # least recently used first
        self._by_first: dict[int, OrderedDict[Phrase, None]] = {}  # same order, per first token

    def __len__(self) -> int:
        return len(self._all)

    def clear(self) -> None:
        self._all.clear()
        self._by_first.clear()

    def _remove(self, phrase: Phrase) -> None:
        del self._all[phrase]
        bucket = self._by_first[phrase[0]]
        del bucket[phrase]
        if not bucket:
            del self._by_first[phrase[0]]

    def add(self, phrase: Sequence[int]) -> bool:
        """Insert `phrase` (truncated to phrase_length) as most recently used; True if it was new.

        A phrase already present is refreshed instead, a prefix of a kept phrase is ignored, and a
        kept phrase that is a prefix of the new one is replaced by it. Example: with (5, 6, 7)
        kept, add((5, 6)) is False and add((5, 6, 7, 8)) is True and leaves only (5, 6, 7, 8).
        """
        p: Phrase = tuple(int(t) for t in phrase[: self.config.phrase_length])
        if len(p) < 2:
            return False
        if p in self._all:
            self.touch(p)
            return False
        bucket = self._by_first.get(p[0])
        if bucket is not None:
            n = len(p)
            if any(len(q) > n and q[:n] == p for q in bucket):
                return False
            for q in [q for q in bucket if len(q) < n and p[: len(q)] == q]:
                self._remove(q)
        bucket = self._by_first.setdefault(p[0], OrderedDict())
        bucket[p] = None
        self._all[p] = None
        if len(bucket) > self.config.per_token:
            self._remove(next(iter(bucket)))
        if len(self._all) > self.config.max_phrases:
            self._remove(next(iter(self._all)))
        return True

    def lookup(self, first: int, k: int) -> list[Phrase]:
        """Up to k phrases starting with `first`, most recently used first; recency is unchanged."""
        bucket = self._by_first.get(first)
        return list(islice(reversed(bucket), max(k, 0))) if bucket is not None else []

    def touch(self, phrase: tuple[int, ...]) -> None:
        """Mark `phrase` as most recently used if it is in the pool (it proved useful)."""
        if phrase in self._all:
            self._all.move_to_end(phrase)
            self._by_first[phrase[0]].move_to_end(phrase)

    def add_from(self, tokens: Sequence[int], stride: int = 1) -> int:
        """Add the phrase_length-token phrase at every `stride`-th position of `tokens` (shorter ones
        at the tail while >= 2 tokens); returns how many were inserted.

        Example (phrase_length 3): tokens (1, 2, 3, 1, 2) adds (1, 2, 3), (2, 3, 1), (3, 1, 2) and
        ignores (1, 2), a prefix of (1, 2, 3): returns 3.
        """
        if stride < 1:
            raise QuickdraftError(f"phrase pool stride must be >= 1; got {stride}")
        L = self.config.phrase_length
        return sum(self.add(tokens[s : s + L]) for s in range(0, len(tokens) - 1, stride))


def harvest(draft: Sequence[int], choices: Sequence[int], accepted: int, min_length: int = 3) -> list[Phrase]:
    """Phrases from one verification pass, in order.

    `choices[i]` is the target's greedy choice at the position of `draft[i]` (`choices[k]` after the
    whole draft of k tokens) and `accepted` the number of leading draft tokens equal to them. Past
    the first rejection the target's context is wrong, but where it agrees with the draft it still
    says what follows those tokens: every maximal run i..j (accepted < i <= j < k) with
    draft[m] == choices[m] gives (draft[i - 1], draft[i], ..., draft[j], choices[j + 1]), kept if it
    has at least `min_length` tokens.

    Example: draft (1, 2, 3, 4, 5, 6), choices (1, 9, 3, 4, 8, 6, 7), accepted 1: the run 2..3 gives
    (2, 3, 4, 8) and the run 5..5 gives (5, 6, 7), so the result is [(2, 3, 4, 8), (5, 6, 7)]. With
    every draft token accepted there is no rejected part and the result is [].
    """
    k = len(draft)
    if len(choices) != k + 1:
        raise ValueError(f"harvest needs one choice per draft token plus one; got {len(choices)} for {k} tokens")
    if not 0 <= accepted <= k:
        raise ValueError(f"harvest accepted must be in 0..{k}; got {accepted}")
    out: list[Phrase] = []
    i = accepted + 1
    while i < k:
        if draft[i] != choices[i]:
            i += 1
            continue
        j = i
        while j + 1 < k and draft[j + 1] == choices[j + 1]:
            j += 1
        phrase = (int(draft[i - 1]), *(int(t) for t in draft[i : j + 1]), int(choices[j + 1]))
        if len(phrase) >= min_length:
            out.append(phrase)
        i = j + 1
    return out
