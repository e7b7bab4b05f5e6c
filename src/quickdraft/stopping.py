"""Stop strings over token ids: find the first token whose text completes a stop string.

A stop string may span token boundaries and draft blocks. The check meets a step's new tokens one at a time, as
plain decoding meets them, and after each looks for a stop string in the text near it (kept up to date a token at
a time: text.py), so where it fires does not depend on how tokens were grouped into passes, even where decoding a
prefix of the output gives text that is not a prefix of the whole output's (a character whose bytes are still
arriving, one U+FFFD per byte with a byte-fallback decoder; a space a tokenizer's clean-up drops later). Only settled
text is searched: the U+FFFD of a character not yet complete is not text. Text is cut before the stop string; the
token that completed it is the last token kept.
"""

from __future__ import annotations

from typing import Callable, Sequence

from .text import IncrementalText, settled_length


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
        for keep in range(first_new + 1, len(out) + 1):  # each new token, as plain decoding meets it
            start = max(0, settled_length(self._text) - self.longest)  # the text this token can have completed
            self._text.extend(out[keep - 1 : keep])
            if self.find(self._text.since(start)[: settled_length(self._text) - start]) is not None:
                return keep
        return None

    def find(self, text: str, start: int = 0) -> int | None:
        """Index in text where the earliest stop string begins, or None."""
        hits = [i for s in self.stops if (i := text.find(s, start)) >= 0]
        return min(hits) if hits else None

    def cut(self, text: str) -> str:
        i = self.find(text)
        return text if i is None else text[:i]
