"""How long a draft pays: a cap on draft length from measured pass costs and acceptance rates.

Verifying is not free where a pass costs more with more tokens, and how much more depends on the runner and the
machine: on llama.cpp a pass costs nearly in proportion to its tokens; transformers is memory-bound at one token
and switches matrix kernels above it, so its costs rise in steps that differ between CPUs. A long draft that is soon
wrong costs more than it saves, and no fixed length suits every machine, so the engine measures the costs as it
runs and caps each draft at the length with the most expected output per second
(measured: docs/drafters.md#draft-sizing):

    t(n)  = seconds for a target pass over n tokens: PassCosts, measured on every pass, per n
    a     = P(next draft token accepted | the ones before it were), per drafter (counted online)
    d     = seconds the drafter spends per draft token, per drafter (measured: ~0 for lookup and
            predictions, a draft-model forward for the draft model)
    E(k)  = 1 + a + a^2 + ... + a^k      expected output tokens of a pass with a k-token draft
    cap   = the k <= budget maximising E(k) / (t(k + 1) + k d)

A prediction's drafts are right or wrong in runs (a re-anchor is right or not; a right run is rarely wrong inside),
which one rate fits badly: for it (`two_phase`) g_1 = P(first token | the last draft was accepted in full, or not)
and g_i = g_(i-1) P(later token) (DraftRates), and the cap maximises (1 + g_1 + ... + g_k) / t(k + 1) (measured:
docs/predicted-outputs.md#policies).

t(n) for a size not measured yet is interpolated linearly between the nearest measured sizes and
extended beyond the largest with the slope of the last two; with fewer than two sizes measured (or
no acceptance evidence yet) there is no cap, except for a source with a prior rate (`priors`: prompt
lookup's short matches, right less often), capped at that rate until its own evidence counts.

Worked example, t(n) = 1 + 0.65 (n - 1) (costs nearly in proportion to the tokens, as on llama.cpp):
    a = 0.5   E(k)/t: k=0 1.00, k=1 0.91                          -> cap 0 (drafting does not pay)
    a = 0.9   k=0 1.00, k=1 1.15, k=2 1.18, k=3 1.17              -> cap 2
    a = 0.99  k=8 1.39, k=9 1.39, k=16 1.38, k=32 1.29            -> cap 9
With t(n) = 1 + 0.06 (n - 1) (nearly flat costs) and a = 0.9 the cap is 12; with a = 1 it is the
budget. With step-shaped costs, t = 1, 1.94, 3.05 for 1, 2, 3 tokens, then 2.4 up to 8 tokens, 3.1 at 16 and 4.0
at 32 (a transformers model in float32 whose kernels change above one row): a = 0.5, no draft pays (k=3:
1.88 / 2.4 = 0.78); a = 0.6, only a longer one, barely (k=3: 0.90, k=7: 2.46 / 2.43 = 1.01); a = 0.9, the cap is
15 (8.15 / 3.08 = 2.65), and a draft of 2 would lose (2.71 / 3.05 = 0.89) where one of 3 pays (1.42).

The engine cuts a draft drawn from the context (a prediction, prompt lookup) to its own source's cap once drafted,
so in a chain each drafter is sized on its own record, whichever drafted last (prompt lookup's short matches, right
less often, never shorten a prediction's drafts); a draft model's cap is asked before it drafts, since drafting costs
it. The cap changes how much is drafted, never which tokens are emitted: output stays exact. A source
capped to 0 is still offered one token every `probe_every` times it has a draft, so that it can show it is right
again (a prediction re-anchoring after an edit, a lookup finding a long match).

A drafter that rates its own tokens (a draft model: Draft.confidence, c_i = its probability of
token i, calibrated by its misses so far) is not capped beforehand; its draft is trimmed afterwards,
token by token, with those rates in place of a:

    E(k)  = 1 + c_1 + c_1 c_2 + ... + c_1 ... c_k
    trim  = the k <= len(draft) maximising E(k) / t(k + 1)      (k = 0: t(1), one token, no draft)

(the draft's seconds are spent by then, so they do not count; t(n) past the largest size measured is
taken as that size's, optimistically, so that a longer pass gets tried and measured: a line through
the small sizes would rule long drafts out for good, since with step-shaped costs a short pass can cost more than
a much longer one). Under sampling the prefix is chosen causally (causal_length): token i is kept or cut
by the rates of tokens 1 .. i alone, since c_(i+1) is the draft model's confidence after drawing token i,
and a cut that depended on token i would bias which tokens come out (speculative sampling stays lossless
only if whether a token is verified does not depend on that token). For the same reason it does not read
how long the draft is: the draft model stops early when it doubts its next token, a doubt that follows
token i. Since that rule reads nothing drawn after token i, the sizer also tells the draft model as it
drafts (DraftSizer.keeps), and it stops at the first token the trim will cut: the same draft is sent, and
the draft-model forwards past that token are not spent. A confident draft keeps its length
where a rate averaged over the request would cut it, and a doubtful one is not sent. When nothing is
worth sending, the source also pauses: it is asked for no draft for 1 pass, then 2, 4, ... up to
`backoff_max` after each further such draft, and back to 1 after a draft worth sending; where the draft model is
often unsure (prose) this saves its forwards too (measured: docs/drafters.md#the-draft-model).

A rated source is also judged by what its passes have actually yielded: output tokens per second over
its passes, its own drafting seconds included (decayed sums, per request), against one token per t(1).
Confidences can look worth a pass while the target, sampling, keeps choosing otherwise and the draft
model's forwards cost time whether or not a draft is sent. A source whose passes yield less than
one-token passes is skipped for 1, 2, 4 ... up to `backoff_max` passes at a time, drafting again after
each skip, and on every pass once one pays (measured: docs/drafters.md#the-draft-model).
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field, replace
from itertools import repeat
from typing import Callable, Iterable, Literal, Sequence, get_args

from .core import Draft
from .drafters.lookup import SHORT_PRIOR, SHORT_SOURCE

# Acceptance rates assumed for a source until its own evidence counts (DraftSizer.priors): a guess is capped where
# passes are steep before its first drafts are paid for
PRIORS = {SHORT_SOURCE: SHORT_PRIOR}


@dataclass
class PassCosts:
    """Seconds per target pass by its number of tokens: a property of the runner and the machine, so a
    Generator keeps one for all its requests. Each size is a decayed mean of the passes of that size.
    Tree passes (a tree attention mask) are kept apart from linear ones of the same size: their mask and
    gathers cost more, and Ouroboros compares the two when it decides whether branches pay."""

    decay: float = 0.9  # weight of an older pass of the same size, per newer one
    _sums: dict[int, list[float]] = field(default_factory=dict)  # linear passes: n -> [weight, weighted seconds]
    _tree_sums: dict[int, list[float]] = field(default_factory=dict)  # tree passes, the same

    def record(self, n: int, seconds: float, tree: bool = False) -> None:
        w = (self._tree_sums if tree else self._sums).setdefault(n, [0.0, 0.0])
        w[0] = self.decay * w[0] + 1.0
        w[1] = self.decay * w[1] + seconds

    def seconds(self, n: int, optimistic: bool = False, tree: bool = False) -> float | None:
        """Measured or interpolated seconds of a pass of n tokens (None: fewer than two sizes measured).
        optimistic: a size beyond the largest measured costs what the largest does, so that a sizer
        choosing by these costs tries it, and measures it, rather than trusting a line drawn through
        two small sizes (on transformers 2 and 3 tokens can cost 2.1 and 3.2 passes of one, 17 only 3.2).
        tree: a tree pass's; until two tree sizes are measured, a linear pass's of the same size (the
        lower bound: a tree gets tried, and so measured)."""
        if tree and (n in self._tree_sums or len(self._tree_sums) >= 2):
            return _interpolated(self._tree_sums, n, optimistic)
        return _interpolated(self._sums, n, optimistic)

    def sizes(self) -> list[int]:
        """The linear pass sizes measured so far, smallest first."""
        return sorted(self._sums)

    def upper_single(self) -> float | None:
        """Seconds of a one-token pass, or failing that of the smallest linear size measured (no less than a
        one-token pass costs); None before any pass."""
        if not self._sums:
            return None
        w, s = self._sums[min(self._sums)]
        return self.seconds(1) or s / w


def _interpolated(sums: dict[int, list[float]], n: int, optimistic: bool) -> float | None:
    """PassCosts.seconds over one table of decayed sums."""
    if n in sums:
        w, s = sums[n]
        return s / w
    sizes = sorted(sums)
    if len(sizes) < 2:
        return None
    i = min(max(bisect_left(sizes, n), 1), len(sizes) - 1)  # the line through sizes[i - 1], sizes[i]
    lo, hi = sizes[i - 1], sizes[i]
    t_lo, t_hi = sums[lo][1] / sums[lo][0], sums[hi][1] / sums[hi][0]
    slope = (t_hi - t_lo) / (hi - lo)
    if n > hi:  # beyond the largest size: never cheaper than it
        return t_hi + (0.0 if optimistic else max(slope, 0.0)) * (n - hi)
    if n < lo:  # below the smallest: no cheaper than in proportion to it
        return max(t_lo + slope * (n - lo), t_lo * n / lo)
    return t_lo + slope * (n - lo)


@dataclass
class DraftSizer:
    decay: float = 0.9  # weight of older passes in the acceptance estimate, per pass
    min_evidence: float = 4.0  # draft tokens tried before a source's acceptance rate is trusted
    priors: dict[str, float] = field(default_factory=lambda: dict(PRIORS))  # a source's rate until then (else no cap)
    probe_every: int = 8  # a source capped to 0 still drafts 1 token every this many of its drafts
    backoff_max: int = 8  # a rated draft trimmed to nothing pauses its source 1, 2, 4 .. up to this many passes
    # decayed sums per source: [accepted tokens, tried tokens] (tried = accepted + 1 per rejection)
    _acceptance: dict[str, list[float]] = field(default_factory=dict)
    _drafting: dict[str, list[float]] = field(default_factory=dict)  # decayed [draft tokens, drafter seconds]
    costs: PassCosts = field(default_factory=PassCosts)  # shared by the requests of a Generator
    _since_probe: dict[str, int] = field(default_factory=dict)
    _pause: dict[str, list[int]] = field(default_factory=dict)  # rated sources: [passes left to skip, next pause]
    min_yield_evidence: float = 3.0  # passes (decayed) of a rated source before its measured yield is trusted
    _yield: dict[str, list[float]] = field(default_factory=dict)  # decayed [output tokens, seconds, passes] per source
    _losing: dict[str, list[int]] = field(default_factory=dict)  # rated sources: [passes left to skip, next skip]
    two_phase: frozenset[str] = frozenset({"prediction"})  # sources sized by DraftRates (module docstring)
    _phases: dict[str, tuple["DraftRates", list[bool]]] = field(default_factory=dict)  # rates, [last draft whole]

    def rates_itself(self, source: str) -> bool:
        """Whether `source` rates its drafts (Draft.confidence: a draft model), so that the engine caps it before it
        drafts (its drafting costs: a source at rest is not asked) rather than cutting what it drafted."""
        return source in self._pause

    def cap(self, source: str, budget: int) -> int:
        """Most draft tokens worth verifying for `source` now (at most budget)."""
        if source in self._pause:  # it rates its tokens: trimmed once drafted (trim), unless resting
            for rest in (self._pause[source], self._losing.get(source)):  # after a draft worth nothing; a poor yield
                if rest and rest[0] > 0:
                    rest[0] -= 1
                    return 0
            return max(budget, 0)
        a, t1 = self.acceptance(source), self.costs.seconds(1)
        rates = (a, a) if a is not None else None  # one rate: P(first) = P(later)
        if source in self._phases:  # two_phase (no cap while the phase has too little evidence)
            phased, whole = self._phases[source]
            rates = phased.rates(whole[0])
        if budget <= 0 or rates is None or not t1 or len(self.costs.sizes()) < 2:  # (a prior rate comes first)
            return max(budget, 0)
        d = self.draft_seconds(source)
        best_k = best_count(draft_gains(rates, budget), lambda k: self.costs.seconds(k + 1) + k * d)
        if best_k == 0:
            waited = self._since_probe.get(source, 0) + 1
            self._since_probe[source] = waited
            if waited >= self.probe_every:
                self._since_probe[source] = 0
                return 1
        return best_k

    def trim(self, draft: Draft) -> Draft:
        """The prefix of a rated draft (Draft.confidence) with the most expected output per second (a sampled
        draft, Draft.probs set: the longest prefix causal_length keeps); an empty draft (same source and
        forwards) when no prefix beats a one-token pass."""
        if draft.confidence is None or not len(draft):
            return draft
        pause = self._pause.setdefault(draft.source, [0, 1])  # from now on its drafts are not capped beforehand
        if not self._priced():  # not yet priced: sent whole (whatever its length)
            return draft
        if draft.probs is None:
            best_k = best_length(draft.confidence, self._draft_seconds)
        else:  # sampled: looking ahead no further than the longest pass measured, whatever was drafted
            best_k = causal_length(draft.confidence, self._draft_seconds, horizon=max(self.costs.sizes()) - 1)
        if best_k:
            pause[1] = 1
            return draft.head(best_k)
        self._back_off(pause)
        return replace(draft, tokens=(), probs=None, parents=None, confidence=())

    def keeps(self, rates: Sequence[float]) -> bool:
        """Whether trim would keep the last token of a sampled draft whose tokens are rated `rates` so far (that
        token's and those before it): the causal rule, which reads nothing drawn after that token, so a drafter
        may ask before it drafts on and stop at the first token the trim would cut (DraftModelDrafter.keep).
        True while the passes are not priced yet (trim then sends a draft whole)."""
        if not self._priced():
            return True
        return keeps_token(rates, self._draft_seconds, max(self.costs.sizes()) - 1)

    def _priced(self) -> bool:
        """Whether enough pass sizes are measured to trim a rated draft."""
        return bool(self.costs.seconds(1)) and len(self.costs.sizes()) >= 2

    def _draft_seconds(self, k: int) -> float:
        """What a pass with a k-token draft costs, taken optimistically past the largest size measured (trim)."""
        return self.costs.seconds(k + 1, optimistic=True)

    def _judge_yield(self, source: str, tokens: int, seconds: float) -> None:
        """After a pass a rated source paid for (its output tokens: accepted + 1; its seconds: the pass and the
        drafting, a draft trimmed to nothing included): when its passes have yielded fewer tokens per second
        than one-token passes (1 / t(1)), skip it for the next 1, 2, 4 ... backoff_max passes; it drafts again
        after each skip, and its skips start from 1 again once its yield is back above."""
        d = self.decay
        y = self._yield.setdefault(source, [0.0, 0.0, 0.0])
        y[0], y[1], y[2] = d * y[0] + tokens, d * y[1] + seconds, d * y[2] + 1
        skip = self._losing.setdefault(source, [0, 1])
        t1 = self.costs.upper_single()  # until one-token passes are measured, an upper bound: skips fewer
        if not t1 or y[2] < self.min_yield_evidence or y[0] * t1 >= y[1]:
            skip[0], skip[1] = 0, 1
        else:
            self._back_off(skip)

    def _back_off(self, rest: list[int]) -> None:
        """Rest a source ([passes left to skip, next rest]) for its next rest, and double the one after (up to
        backoff_max): 1, 2, 4 .. passes."""
        rest[0], rest[1] = rest[1], min(2 * rest[1], self.backoff_max)

    def acceptance(self, source: str) -> float | None:
        accepted, tried = self._acceptance.get(source, (0.0, 0.0))
        return accepted / tried if tried >= self.min_evidence else self.priors.get(source)

    def draft_seconds(self, source: str) -> float:
        """Measured drafter seconds per draft token of `source` (0 before any draft)."""
        tokens, seconds = self._drafting.get(source, (0.0, 0.0))
        return seconds / tokens if tokens else 0.0

    def record(self, source: str, drafted: int, accepted: int, pass_tokens: int, seconds: float,
               draft_seconds: float = 0.0, tree: bool = False) -> None:
        """One verified pass: its draft's fate, how long the target took over pass_tokens tokens (a tree
        pass if tree), and how long the drafter took to propose it."""
        self.costs.record(pass_tokens, seconds, tree)
        if source in self._pause and (drafted or draft_seconds):  # a rated source paid for this pass
            self._judge_yield(source, accepted + 1, seconds + draft_seconds)
        if drafted:
            d = self.decay
            acc = self._acceptance.setdefault(source, [0.0, 0.0])
            acc[0] = d * acc[0] + accepted
            acc[1] = d * acc[1] + accepted + (accepted < drafted)
            cost = self._drafting.setdefault(source, [0.0, 0.0])
            cost[0] = d * cost[0] + drafted
            cost[1] = d * cost[1] + draft_seconds
            if source in self.two_phase:
                phased, whole = self._phases.setdefault(source, (DraftRates(decay=d), [False]))
                phased.record(whole[0], drafted, accepted)
                whole[0] = accepted == drafted


def best_length(rates: Iterable[float], seconds: Callable[[int], float]) -> int:
    """The draft length k with the most expected output per second, E(k) / seconds(k), where
    E(k) = 1 + r_1 + r_1 r_2 + ... + r_1 ... r_k over the per-token acceptance rates and seconds(k)
    is what a pass with a k-token draft costs (k = 0: no draft, E = 1); ties go to the shorter."""
    gains, joint = [], 1.0
    for r in rates:
        joint *= r
        gains.append(joint)  # P(token k is accepted) = r_1 ... r_k
    return best_count(gains, seconds)


def causal_length(rates: Sequence[float], seconds: Callable[[int], float], horizon: int) -> int:
    """The draft length for a sampled draft: token i is kept only if best_length, seeing r_1 .. r_i and taking
    the tokens after it, up to `horizon` tokens in all, to be as likely as token i, would keep at least i
    tokens; the first token that fails ends the draft. Under speculative sampling whether token i is verified
    must not depend on token i itself, and two things do: r_(i+1), the draft model's confidence after drawing
    token i, and how many tokens it drafted, since it stops when that confidence is low. A trim that read
    either would keep token i when the draft model drew a token it is sure how to continue, and the emitted
    token would lean towards those (tests/test_sampling.py: a 0.10 token came out at 0.02 with the first, and
    at 0.02 with the second). r_i depends only on the tokens before it, and the horizon must not depend on the
    draft at all (the sizer passes the longest pass it has measured), so this rule keeps the output's
    distribution that of the target. Example: rates (0.5,), t(1) = 1, t(2) = t(3) = 1.65: horizon 1 keeps
    nothing (1.5 / 1.65 < 1), horizon 2 keeps the token ((1 + 0.5 + 0.25) / 1.65 > 1)."""
    for i in range(1, len(rates) + 1):
        if not keeps_token(rates[:i], seconds, horizon):
            return i - 1
    return len(rates)


def keeps_token(rates: Sequence[float], seconds: Callable[[int], float], horizon: int) -> bool:
    """causal_length's test of the last of `rates`' tokens (token i = len(rates)): best_length, seeing r_1 .. r_i
    and taking the tokens after it, up to `horizon` tokens in all, to be as likely as token i, keeps at least i."""
    i = len(rates)
    return best_length([*rates, *repeat(rates[-1], max(0, horizon - i))], seconds) >= i


def best_count(gains: Sequence[float], seconds: Callable[[int], float], base: float = 1.0) -> int:
    """How many of `gains` to verify: the n with the most (base + g_1 + ... + g_n) / seconds(n), where g_i
    is the output a token is expected to add (the probability it is accepted), best first, and base is
    the output of a pass without them (1 per request: its bonus token). Ties go to the smaller n."""
    best_n, best, expected = 0, base / seconds(0), base
    for n, g in enumerate(gains, 1):
        expected += g
        value = expected / seconds(n)
        if value > best:
            best_n, best = n, value
    return best_n


# -- acceptance in two phases: a prediction's drafts here (DraftSizer.two_phase), a batch's (batch_sizing.py) -------

@dataclass
class DraftRates:
    """How likely a request's draft tokens are accepted: P(first token) after a draft accepted in full
    ("running": the drafter is on track) and after anything else ("fresh": a new match, a re-anchored
    prediction), and P(a later token | the one before it was accepted). Two phases because a fresh draft
    is often wholly wrong (a wrong re-anchor) or wholly right, which one geometric rate fits badly.
    draft_gains() turns the rates into each draft token's chance: q_1 = P(first), q_k = q_(k-1) P(later)."""

    decay: float = 0.9
    min_evidence: float = 3.0  # tries before a rate is trusted
    _first: dict[bool, list[float]] = field(default_factory=dict)  # running -> decayed [accepted, tried]
    _later: list[float] = field(default_factory=lambda: [0.0, 0.0])

    def record(self, running: bool, drafted: int, accepted: int) -> None:
        if drafted <= 0:
            return
        d = self.decay
        first = self._first.setdefault(running, [0.0, 0.0])
        first[0], first[1] = d * first[0] + (accepted > 0), d * first[1] + 1
        later_tried = max(min(accepted + 1, drafted) - 1, 0)  # tokens 2.. whose predecessor was accepted
        later = self._later
        later[0], later[1] = d * later[0] + max(accepted - 1, 0), d * later[1] + later_tried

    def rates(self, running: bool) -> tuple[float, float] | None:
        """(P(first), P(later)) or None while there is too little evidence."""
        first, later = self._first.get(running, (0.0, 0.0)), self._later
        if first[1] < self.min_evidence or later[1] < self.min_evidence:
            return None
        return first[0] / first[1], later[0] / later[1]


