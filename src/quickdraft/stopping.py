"""Stop strings over token ids: find the first token whose text completes a stop string.

A stop string may span token boundaries and draft blocks; the check looks at the text of the
whole output near the new tokens, so where it fires does not depend on how tokens were grouped
into passes. Text is cut before the stop string; the token that completed it is the last token
kept (the same rule for plain and drafted decoding, which is what exactness needs).
"""

from __future__ import annotations

from typing import Callable, Sequence


class StopStrings:
    def __init__(self, stops: Sequence[str], decode: Callable[[Sequence[int]], str]):
        self.stops = [s for s in stops if s]
        self.decode = decode
        self.longest = max((len(s) for s in self.stops), default=0)

    def __call__(self, out: Sequence[int], n_new: int) -> int | None:
        """Number of output tokens to keep if one of the last n_new tokens completes a stop string."""
        if not self.stops:
            return None
        first_new = len(out) - n_new
        before = len(self.decode(out[:first_new])) if first_new else 0
        text = self.decode(out)
        if self.find(text, max(0, before - self.longest)) is None:
            return None
        for keep in range(first_new + 1, len(out) + 1):  # earliest token that completes one
            if self.find(self.decode(out[:keep]), max(0, before - self.longest)) is not None:
                return keep
        return len(out)

    def find(self, text: str, start: int = 0) -> int | None:
        """Index in text where the earliest stop string begins, or None."""
        hits = [i for s in self.stops if (i := text.find(s, start)) >= 0]
        return min(hits) if hits else None

    def cut(self, text: str) -> str:
        i = self.find(text)
        return text if i is None else text[:i]
