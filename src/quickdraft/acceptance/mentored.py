"""Mentored decoding: a lossy acceptance rule that accepts more draft tokens while keeping the KL
divergence from the target's distribution under a bound D the user sets, per token.

Source: V. Tran-Thien, "An optimal lossy variant of speculative decoding" (Hugging Face blog, 2023,
https://huggingface.co/blog/vivien/optimal-lossy-variant-of-speculative-decoding), which names the rule
mentored decoding. The derivation and code below are ours. Notation: the post calls
the draft distribution p and the target's q; here, as everywhere in quickdraft (rejection.py), p is the
target's processed distribution and q the drafter's. Their KL(q || pi) is our KL(p || pi).

The rule. Speculative sampling emits exactly p: accept draft token x ~ q with min(1, p(x) / q(x)),
else draw from max(0, p - q). Any accept/replace scheme emits some distribution pi, and the best
acceptance a scheme can have for a given pi is sum_x min(q(x), pi(x)). Mentored decoding picks the pi
with the largest acceptance among those with KL(p || pi) <= D (the target's distribution first: the
divergence of what is emitted, measured from the target). The Lagrange conditions give

    pi(x) = clip(q(x), p(x) / beta, p(x) / alpha)        0 < alpha <= 1 <= beta

accepted with r(x) = pi(x) / q(x) = min(1, p(x) / (alpha q(x))) (never below the exact rule's
min(1, p/q)), and replaced from s proportional to pi - q where positive = max(0, p / beta - q).
beta is tied to alpha by sum(pi) = 1 (equivalently: the rejection mass 1 - sum(q r) equals
sum(max(0, p / beta - q)), so that q r + (1 - sum(q r)) s = pi). Along that curve KL(p || pi) and the
acceptance both grow as alpha falls (pi moves from p towards q: d KL / d(1/alpha) = P_capped
(beta - alpha) >= 0), so alpha is the smallest value whose KL stays within D, found by bisection.
D = 0 gives alpha = beta = 1, pi = p: exactly speculative sampling, with the same random numbers.

Shortcuts. (1) If KL(p || q) <= D, pi = q is allowed and every draft token is accepted (the write-up's
fast path), provided q puts no mass on tokens the target's top-k / top-p removed: those get pi = 0 and
are never emitted, whatever D (KL(p || .) would not see them, but the user asked for them removed).
(2) A draft token the exact test accepts (u q(x) < p(x)) is accepted without building r and s, since
r(x) >= min(1, p/q); alpha itself is still found at every decided position, because Verdict.kl reports
the divergence of the distribution used there.

A deterministic drafter (draft.probs None: prediction, prompt lookup) is the point mass q = onehot(x),
and the rule is supported for it: pi(x) = t, the largest t in [p(x), 1] with
KL(Bernoulli(p(x)) || Bernoulli(t)) <= D, the other tokens keep p's proportions. So x is accepted
with probability t, and a rejected x is replaced from p with x removed, as in the exact rule.

Cost. Evaluating pi for given (alpha, beta) is O(log V): sort the tokens in the target's support by
rho = q / p; the tokens with rho > 1/alpha take p/alpha, those with rho < 1/beta take p/beta, the
rest take q, so sum(pi) and KL(p || pi) are read off cumulative sums of p, q and p log(p/q) in that
order. Building them (a sort, O(V log V), once per decided position) dominates, for a large vocabulary
much more than the O(log V) search; top-k / top-p shrink the support that is sorted.

Worked example (tests/test_mentored.py): p = (0.5, 0.3, 0.2), q = (0.1, 0.1, 0.8), D = 0.1 nats:
alpha = 0.4878, beta = 1.3559, r = (1, 1, 0.5125), s = (0.6891, 0.3109, 0), pi = (0.3688, 0.2213,
0.4100); acceptance sum(q r) = 0.6100 against the exact rule's sum(min(p, q)) = 0.4.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from ..core import Draft, Verdict
from ..errors import QuickdraftError
from ..sampling import sample
from .rejection import correction, draft_row

BISECTION_STEPS = 40  # on log(1/alpha)


@dataclass(frozen=True)
class Mentor:
    """The emitted distribution at one position: pi = clip(q, p / beta, p / alpha), or q itself."""

    alpha: float = 1.0
    beta: float = 1.0
    kl: float = 0.0  # KL(p || pi), within the bound
    draft_itself: bool = False  # KL(p || q) was within the bound: pi = q, every draft token accepted

    def pi(self, p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        """p, q: [V] -> pi [V]. With alpha = beta = 1 this is p exactly (speculative sampling)."""
        if self.draft_itself:
            return q
        return torch.minimum(torch.maximum(q, p / self.beta), p / self.alpha)

    def acceptance(self, p: torch.Tensor, q: torch.Tensor) -> float:
        """P(a token drafted from q is accepted) = sum(q r) = sum(min(q, pi)); with EXACT, speculative sampling's
        sum(min(p, q))."""
        return float(torch.minimum(q, self.pi(p, q)).sum())


EXACT = Mentor()


class _Sorted:
    """Cumulative sums over the target's support sorted by rho = q / p, for O(log V) evaluations.

    Groups for a = 1/alpha >= 1 and u = 1/beta <= 1: rho < u takes p u (raised), u <= rho <= a takes
    q, rho > a takes p a (capped); sum(pi) and KL(p || pi) are then sums over contiguous ranges.
    Kept in numpy: each bisection step is a few scalar look-ups, where torch's per-call cost dominates.
    """

    def __init__(self, p: torch.Tensor, q: torch.Tensor):  # [V] each
        support = p > 0
        p_np = p[support].double().numpy()
        q_np = q[support].double().numpy()
        order = np.argsort(q_np / p_np)  # ties in rho may come in any order: the groups split at values
        p_np, q_np = p_np[order], q_np[order]
        self.rho = q_np / p_np  # [n], ascending
        with np.errstate(divide="ignore"):  # q = 0 only ever in the raised group, where L is not used
            logs = np.where(q_np > 0, p_np * np.log(p_np / np.where(q_np > 0, q_np, 1.0)), 0.0)
        self.P = np.concatenate([[0.0], np.cumsum(p_np)])  # [n + 1]: sums over the j smallest rho
        # [n + 1]: sums over the tokens from the j-th smallest rho on, the capped group's p. Summed from that end, not
        # as P[n] - P[j]: the capped tokens are those the target finds least likely against the draft, and a p below
        # P[n]'s rounding (about 1e-16) would vanish from the difference, pi(x) = p(x) / alpha with it from the KL.
        self.P_from = np.concatenate([np.cumsum(p_np[::-1])[::-1], [0.0]])
        self.Q = np.concatenate([[0.0], np.cumsum(q_np)])
        self.L = np.concatenate([[0.0], np.cumsum(logs)])
        self.n = len(p_np)
        self.G = self.rho * self.P[:-1] - self.Q[:-1]  # [n], nondecreasing (see solve)

    def solve(self, a: float) -> tuple[float, float]:
        """(u = 1/beta with sum(pi) = 1, KL(p || pi)) for a = 1/alpha >= 1, in O(log V).

        With the j smallest-rho tokens raised and u = rho_j, sum(pi) = capped + Q[h] + G[j] where
        G[j] = rho_j P[j] - Q[j] does not depend on a and grows with j: one search finds the group.
        """
        h = int(np.searchsorted(self.rho, a, side="right"))  # rho <= a: not capped
        capped = self.P_from[h]  # the target's mass on the capped tokens
        rest = 1.0 - capped * a - self.Q[h]  # what the raised group must sum to: u P[m] - Q[m]
        m = int(np.searchsorted(self.G[:h], rest, side="left"))  # raised: the m smallest rho (G[j] < rest)
        if m == 0:
            return 1.0, math.inf  # nothing left to raise: a too large for this pair
        u = float((rest + self.Q[m]) / self.P[m])
        kl = -capped * math.log(a) + (self.L[h] - self.L[m]) - self.P[m] * math.log(u)
        return u, max(0.0, float(kl))


def mentor(p: torch.Tensor, q: torch.Tensor, kl_bound: float) -> Mentor:
    """The largest-acceptance pi with KL(p || pi) <= kl_bound. p: [V] target, q: [V] draft.

    Example: p = (0.5, 0.3, 0.2), q = (0.1, 0.1, 0.8), bound 0.1 -> alpha 0.4878, beta 1.3559,
    pi = (0.5 / beta, 0.3 / beta, 0.2 / alpha) = (0.3688, 0.2213, 0.4100), KL(p || pi) = 0.1.
    """
    if kl_bound <= 0:
        return EXACT
    if float(q[p == 0].sum()) == 0:  # shortcut (1): the draft itself, if within the bound
        kl_draft = kl_divergence(p, q)
        if kl_draft <= kl_bound:
            return Mentor(kl=kl_draft, draft_itself=True)
    s = _Sorted(p, q)
    a_max = float(s.rho[-1]) if s.n else 1.0  # past the largest rho nothing is capped any more
    if not a_max > 1.0:
        return EXACT
    lo, hi, best = 0.0, math.log(a_max), EXACT  # bisection on log a: KL(a = 1) = 0 <= bound
    for _ in range(BISECTION_STEPS):
        mid = (lo + hi) / 2
        u, kl = s.solve(math.exp(mid))
        if kl <= kl_bound:
            lo, best = mid, Mentor(alpha=math.exp(-mid), beta=1 / u, kl=kl)
        else:
            hi = mid
    return best


def kl_divergence(p: torch.Tensor, r: torch.Tensor) -> float:
    """KL(p || r) over p's support, in nats (inf where r = 0 < p). p, r: [V]."""
    support = p > 0
    ps, rs = p[support].double(), r[support].double()
    return float((ps * (torch.log(ps) - torch.log(rs))).sum())


