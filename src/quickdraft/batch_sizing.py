"""Draft sizing for a batch of requests verified in one step (the vLLM proposer: quickdraft/vllm/proposer.py).

sizing.py sizes one sequence's drafts (DraftSizer); here a step's cost t(T) is a line in its tokens and the
draft tokens of all rows compete for it. The per-row rates (DraftRates, draft_gains) live in sizing.py, which
the prediction's one-sequence sizing shares.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from .sizing import best_count

# Where one step verifies the drafts of many requests at once, what a draft token costs is the step's
# time growing with its tokens T (every row's next token plus every draft token): t(T). A step's output
# is G = rows + the sum over draft tokens of P(accepted). Adding a token of gain g to a step is worth it
# while (G + g) / t(T + 1) > G / t(T), i.e. g > G t'(T) / t(T): with one request and t nearly flat a
# long draft pays; with sixteen rows each token must be likely, and the least likely go first. So the
# batch takes the draft tokens of all its rows, best gain first (each row's gains fall along its draft,
# so each row keeps a prefix), up to the count best_count chooses.
#
# Worked example, t(T) = 70 + 5.6 T ms (a step's fixed cost large against its cost per token, as on vLLM on a CPU;
# measured: docs/vllm.md#draft-sizing-under-load):
#   1 row, a = 0.9: g = 0.9, 0.81, ...; best n = 11 (E 7.2 over 137 ms: 52.3/s against 13.2/s plain)
#   16 rows, one with a = 0.9 and 15 with a = 0.5: G t'/t = 16 * 5.6 / 160 = 0.56 at first, so the 0.5
#   rows draft nothing and the 0.9 row keeps 5 (0.9^5 = 0.59); 16 rows with a = 0.97 keep 6 each.


@dataclass
class StepCosts:
    """Seconds per engine step by its tokens T, a line t(T) = a + b T fitted by decayed least squares over
    the steps seen (a batch's step time grows about linearly with its tokens; the line moves with the cache
    length as older steps decay)."""

    decay: float = 0.98  # weight of an older step, per newer one (about the last 50 steps count)
    min_spread: float = 4.0  # the line is trusted once T has varied by this much (standard deviation)
    _m: list[float] = field(default_factory=lambda: [0.0] * 5)  # decayed sums: w, T, T^2, t, T t

    def record(self, tokens: int, seconds: float) -> None:
        m, d = self._m, self.decay
        for i, v in enumerate((1.0, tokens, tokens * tokens, seconds, tokens * seconds)):
            m[i] = d * m[i] + v

    def line(self) -> tuple[float, float] | None:
        """(a, b) of t(T) = a + b T; None until T has varied enough to tell the slope. A negative slope
        (noise) is read as flat."""
        w, sT, sTT, st, sTt = self._m
        if w <= 0:
            return None
        var = sTT / w - (sT / w) ** 2
        if var < self.min_spread ** 2:
            return None
        b = max((sTt / w - sT / w * st / w) / var, 0.0)
        a = st / w - b * sT / w
        return max(a, 1e-6), b


def batch_lengths(gains: Sequence[Sequence[float] | None], drafted: Sequence[int], line: tuple[float, float] | None) -> list[int]:
    """How many tokens of each row's draft a step verifies. gains[i]: row i's per-token acceptance chances
    (falling along its draft), or None when unknown: that row keeps its whole draft (drafted[i] tokens) and
    its tokens count as certain, so that a new request gets to show what it is worth. line: t(T) = a + b T
    (StepCosts.line), None: nothing is cut."""
    if line is None:
        return list(drafted)
    rows, (a, b) = len(drafted), line
    keep = [n if g is None else 0 for g, n in zip(gains, drafted)]
    fixed = sum(keep)
    pool = sorted(((g_k, i) for i, g in enumerate(gains) if g is not None for g_k in g[: drafted[i]]), reverse=True)
    n = best_count([g for g, _ in pool], lambda n: a + b * (rows + fixed + n), base=rows + fixed)
    for _, i in pool[:n]:
        keep[i] += 1
    return keep