def draft_gains(rates: tuple[float, float], n: int) -> list[float]:
    """P(accepted) of each of n draft tokens: (0.5, 0.9), 3 -> [0.5, 0.45, 0.405]."""
    first, later = rates
    gains, q = [], first
    for _ in range(n):
        gains.append(q)
        q *= later
    return gains


def block_fit(n: int, block: int | None) -> int:
    """How many of a linear draft's n tokens to verify where the runner computes every pass in products of `block`
    rows (runners/kernels.FixedRows: bf16 with AMX): all of them, unless the pass (n + 1 rows) spills a quarter
    block or less into a block of its own; then only the tokens that fill the blocks before it.

    Such a pass pays for whole blocks: a spill of r rows costs a block and buys r tokens at most, where a full
    block buys `block` tokens; at r <= block / 4 that does not pay even if every token is right (measured:
    docs/cpu.md#fixed-row-blocks). A prediction's longest drafts, 64 or 128 tokens, are the usual case:
    with 32-row blocks, 63 verified in 2 blocks instead of 64 in 3 (127 in 4, not 128 in 5). Larger spills are
    left to the measured-cost cap (DraftSizer).

    Example, block 32: n 64 (65 rows, 1 spilled) -> 63; n 40 (41 rows, 9 spilled) -> 40; n 20 -> 20."""
    if not block or n + 1 <= block or (n + 1) % block == 0 or (n + 1) % block > block // 4:
        return n
    return (n + 1) // block * block - 1


# The draft_sizing names, defined here once (every front end takes them from here)
Sizing = Literal["auto", "cost", "off"]
SIZING: tuple[Sizing, ...] = get_args(Sizing)


def sizing_for(runner: object, choice: str, drafter: object = None) -> bool:
    """Whether to cap drafts: "cost" yes, "off" no, "auto" as the runner prefers (runner.draft_sizing;
    the llama.cpp runner, whose passes cost in proportion to their tokens: every draft), else for
    drafters that do not size their drafts themselves (prompt lookup, predictions, the draft model:
    yes; Ouroboros, whose own length rules were measured without the cap, sets sizes_itself)."""
    if choice not in SIZING:
        from .errors import QuickdraftError

        raise QuickdraftError(f"draft_sizing must be one of {', '.join(SIZING)}; got {choice!r}")
    if choice != "auto":
        return choice == "cost"
    from .drafters.base import sizes_itself
    from .runners.base import draft_sizing_preference

    preference = draft_sizing_preference(runner)
    if preference is not None:
        return preference == "cost"
    return not sizes_itself(drafter)
