"""The Drafter protocol: propose tokens for the positions after the context, learn from verdicts.

Per request the engine calls `begin(prompt)` once, then alternates `propose` and `observe`. The
context a drafter sees only ever grows (it holds accepted tokens only), so a drafter may index it
incrementally.
"""

from __future__ import annotations

from typing import Callable, Protocol, Sequence

from ..core import EMPTY_DRAFT, Draft, Verdict


class Drafter(Protocol):
    """What the engine asks of a drafter. The two attributes are declared with their defaults, which a drafter that
    subclasses Drafter inherits (every drafter here does):

    sizes_itself   True for a drafter with its own draft-length rule, tuned without the cost cap (Ouroboros):
                   draft_sizing "auto" leaves its drafts uncapped (sizing.sizing_for)
    keep           set by the engine at the start of every request: under sampling with a sizer that trims drafts,
                   the sizer's rule keep(rates) (sizing.DraftSizer.keeps: whether the trim keeps a draft's last
                   token given its rates so far), else None. A drafter that rates its tokens as it drafts (the draft
                   model) stops drafting where it says no; the others ignore it
    """

    sizes_itself: bool = False
    keep: Callable[[Sequence[float]], bool] | None = None

    def begin(self, prompt: Sequence[int]) -> None:
        """Start a request whose context begins with `prompt`."""
        ...

    def propose(self, context: Sequence[int], budget: int) -> Draft:
        """Propose at most `budget` tokens to follow `context` (an empty draft is always allowed)."""
        ...

    def observe(self, context: Sequence[int], verdict: Verdict) -> None:
        """`verdict.tokens` were just appended to `context` (which now ends with them)."""
        ...


def sizes_itself(drafter: object) -> bool:
    """Drafter.sizes_itself, read with its default: a Drafter object a caller passes (DecodeOptions.drafter) need only
    have begin, propose and observe."""
    return bool(getattr(drafter, "sizes_itself", False))


class NoDrafter(Drafter):
    """Plain decoding: one token per target pass."""

    def begin(self, prompt: Sequence[int]) -> None:
        pass

    def propose(self, context: Sequence[int], budget: int) -> Draft:
        return EMPTY_DRAFT

    def observe(self, context: Sequence[int], verdict: Verdict) -> None:
        pass


class FirstOf(Drafter):
    """Asks each drafter in turn and takes the first non-empty draft (e.g. prediction, then lookup).

    Every drafter observes every verdict, so each keeps its own place whichever one proposed.
    """

    def __init__(self, drafters: Sequence[Drafter]):
        self.drafters = list(drafters)

    def begin(self, prompt: Sequence[int]) -> None:
        for d in self.drafters:
            d.begin(prompt)

    def propose(self, context: Sequence[int], budget: int) -> Draft:
        for d in self.drafters:
            draft = d.propose(context, budget)
            if len(draft):
                return draft
        return EMPTY_DRAFT

    def observe(self, context: Sequence[int], verdict: Verdict) -> None:
        for d in self.drafters:
            d.observe(context, verdict)