def verify_mentored(draft: Draft, target_probs: torch.Tensor, generator: torch.Generator, kl_bound: float) -> Verdict:
    """Mentored decoding of one draft; kl_bound is D, in nats per token.

    target_probs: [len(draft) + 1, vocab_size], processed (as for verify_sampling);
    draft.probs: [len(draft), vocab_size], or None for a deterministic drafter (point masses).

    Draws random numbers exactly as verify_sampling does (k uniforms, then one sample), so D = 0
    reproduces speculative sampling token for token under the same generator. Verdict.kls holds
    KL(p || pi) at each position decided here, the accepted ones and the rejected one (the bonus after a
    fully accepted draft is drawn from p: no divergence); Verdict.kl is their sum.

    Example (the module's worked example at one position): draft (2,) with q = (0.1, 0.1, 0.8),
    p = (0.5, 0.3, 0.2), D = 0.1, uniform 0.4. The exact test rejects (0.4 * 0.8 >= 0.2); mentored
    accepts, since 0.4 < r(2) = 0.2 / (0.4878 * 0.8) = 0.5125: accepted 1, kl 0.1. With uniform 0.6 it
    rejects and draws the bonus from s = (0.6891, 0.3109, 0).
    """
    if isinstance(kl_bound, bool) or not isinstance(kl_bound, (int, float)) or not math.isfinite(kl_bound) \
            or kl_bound < 0:
        raise QuickdraftError(f"the KL bound must be a finite number >= 0 (nats per token: 0 is exact speculative "
                              f"sampling, a larger D accepts more draft tokens); got {kl_bound!r}")
    k = len(draft)
    assert target_probs.shape[0] == k + 1, (target_probs.shape, k)
    u = torch.rand(k, generator=generator)  # [k]
    kls: list[float] = []  # KL(p || pi) at each decided position
    for i, x in enumerate(draft.tokens):
        p = target_probs[i]  # [V]
        q = draft_row(draft, i, p)  # [V]
        m = mentor(p, q, kl_bound)
        kls.append(m.kl)  # the emitted distribution here is pi, whichever test below decides
        if u[i] * q[x] < p[x]:  # the exact test accepts, and r(x) >= min(1, p/q): accept
            continue
        pi = m.pi(p, q)  # [V]
        if u[i] * q[x] < pi[x]:  # u < r(x) = pi(x) / q(x) = min(1, p(x) / (alpha q(x)))
            continue
        bonus = correction(pi, q, generator)  # from s, proportional to max(0, pi - q) = max(0, p / beta - q)
        return Verdict(draft, i, tuple(draft.tokens[:i]) + (bonus,), kls=tuple(kls))
    kls.append(0.0)  # the bonus, drawn from p
    return Verdict(draft, k, tuple(draft.tokens) + (sample(target_probs[k], generator),), kls=tuple(kls))
