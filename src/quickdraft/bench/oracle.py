"""The oracle of a prediction drafter: the fewest target passes (and the least modelled time) any drafter that drafts
from the prediction could need for a known output, and where a real drafter's passes go beyond it.

Glossary (the engine's convention, engine.py and core.py). `output` o[0..N) is plain decoding's output, which every
exact method reproduces; `prediction` p[0..M). A pass at output position i (i tokens out) verifies
[last token, d_1..d_k]; with every draft token right it emits o[i..i+k]: k accepted tokens and the bonus o[i+k]. Its
cost is cost(k + 1), in one-token passes. The engine never drafts past the limit: k <= N - i - 1.

The oracle knows the alignment: a pass may draft o[i..i+k) if those k tokens occur contiguously anywhere in p, so
every k <= runs[i] is allowed, runs[i] being the longest prefix of o[i:] found in p (longest_runs). It then chooses
the k of every pass by dynamic programming over positions:

    f(N) = 0,   f(i) = min over 0 <= k <= min(runs[i], N - i - 1) of  cost(k + 1) + f(i + k + 1)

With cost 1 a pass this is the fewest passes (passes_only); with the measured curve, the least time. A token that
occurs nowhere in p (runs[t] == 0) cannot be drafted, so it is the bonus of some pass in every method: an insertion.

Worked example: p = a b c d e f, o = a b X d e f (X replaced c). runs = [2, 1, 0, 3, 2, 1]. With cost 1 a pass:
pass 1 at 0 drafts "a b" and emits a b X; pass 2 at 3 drafts "d e" and emits d e f: 2 passes. X is an insertion.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from difflib import SequenceMatcher
from typing import Callable, Sequence

import numpy as np

# Why a pass ended where it did (classify). Misses and run ends sit at edits, split by the diff of p and o.
CAUSES = ("insertion", "deletion", "change", "wrong place", "after a miss", "short while right")


def longest_runs(output: Sequence[int], prediction: Sequence[int]) -> list[int]:
    """runs[i]: length of the longest prefix of output[i:] that occurs contiguously somewhere in prediction.
    O(N * M) with numpy rows, from the end: lcp(i, j) = 1 + lcp(i + 1, j + 1) where o[i] == p[j], else 0.

    Example: prediction a b c d e f, output a b X d e f -> [2, 1, 0, 3, 2, 1]."""
    p = np.asarray(prediction, dtype=np.int64)  # [M]
    row = np.zeros(len(p) + 1, dtype=np.int32)  # [M + 1]: lcp(i + 1, j), 0 past p's end
    runs = [0] * len(output)
    for i in range(len(output) - 1, -1, -1):
        new = np.where(p == output[i], row[1:] + 1, 0)  # [M]: lcp(i, j)
        runs[i] = int(new.max()) if len(p) else 0
        row[:-1] = new
    return runs


@dataclass(frozen=True)
class Plan:
    """The oracle's passes: drafts[s] tokens drafted by pass s (all accepted), in output order."""

    drafts: tuple[int, ...]
    cost: float  # in one-token passes

    @property
    def passes(self) -> int:
        return len(self.drafts)


def oracle(runs: Sequence[int], cost: Callable[[int], float], max_draft: int | None = None) -> Plan:
    """The cheapest passes over an output whose longest runs in the prediction are `runs` (longest_runs), a pass of n
    tokens costing cost(n), drafting at most max_draft tokens a pass (None: no cap; a measured cost curve is known
    only up to its largest pass); of equal costs, the fewest passes, then the longest first draft.
    Example: runs [2, 1, 0, 3, 2, 1], cost 1 -> drafts (2, 2), cost 2."""
    N = len(runs)
    c = [0.0] + [cost(n) for n in range(1, N + 1)]  # c[n]: a pass of n tokens
    best: list[tuple[float, int]] = [(0.0, 0)] * (N + 1)  # (cost, passes) from position i to the end
    choice = [0] * (N + 1)  # tokens drafted by the pass at i
    for i in range(N - 1, -1, -1):
        ks = range(min(runs[i], N - i - 1, N if max_draft is None else max_draft) + 1)
        options = ((c[k + 1] + best[i + k + 1][0], best[i + k + 1][1] + 1, k) for k in ks)
        total, passes, choice[i] = min(options, key=lambda x: (round(x[0], 9), x[1], -x[2]))
        best[i] = (total, passes)
    drafts, i = [], 0
    while i < N:
        drafts.append(choice[i])
        i += choice[i] + 1
    return Plan(tuple(drafts), best[0][0])


