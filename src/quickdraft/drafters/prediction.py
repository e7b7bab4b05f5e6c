"""Predicted Outputs: draft from text the caller expects the output to be.

The prediction is tokenised once. The drafter keeps an *anchor*: the index in the prediction of
the token it expects the output to produce next, and drafts prediction[anchor : anchor + k].

While the output follows the prediction the anchor moves with it. When the output departs from it
(the target rejected a draft token, or produced a token the prediction does not have next), the
anchor is lost and the drafter looks for its place again after every step:

Realignment. Let `out` be the output so far and `hint` the index the output would be at if the
edit was a replacement of equal length (anchor at the miss + tokens emitted since). A candidate is
an index j such that the last L output tokens equal prediction[j-L : j] (the output has just
"re-entered" the prediction, and prediction[j] comes next). Candidates come from two indexes:
  * far: the j whose preceding `strong_ngram` tokens equal the output's last `strong_ngram`
    tokens (jumps over deletions and insertions of any size); the 16 nearest to hint on each side;
  * near: every j within `window` of hint whose preceding token equals the output's last token
    (a short insertion, deletion or replacement close to where we lost our place).
Each candidate's L is the length of the backward match (capped at `max_match`), counting only
output produced since the alignment was lost: tokens matched under the old alignment are no
evidence for a new one (in repetitive text they would re-anchor the drafter where it just failed).
The winner has the
largest L, then the smallest |j - hint|, then lies at or after hint. It must have L >= the policy's
`recovery_threshold`, or the drafter stays quiet (the target decodes plainly) and tries again next
step. Right at a departure from an anchor that at least `replace_after` output tokens had confirmed, hint
itself counts as L = 1 (the output replaced one token and goes on as the prediction does: a renamed name, a
re-indented line), so it wins over one-token matches elsewhere, not over longer evidence, nor over a one-token
match next to it (j = hint +- 1: one token dropped or added). In the example below, with at least 8 tokens
agreed before X, the drafter drafts "efgh" at once instead of waiting a plain step for e.

Worked example (tokens as letters): prediction "abcdefgh", output so far "abcX" (X replaced d).
hint = 4 (e). No candidate ends with X, so the next step is plain and yields e; now "e" precedes
j = 5 (f) with L = 1 near hint, so with recovery_threshold 1 the drafter re-anchors at 5 and
drafts "fgh".

Substitutions. Where the output left the prediction by writing one token Y in place of the prediction's X and then
went on as the prediction does (a re-indented line, a renamed name), the drafter learns X -> Y and drafts Y wherever
X comes next; the output writing X there again ends the substitution, without losing the anchor. A refactor that
moves a method out of its class re-indents every line of it: each indentation token misses once, instead of once per
line (replayed: docs/predicted-outputs.md#substitutions). Example (letters): prediction "aXbcXdeXf", output "aYbcYdeYf":
the first Y misses; once b confirms the replacement, X -> Y is learned and "cYdeYf" is drafted in one piece.

Policies:
  * "openai": what OpenAI's hosted service was measured to do (see docs/predicted-outputs.md):
    a fixed draft of at most 16 tokens per pass, and after the output departs from the prediction
    no drafting until the last 32 output tokens match 32 consecutive prediction tokens.
  * "default": re-anchors as soon as one token of agreement is seen near the hint (or 2 far
    away), and sizes each draft by the current run of agreement: a draft `growth` (2) times the number
    of consecutive output tokens matching the prediction at the anchor, between min_draft and
    max_draft. A fresh prediction starts with `initial_draft`. A run that keeps being right triples
    the draft every pass (8, 20, 62, 128 after a one-token re-anchor); a miss cuts it back to min_draft
    (the new anchor's evidence is shorter). The sizer (sizing.py) caps what is sent by the pass costs.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Literal, Sequence, get_args

from ..core import EMPTY_DRAFT, Draft, Verdict
from ..errors import QuickdraftError
from .base import Drafter

# The policy names, defined here once (every front end takes them from here)
Policy = Literal["default", "openai"]
POLICIES: tuple[Policy, ...] = get_args(Policy)


@dataclass(frozen=True)
class PredictionConfig:
    policy: Policy = "default"
    initial_draft: int = 16  # draft length before any output exists
    # after a miss: a pass of a few tokens costs little more than one (measured: docs/predicted-outputs.md#policies)
    min_draft: int = 8
    max_draft: int = 128  # a 129-row pass still pays on a right run (docs/predicted-outputs.md#policies)
    growth: int = 2  # a draft is this many times the current run of agreement
    replace_after: int = 8  # agreed tokens before a departure from the anchor is first read as a replacement
    recovery_threshold: int = 1  # tokens of agreement needed to re-anchor after a departure
    # Re-anchoring evidence (replayed: docs/predicted-outputs.md#finding-its-place-again): two tokens anywhere, one
    # near hint. A wider near window re-anchored on common tokens (",", " =") in changed code and moved hint there.
    strong_ngram: int = 2  # n-gram length of the far (any distance) candidate index
    window: int = 24  # how far from hint a one-token match may re-anchor
    max_match: int = 64  # cap on backward match length when scoring candidates
    substitute: bool = True  # learn one-token replacements and draft them where the token recurs (module docstring)

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise QuickdraftError(f"prediction policy must be {' or '.join(map(repr, POLICIES))}; got {self.policy!r}")
        if not 1 <= self.min_draft <= self.max_draft:
            raise QuickdraftError(f"draft lengths must satisfy 1 <= min_draft <= max_draft; got {self.min_draft}, {self.max_draft}")
        if self.recovery_threshold < 1 or self.strong_ngram < 1 or self.window < 0 or self.growth < 1:
            raise QuickdraftError("recovery_threshold, strong_ngram and growth must be >= 1, window >= 0")

    @classmethod
    def for_policy(cls, policy: Policy) -> "PredictionConfig":
        if policy == "openai":
            return cls(policy="openai", initial_draft=16, min_draft=16, max_draft=16, recovery_threshold=32,
                       strong_ngram=4, window=64, max_match=32, substitute=False)
        return cls(policy=policy)


class PredictionDrafter(Drafter):
    def __init__(self, prediction: Sequence[int], config: PredictionConfig = PredictionConfig()):
        self.prediction = list(prediction)
        self.config = config
        G = config.strong_ngram
        self._near: dict[int, list[int]] = {}  # token -> sorted j with prediction[j-1] == token
        self._far: dict[tuple[int, ...], list[int]] = {}  # G-gram -> sorted j with prediction[j-G:j] == gram
        for j in range(1, len(self.prediction) + 1):
            self._near.setdefault(self.prediction[j - 1], []).append(j)
            if j >= G:
                self._far.setdefault(tuple(self.prediction[j - G : j]), []).append(j)
        self.begin(())

    def begin(self, prompt: Sequence[int]) -> None:
        self.prompt_len = len(prompt)
        self.anchor: int | None = 0 if self.prediction else None
        self.run = -(-self.config.initial_draft // self.config.growth)  # run of agreement (the start is trusted)
        self.agreed = 0  # output tokens that followed the current anchor since it was set
        self.replaced = False  # this step departed from a confirmed anchor: hint is a candidate (_realign)
        self.hint = 0
        self.fresh_from = 0  # output index from which tokens may count as evidence for a re-anchor
        self.realignments = 0  # times the anchor was found again after a departure
        self.subs: dict[int, int] = {}  # prediction token -> the token the output writes in its place
        self.substituted: list[int] = []  # prediction indexes the last step followed through a substitution
        self._pending: tuple[int, int, int, int] | None = None  # (prediction index, X, Y, output index) of a departure

    # -- proposing ---------------------------------------------------------------------------
    def draft_length(self) -> int:
        c = self.config
        return max(c.min_draft, min(c.max_draft, c.growth * self.run))

    def propose(self, context: Sequence[int], budget: int) -> Draft:
        if self.anchor is None or budget <= 0:
            return EMPTY_DRAFT
        k = min(budget, self.draft_length())
        tokens = tuple(self.prediction[self.anchor : self.anchor + k])
        if self.subs:
            tokens = tuple(self.subs.get(t, t) for t in tokens)
        return Draft(tokens=tokens, source="prediction") if tokens else EMPTY_DRAFT

    # -- following the output ----------------------------------------------------------------
    def observe(self, context: Sequence[int], verdict: Verdict) -> None:
        new = verdict.tokens
        P = self.prediction
        self.replaced = False
        n_out = len(context) - self.prompt_len  # output tokens after this step
        self.substituted = []
        if self.anchor is not None:
            i = 0
            while i < len(new) and self.anchor + i < len(P) and self._follows(P[self.anchor + i], new[i]):
                if P[self.anchor + i] != new[i]:
                    self.substituted.append(self.anchor + i)
                i += 1
            if i and self._pending is not None:
                self._confirm(self.anchor, n_out - len(new))
            self.agreed += i
            if i == len(new):  # still on the prediction
                self.anchor += i
                self.run += i
                self.hint = self.anchor
                if self.anchor < len(P):
                    return
                self.anchor = None  # prediction used up; the output may still re-enter it
                self.fresh_from = len(context) - self.prompt_len
            else:  # departed at new[i]: assume a same-length replacement until shown otherwise
                if self.config.substitute and self.anchor + i < len(P):
                    self._pending = (self.anchor + i, P[self.anchor + i], new[i], n_out - len(new) + i)
                self.hint = self.anchor + len(new)
                self.replaced = self.agreed >= self.config.replace_after
                self.anchor = None
                self.fresh_from = len(context) - self.prompt_len - (len(new) - i)
        else:
            self.hint += len(new)
        self._realign(context[self.prompt_len :])

    def _follows(self, t: int, out: int) -> bool:
        """Whether output token `out` follows prediction token t: t itself, or what a learned substitution drafts for
        it. The output writing t where t's substitution was drafted ends the substitution."""
        s = self.subs.get(t)
        if s is None or out == s:
            return out == t or out == s
        if out == t:
            del self.subs[t]
            return True
        return False

    def _confirm(self, j: int, at: int) -> None:
        """The output is back on the prediction at index j from output index `at` on: if it left it by writing one
        token Y in place of the prediction's X just before, learn the substitution X -> Y."""
        dp, X, Y, oi = self._pending
        if j == dp + 1 and at == oi + 1:
            self.subs[X] = Y
            self._pending = None

    def _candidates(self, out: Sequence[int]) -> set[int]:
        c = self.config
        found: set[int] = set()
        if len(out) >= c.strong_ngram:
            far = self._far.get(tuple(out[-c.strong_ngram :]), [])
            mid = bisect.bisect_left(far, self.hint)
            found.update(far[max(0, mid - 16) : mid + 16])  # nearest to hint first
        if out:
            # prediction tokens drafted as out[-1]: itself unless substituted, and those substituted by it
            drafted_as = [x for x, y in self.subs.items() if y == out[-1]]
            for t in drafted_as + ([] if out[-1] in self.subs else [out[-1]]):
                near = self._near.get(t, [])
                lo = bisect.bisect_left(near, self.hint - c.window)
                hi = bisect.bisect_right(near, self.hint + c.window)
                found.update(near[lo:hi])
        return found

    def _match_length(self, out: Sequence[int], j: int) -> int:
        """Length L of the longest suffix of out equal to prediction[j-L : j], capped."""
        P, cap = self.prediction, max(self.config.max_match, self.config.recovery_threshold)
        cap = min(cap, len(out) - self.fresh_from)  # evidence seen since the alignment was lost
        L = 0
        while L < cap and L < len(out) and L < j and out[-1 - L] == self.subs.get(P[j - 1 - L], P[j - 1 - L]):
            L += 1
        return L

    def _realign(self, out: Sequence[int]) -> None:
        best_key, best_j, best_L = None, None, 0
        P = self.prediction
        scored = {j: self._match_length(out, j) for j in self._candidates(out) | {self.hint} if j < len(P)}
        evidence = dict(scored)
        if self.replaced and self.hint in scored and not any(scored.get(self.hint + d) for d in (-1, 1)):
            scored[self.hint] = max(scored[self.hint], 1)  # a same-length replacement (module docstring)
        for j, L in scored.items():  # j < len(prediction): something is left to draft after j
            if L < self.config.recovery_threshold:
                continue
            key = (L, -abs(j - self.hint), j >= self.hint, -j)
            if best_key is None or key > best_key:
                best_key, best_j, best_L = key, j, L
        if best_j is not None:
            if self._pending is not None and evidence[best_j]:
                self._confirm(best_j - evidence[best_j], len(out) - evidence[best_j])
            self.anchor, self.hint, self.run, self.agreed = best_j, best_j, best_L, 0
            self.realignments += 1
