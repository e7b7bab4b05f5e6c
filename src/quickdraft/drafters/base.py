"""The Drafter protocol: propose tokens for the positions after the context, learn from verdicts.

Per request the engine calls `begin(prompt)` once, then alternates `propose` and `observe`. The
context a drafter sees only ever grows (it holds accepted tokens only), so a drafter may index it
incrementally.
"""

from __future__ import annotations

from typing import Protocol, Sequence

from ..core import EMPTY_DRAFT, Draft, Verdict


class Drafter(Protocol):
    """Optional attribute, read with a default by sizes_itself() (a drafter need not define it):

    sizes_itself: bool   True for a drafter with its own draft-length rule, measured without the cost
                         cap (Ouroboros): draft_sizing "auto" leaves its drafts uncapped (sizing.sizing_for)
    keep: Callable | None    where a drafter has it (the draft model), the engine sets it under sampling when
                             a sizer trims the drafts: keep(rates) says whether the trim keeps a draft's last
                             token given its rates so far (sizing.DraftSizer.keeps), to stop drafting there
    """

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
    """The Drafter protocol's optional `sizes_itself` (False where a drafter does not say)."""
    return bool(getattr(drafter, "sizes_itself", False))


class NoDrafter:
    """Plain decoding: one token per target pass."""

    def begin(self, prompt: Sequence[int]) -> None:
        pass

    def propose(self, context: Sequence[int], budget: int) -> Draft:
        return EMPTY_DRAFT

    def observe(self, context: Sequence[int], verdict: Verdict) -> None:
        pass


class FirstOf:
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