def passes_only(runs: Sequence[int], max_draft: int | None = None) -> Plan:
    """The fewest passes (every pass costs 1): each drafts its longest run (up to max_draft)."""
    return oracle(runs, lambda n: 1.0, max_draft)


def diff_sources(output: Sequence[int], prediction: Sequence[int]) -> list[int]:
    """src[t]: the index in the prediction that output token t is kept from by the diff (difflib, no junk
    heuristic), -1 where it is new text (inserted or replacing).
    Example: p a b c d e f, o a b X d f -> [0, 1, -1, 3, 5]."""
    src = [-1] * len(output)
    for tag, p1, p2, o1, o2 in SequenceMatcher(None, list(prediction), list(output), autojunk=False).get_opcodes():
        if tag == "equal":
            src[o1:o2] = range(p1, p2)
    return src


def edit_kind(src: Sequence[int], t: int) -> str:
    """What the diff says happened at output position t, where a drafter had to stop: "change" (t is new text, or the
    first kept token after new text), "deletion" (t is kept, but the prediction text right before it was skipped),
    "wrong place" (t follows the previous token in the prediction: a drafter that stopped here was drafting from
    elsewhere). Example: src [0, 1, -1, 3, 5] -> wrong place, wrong place, change, change, deletion."""
    if src[t] < 0 or (t > 0 and src[t - 1] < 0):
        return "change"
    before = src[t - 1] if t > 0 else -1
    return "deletion" if src[t] != before + 1 else "wrong place"


def classify(steps: Sequence[tuple[int, int]], runs: Sequence[int], src: Sequence[int]) -> list[str]:
    """The cause (CAUSES) of every pass of a decode: steps[s] = (drafted, accepted) of pass s, in output order. Pass s
    at position i with k drafted and a accepted has its bonus at b = i + a. The first rule that holds:

      insertion          runs[b] == 0: the bonus occurs nowhere in the prediction; every method pays this pass
      deletion, change,  a < k (a miss: a drafted token was wrong though the prediction had the right one somewhere),
      wrong place        or a == k == runs[i] (the draft ran to the end of the prediction's run): the pass stopped at
                         an edit, named by the diff at b (edit_kind)
      after a miss       the drafter lost its place: it drafted nothing though the prediction had o[i] (k == 0), or
                         this is the first pass after a miss or after such an empty pass (the draft of a re-anchor)
      short while right  a == k < runs[i]: the prediction went on past the bonus; a longer draft would have carried on

    The oracle's passes never miss; classified by the same rules, the difference per cause between a drafter's passes
    and the oracle's sums to the gap exactly (gap). Example: runs [2, 1, 0, 3, 2, 1] (p a b c d e f, o a b X d e f);
    steps (3, 2) (drafted a b c, c wrong: X), (0, 0), (1, 1) -> insertion, after a miss, after a miss."""
    causes, i, lost = [], 0, False
    for k, a in steps:
        b = i + a
        if runs[b] == 0:
            cause = "insertion"
        elif a < k or (k > 0 and k == runs[i]):
            cause = edit_kind(src, b)
        elif k == 0 or lost:
            cause = "after a miss"
        else:
            cause = "short while right"
        causes.append(cause)
        lost = a < k or k == 0
        i = b + 1
    return causes


@dataclass
class Gap:
    """A drafter's passes and modelled time against the oracle's, split by cause: the per-cause differences sum to
    passes - oracle_passes and time - oracle_time."""

    passes: int
    time: float
    oracle_passes: int
    oracle_time: float
    passes_by_cause: dict[str, int] = field(default_factory=dict)  # drafter's count - oracle's, per cause
    time_by_cause: dict[str, float] = field(default_factory=dict)


def gap(steps: Sequence[tuple[int, int]], plan: Plan, runs: Sequence[int], src: Sequence[int],
        cost: Callable[[int], float]) -> Gap:
    """Compare a decode's steps (drafted, accepted) with an oracle plan over the same output."""
    mine = classify(steps, runs, src)
    theirs = classify([(k, k) for k in plan.drafts], runs, src)
    g = Gap(len(steps), sum(cost(k + 1) for k, _ in steps), plan.passes, sum(cost(k + 1) for k in plan.drafts))
    for cause in CAUSES:
        g.passes_by_cause[cause] = mine.count(cause) - theirs.count(cause)
        g.time_by_cause[cause] = (sum(cost(k + 1) for (k, _), c in zip(steps, mine) if c == cause)
                                  - sum(cost(k + 1) for k, c in zip(plan.drafts, theirs) if c == cause))
    return g
