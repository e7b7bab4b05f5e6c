"""The prediction's spans in the answer: which characters of the prediction the output kept, and where it departs
from it (inserted and dropped ranges), so that an editor can show the diff without computing one.

They come from the prediction drafter's alignment (drafters/prediction.py), step by step, not from a diff:

    kept      output tokens that followed the prediction where the drafter had its place: with the anchor a before
              the step, the step's first tokens while they equal prediction[a], prediction[a + 1], ... (accepted
              draft tokens, a bonus token that happens to be the prediction's next, tokens the target produced one
              at a time), except that a token the drafter followed through a learned substitution (a re-indented
              line's indentation) is not kept, its text differing, and the tokens after it are; and the tokens
              whose backward match let the drafter find its place again (re-entered at j, the output's tokens since
              the last kept one that match the prediction's before j, read backward).
              A run after a re-entry stays kept once it reaches CONFIRM tokens, the prediction's end or the
              output's; a shorter one (a common token matched by chance) is taken back. A kept token's prediction
              index must lie past the last kept one's: where the output re-enters earlier in the prediction (it
              repeats a piece of it), the repeat is inserted until the output passes the last kept place.
    inserted  the output's text between kept ranges (before the first, after the last).
    dropped   the prediction's text between kept ranges, which the output skipped (and what is left after the last).

Ranges are [start, end) character offsets (Python str indices: code points) into the prediction's text and the
output's text: kept (pred_start, pred_end, out_start, out_end) with the same text on both sides, increasing on both;
kept + inserted tile the output, kept + dropped tile the prediction. A token boundary becomes a character offset
through the tokenizer's own decoding (the prediction decoded a token at a time, the output as it streams); one inside
a character split across tokens goes to the character's start, and every kept range is compared with both texts
before it is kept (one that differs, a character split differently on the two sides, goes to inserted and dropped).
Where the drafter has not found its place again (or, under the openai policy, before 32 tokens agree), the output
counts as inserted and the prediction as dropped even where a diff would match them: the spans are the drafter's
alignment, a valid diff, not always the smallest.

Worked example (one character per token, default policy): prediction "abcdefgh", output "abcXefgh". Pass 1 drafts
"abcdefgh"; the target accepts "abc" and writes X for d: kept (0, 3, 0, 3), the drafter loses its place. Pass 2 is
plain and gives e, which re-enters at j = 5: e is kept (4, 5, 4, 5) unconfirmed, X inserted (3, 4), d dropped (3, 4);
pass 3 drafts "fgh", accepted: the run reaches the prediction's end, kept (4, 8, 4, 8), and all three are final.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, NamedTuple, Sequence

from .drafters.prediction import PredictionDrafter
from .text import IncrementalText, settled_length
from .tokenizer import Tokenizer

CONFIRM = 4  # tokens that a re-entry's run must reach (or the prediction's end, or the output's) to stay kept
Kept = tuple[int, int, int, int]  # (pred_start, pred_end, out_start, out_end)
Range = tuple[int, int]  # (start, end)


@dataclass
class PredictionSpans:
    """Character ranges: kept (prediction and output side), inserted (output), dropped (prediction), each in order."""

    kept: list[Kept] = field(default_factory=list)
    inserted: list[Range] = field(default_factory=list)
    dropped: list[Range] = field(default_factory=list)

    def as_dict(self) -> dict[str, list[list[int]]]:
        return {"kept": [list(k) for k in self.kept], "inserted": [list(r) for r in self.inserted],
                "dropped": [list(r) for r in self.dropped]}

    def add_kept(self, pred_start: int, pred_end: int, out_start: int, out_end: int) -> None:
        """Append a kept range, merged into the last one where they touch on both sides."""
        last = self.kept[-1] if self.kept else None
        if last is not None and (last[1], last[3]) == (pred_start, out_start):
            self.kept[-1] = (last[0], pred_end, last[2], out_end)
        else:
            self.kept.append((pred_start, pred_end, out_start, out_end))

    def add_inserted(self, out_start: int, out_end: int) -> None:
        """Append an inserted range, merged into the last one where they touch."""
        if self.inserted and self.inserted[-1][1] == out_start:
            self.inserted[-1] = (self.inserted[-1][0], out_end)
        else:
            self.inserted.append((out_start, out_end))

    def join(self, piece: "PredictionSpans") -> None:
        """Add a later piece of the same spans (a streamed chunk's), ranges that touch merged."""
        for k in piece.kept:
            self.add_kept(*k)
        for r in piece.inserted:
            self.add_inserted(*r)
        self.dropped += piece.dropped

    def empty(self) -> bool:
        return not (self.kept or self.inserted or self.dropped)


def check(spans: PredictionSpans, prediction: str, output: str) -> str | None:
    """What makes spans not a valid alignment of the two texts, or None: kept ranges hold the same text on both sides
    and increase on both; kept + inserted tile the output and kept + dropped tile the prediction."""
    if any(prediction[ps:pe] != output[os:oe] or ps >= pe for ps, pe, os, oe in spans.kept):
        return "a kept range is empty or differs between the prediction and the output"
    for side, gaps, text in ((0, spans.dropped, prediction), (2, spans.inserted, output)):
        ranges = sorted([k[side : side + 2] for k in spans.kept] + [tuple(g) for g in gaps])
        at = 0
        for start, end in ranges:
            if start != at or end <= start:
                return f"the ranges do not tile the {'prediction' if side == 0 else 'output'} at {at}"
            at = end
        if at != len(text):
            return f"the ranges end at {at}, not at the end of the {'prediction' if side == 0 else 'output'}"
    if [k[2:] for k in sorted(spans.kept)] != sorted(k[2:] for k in spans.kept):
        return "kept ranges are not in the same order on both sides"
    return None


def prediction_drafter(drafter: object) -> PredictionDrafter | None:
    """The PredictionDrafter of a request's drafter (itself, or the one in a FirstOf chain), or None."""
    if isinstance(drafter, PredictionDrafter):
        return drafter
    return next((d for d in getattr(drafter, "drafters", ()) if isinstance(d, PredictionDrafter)), None)


def span_tracker(drafter: object, prediction: str, tokenizer: Tokenizer) -> SpanTracker | None:
    """The tracker of a request with a prediction; None where its drafter has no prediction drafter, or the spans
    could not be exact: a tokenizer that does not decode a text piece by piece (tokenizer.decodes_locally), or a
    prediction that its own tokens do not decode back to (characters the vocabulary lacks, special tokens' text)."""
    drafter = prediction_drafter(drafter)
    if drafter is None or not tokenizer.decodes_locally or tokenizer.decode(drafter.prediction) != prediction:
        return None
    return SpanTracker(drafter, prediction, tokenizer.decode)


class Op(NamedTuple):
    """One piece of the alignment, as difflib's opcodes: "kept" (both ranges, the same text), "inserted" (an empty
    prediction range where the output's text goes in), "dropped" (an empty output range where the prediction's goes)."""

    tag: str
    pred_start: int
    pred_end: int
    out_start: int
    out_end: int


class SpanTracker:
    """Follows one generation's prediction drafter step by step; the Stream hands out the spans as they become final.

    Per step the Stream asks `runs(tokens)` (which of the step's tokens are on the prediction, from the drafter's
    anchor before the step), extends its text at every run's end and at the step's end, and calls `step`. Work per step
    is O(its tokens), plus the prediction's offsets, decoded a token at a time up to the furthest place used.
    """

    def __init__(self, drafter: PredictionDrafter, prediction: str, decode: Callable[[Sequence[int]], str]):
        self.drafter, self.prediction, self.ids = drafter, prediction, drafter.prediction
        self._decoded = IncrementalText(decode)  # the prediction a token at a time: its token boundaries in characters
        self._offsets = [0]  # _offsets[b]: characters of the prediction's first b tokens
        self.anchor: int | None = 0 if self.ids else None  # the drafter's anchor before the step (begin's at first)
        self.realignments = 0
        self.pred_tok = self.out_tok = 0  # tokens before these cannot be kept any more (kept ranges increase)
        self.pred_char = self.out_char = 0  # where the last kept range ends, in the prediction and the output
        self.ops: list[Op] = []  # in the output's order; an inserted and a dropped one come before the kept one
        self.finished, self.valid = False, True
        self._unconfirmed: tuple[int, ...] | None = None  # len(ops) and the bounds before an unconfirmed re-entry
        self._run = 0  # tokens kept since that re-entry
        self._next, self._sent = 0, 0  # the first op not yet handed out whole; output characters handed out
        self._walked = 0  # tokens of the last runs() on the prediction, substituted ones included

    def runs(self, tokens: Sequence[int]) -> list[tuple[int, int]]:
        """The step's runs [i0, i1) of tokens equal to the prediction's from the drafter's anchor on, in order: the
        first from 0 where the step starts on the prediction. A token the drafter drafted through a learned substitution
        (drafters/prediction.py: a re-indented line's indentation) ends a run and the next one starts after it."""
        a, found, i, start = self.anchor, [], 0, 0
        self._walked = 0
        if a is None:
            return found
        substituted = set(self.drafter.substituted)  # the drafter has seen the step
        while i < len(tokens) and a + i < len(self.ids):
            if tokens[i] != self.ids[a + i]:
                if a + i not in substituted:
                    break
                if i > start:
                    found.append((start, i))
                start = i + 1
            i += 1
        if i > start:
            found.append((start, i))
        self._walked = i  # tokens the prediction covers, substituted ones included
        return found

    def step(self, tokens: Sequence[int], observed: int, runs: list[tuple[int, int]], chars: dict[int, int],
             text: IncrementalText) -> None:
        """After a step: tokens, with `runs` (from runs(tokens), before the step) on the prediction; observed: how many
        tokens the drafter saw (the verdict's, more than the step's where a stopping rule cut it); chars: the output's
        settled length after the step's first i tokens, for i at every run's end and at the step's end; text: the
        output's text."""
        d, a, n, walked = self.drafter, self.anchor, len(text.tokens), self._walked
        for i0, i1 in runs:  # tokens[i0:i1] are prediction[a + i0 : a + i1]
            if max(a + i0, self.pred_tok) < a + i1:
                self._keep(max(a + i0, self.pred_tok), a + i1, n - len(tokens) + i1, chars[i1], text)
        if self._unconfirmed is not None:  # the run since a re-entry: confirmed, still open, or a false start
            self._run += walked
            if self._run >= CONFIRM or a + walked == len(self.ids):
                self._unconfirmed = None
            elif walked < len(tokens):  # left the prediction again
                del self.ops[self._unconfirmed[0] :]
                _, self.pred_tok, self.out_tok, self.pred_char, self.out_char = self._unconfirmed
                self._unconfirmed = None
        if d.realignments != self.realignments:  # the output re-entered the prediction at the drafter's new anchor
            self.realignments = d.realignments
            unconfirmed = (len(self.ops), self.pred_tok, self.out_tok, self.pred_char, self.out_char)
            self._run = self.reenter(d.anchor - (observed - len(tokens)), chars[len(tokens)], text)  # less a stop's cut
            self._unconfirmed = unconfirmed if 0 < self._run < CONFIRM else None
        self.anchor = d.anchor

    def reenter(self, j: int, at_end: int, text: IncrementalText) -> int:
        """The output re-entered the prediction before its token j: keep the tokens since the last kept one that
        match the prediction's before j, read backward (the drafter's evidence, and any further back); how many."""
        out, n, L = text.tokens, len(text.tokens), 0
        while n - L > self.out_tok and j - L > self.pred_tok and out[n - 1 - L] == self.ids[j - 1 - L]:
            L += 1
        return self._keep(j - L, j, n, at_end, text) if L else 0

    def _offset(self, b: int) -> int:
        while len(self._offsets) <= b:  # decode the prediction a token further
            self._decoded.extend(self.ids[len(self._offsets) - 1 : len(self._offsets)])
            self._offsets.append(settled_length(self._decoded))
        return self._offsets[b]

    def _keep(self, p0: int, p1: int, o1: int, out_end: int, text: IncrementalText) -> int:
        """prediction[p0:p1] are the output's tokens ending at o1, its text ending at character out_end: keep them
        if the texts agree; how many tokens were kept."""
        ps, pe = self._offset(p0), self._offset(p1)
        os = out_end - (pe - ps)
        skip = max(0, self.pred_char - ps, self.out_char - os)  # never before the last kept range
        ps, os = ps + skip, os + skip
        if ps < pe and self.prediction[ps:pe] != text.since(os)[: out_end - os]:
            ps, os = ps + 1, os + 1  # a character split differently on the two sides starts it
        if ps >= pe or self.prediction[ps:pe] != text.since(os)[: out_end - os]:
            return 0
        if os > self.out_char:
            self.ops.append(Op("inserted", self.pred_char, self.pred_char, self.out_char, os))
        if ps > self.pred_char:
            self.ops.append(Op("dropped", self.pred_char, ps, os, os))
        self.ops.append(Op("kept", ps, pe, os, out_end))
        self.pred_tok, self.out_tok, self.pred_char, self.out_char = p1, o1, pe, out_end
        return p1 - p0

    def finish(self, output: str, text: IncrementalText) -> None:
        """The generation ended with `output` (text's, maybe cut by a stop string). An output ending as the prediction
        does re-enters it at its end (where the drafter, with nothing left to draft, does not re-anchor); then the
        spans are clipped to the output, the output after the last kept range is inserted, the prediction's dropped."""
        self._unconfirmed = None  # the output ended on the prediction
        self.reenter(len(self.ids), settled_length(text), text)
        length = len(output)
        for i, op in enumerate(self.ops):
            if op.out_start >= length:
                del self.ops[i:]  # past the final text, and everything after it
                break
            if op.out_end > length:
                cut = op.out_end - length
                self.ops[i] = op._replace(pred_end=op.pred_end - cut if op.tag == "kept" else op.pred_end, out_end=length)
        pred_end = max((op.pred_end for op in self.ops), default=0)
        out_end = max((op.out_end for op in self.ops), default=0)
        if out_end < length:
            self.ops.append(Op("inserted", pred_end, pred_end, out_end, length))
        if pred_end < len(self.prediction):
            self.ops.append(Op("dropped", pred_end, len(self.prediction), length, length))
        self.finished = True
        self.valid = check(self.result(), self.prediction, output) is None  # by construction; a tokenizer could differ

    def take(self, upto: int) -> PredictionSpans | None:
        """The spans that became final up to output character `upto` since the last take (a kept or inserted range
        split there), or None if none did. A dropped range goes out once the output is handed out past it (at the
        end: once the generation finished)."""
        spans = PredictionSpans()
        firm = len(self.ops) if self._unconfirmed is None else self._unconfirmed[0]
        while self._next < firm:
            op = self.ops[self._next]
            if op.tag == "dropped":
                if op.out_start >= upto and not self.finished:
                    break
                spans.dropped.append((op.pred_start, op.pred_end))
                self._next += 1
                continue
            if op.out_end <= self._sent:  # handed out whole before finish clipped it
                self._next += 1
                continue
            lo, hi = max(op.out_start, self._sent), min(op.out_end, upto)
            if lo >= hi:
                break
            if op.tag == "kept":
                spans.add_kept(op.pred_start + lo - op.out_start, op.pred_start + hi - op.out_start, lo, hi)
            else:
                spans.add_inserted(lo, hi)
            self._sent = hi
            if hi < op.out_end:
                break
            self._next += 1
        return None if spans.empty() else spans

    def result(self) -> PredictionSpans | None:
        """Every span so far, kept ranges that touch on both sides merged into one; None if the finished spans were
        not a valid alignment of the two texts (the checks at every kept range make that a tokenizer's oddity)."""
        if not self.valid:
            return None
        spans = PredictionSpans()
        for op in self.ops:
            if op.tag == "kept":
                spans.add_kept(*op[1:])
            elif op.tag == "inserted":
                spans.add_inserted(op.out_start, op.out_end)
            else:
                spans.dropped.append((op.pred_start, op.pred_end))
        return spans
