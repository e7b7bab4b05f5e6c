"""Stop strings over token ids: find the first token whose text completes a stop string.

A stop string may span token boundaries and draft blocks; the check looks at the text of the
output near the new tokens (kept up to date a step at a time: text.py), so where it fires does not
depend on how tokens were grouped into passes. Text is cut before the stop string; the token that completed it is the last token
kept (the same rule for plain and drafted decoding, which is what exactness needs).
"""

from __future__ import annotations

from typing import Callable, Sequence

from .text import IncrementalText


class StopStrings:
    """One generation's stop strings: call it with the output after each step (the engine's stop_check)."""

    def __init__(self, stops: Sequence[str], decode: Callable[[Sequence[int]], str], local: bool = True):
        self.stops = [s for s in stops if s]
        self.decode, self.local = decode, local  # local: the tokenizer's decodes_locally (text.py)
        self.longest = max((len(s) for s in self.stops), default=0)
        self._text = IncrementalText(decode, local)  # the text of the output seen so far (text.py)
        self._out: Sequence[int] | None = None  # the output list it follows

    def __call__(self, out: Sequence[int], n_new: int) -> int | None:
        """Number of output tokens to keep if one of the last n_new tokens completes a stop string."""
        if not self.stops:
            return None
        first_new = len(out) - n_new
        if out is not self._out or len(self._text.tokens) != first_new:  # another output: follow it from its start
            self._text, self._out = IncrementalText(self.decode, self.local), out
            self._text.extend(out[:first_new])
        before = len(self._text)
        self._text.extend(out[first_new:])
        start = max(0, before - self.longest)
        if self.find(self._text.since(start)) is None:  # only the text the new tokens can have completed
            return None
        for keep in range(first_new + 1, len(out) + 1):  # earliest token that completes one (once a request)
            if self.find(self.decode(out[:keep]), start) is not None:
                return keep
        return len(out)

    def find(self, text: str, start: int = 0) -> int | None:
        """Index in text where the earliest stop string begins, or None."""
        hits = [i for s in self.stops if (i := text.find(s, start)) >= 0]
        return min(hits) if hits else None

    def cut(self, text: str) -> str:
        i = self.find(text)
        return text if i is None else text[:i]
