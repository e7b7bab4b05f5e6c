"""The output's text, kept up to date as tokens arrive, at a cost per step that does not grow with the output.

Streaming, stop strings and the draft/target segments need the text of the output so far after every
step. Decoding the whole output each time is quadratic in its length, and whole-file edits are long. Here
only the tokens since the last settled point are decoded again, with the few tokens before them as
context (as vLLM's incremental detokenizer does), because a tokenizer may render a token differently at
the start of a text (SentencePiece drops the leading space) than after other tokens:

    tokens      [ ...settled... | context | new ]
    window    = decode(context + new)
    new text  = window[len(decode(context)):]

The new text settles, and the window moves on, once it does not end in U+FFFD (a character whose bytes
are split across tokens). Where decoding is not local that way (a tokenizer that cleans up spaces around
punctuation changes earlier text when a later token comes: `local=False`, from the tokenizer's
`decodes_locally`), the whole output is decoded every step, as before. A window that does not start with
its context's text also falls back to decoding the whole output for that step.

    >>> t = IncrementalText(ByteTokenizer().decode)
    >>> t.extend(list("héllo".encode())[:2]); t.text      # 'h' and the first byte of 'é'
    'h\ufffd'
    >>> t.extend(list("héllo".encode())[2:]); t.text
    'héllo'
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Callable, Sequence

REPLACEMENT = "\ufffd"


class IncrementalText:
    def __init__(self, decode: Callable[[Sequence[int]], str], local: bool = True):
        self.decode, self.local = decode, local
        self.tokens: list[int] = []
        self._settled: list[str] = []  # the text of tokens[:_read], in pieces
        self._settled_len = 0
        self._prefix = 0  # tokens[_prefix:_read]: the context decoded again with the new tokens
        self._read = 0
        self._context = ""  # decode(tokens[_prefix:_read])
        self._tail = ""  # the text of tokens[_read:]; may end in U+FFFD

    def __len__(self) -> int:
        return self._settled_len + len(self._tail)

    @property
    def text(self) -> str:
        """decode(tokens) (joined: O(length); for the end of a generation)."""
        return "".join(self._settled) + self._tail

    def since(self, start: int) -> str:
        """text[start:], at a cost that grows with what is returned, not with the whole text."""
        if start >= self._settled_len:
            return self._tail[start - self._settled_len :]
        pieces, at = [self._tail], self._settled_len
        for piece in reversed(self._settled):
            if at <= start:
                break
            at -= len(piece)
            pieces.append(piece[max(0, start - at) :])
        return "".join(reversed(pieces))

    def extend(self, new: Sequence[int]) -> None:
        self.tokens.extend(new)
        window = self.decode(self.tokens[self._prefix :])
        if not self.local or not window.startswith(self._context):  # decode it all again
            self._settled, self._settled_len = [], 0
            self._prefix = self._read = 0
            self._context = ""
            window = self.decode(self.tokens)
        self._tail = window[len(self._context) :]
        if not self._tail.endswith(REPLACEMENT):  # settle: the window moves on
            self._settled.append(self._tail)
            self._settled_len += len(self._tail)
            self._prefix, self._read = self._read, len(self.tokens)
            self._context = self.decode(self.tokens[self._prefix : self._read])
            self._tail = ""


def settled_length(text: IncrementalText) -> int:
    """len(text) without the U+FFFD of a character whose bytes are not all there yet: a token boundary inside a
    character counts as the character's start."""
    n = len(text)
    tail = text.since(max(0, n - 8))
    return n - (len(tail) - len(tail.rstrip(REPLACEMENT)))


class Origins:
    """Where the output's text changes origin, draft-accepted (True) or the target's own (False), as
    character offsets: to split streamed pieces and the final text into coloured segments.

    Offsets are taken from IncrementalText after each run of tokens; where a run ends inside a character
    split across tokens they are off by that character, which only moves a colour by a character.
    """

    def __init__(self) -> None:
        self.ends: list[int] = []  # run i covers text[ends[i - 1]:ends[i]]; the last run extends to the end
        self.flags: list[bool] = []

    def add(self, end: int, from_draft: bool) -> None:
        if self.flags and self.flags[-1] == from_draft:
            self.ends[-1] = max(self.ends[-1], end)
        else:
            self.ends.append(max(end, self.ends[-1] if self.ends else 0))
            self.flags.append(from_draft)

    def split(self, start: int, piece: str) -> tuple[tuple[str, bool], ...]:
        """piece (the text from offset start on) as (text, from_draft) runs that join to it."""
        segments, at, stop = [], start, start + len(piece)
        while at < stop:
            i = min(bisect_right(self.ends, at), len(self.ends) - 1)
            end = stop if i == len(self.ends) - 1 else min(self.ends[i], stop)
            segments.append((piece[at - start : end - start], self.flags[i]))
            at = end
        return tuple(segments)
