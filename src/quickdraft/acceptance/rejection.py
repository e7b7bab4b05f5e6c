"""Speculative sampling (Leviathan et al. 2023; Chen et al. 2023): lossless under sampling.

p is the target's processed distribution, q the drafter's. Draft token x_i is accepted with
probability min(1, p_i(x_i) / q_i(x_i)); at the first rejection the bonus token is drawn from the
residual max(0, p_i - q_i), renormalised; if every draft token is accepted it is drawn from
p_{k} (the row after the draft). The emitted tokens are then distributed exactly as sampling from
p one token at a time.

A deterministic drafter (draft.probs is None: prediction, prompt lookup) is a point mass q_i =
onehot(x_i): accept with probability p_i(x_i); the residual is p_i with x_i removed, renormalised.
Edge cases: q_i(x_i) = 0 cannot be drawn by a sampler but is accepted with probability 1 when
p_i(x_i) > 0 (the ratio is infinite); a token the target's top-k / top-p removed has p_i(x_i) = 0
and is always rejected; a residual that is zero everywhere numerically (p == q) falls back to p_i,
which is what it converges to.

The engine verifies point masses under the exact rule with `verify_walk` instead: the target draws its own
token at each position, one uniform a position as plain sampling does, and a draft token is accepted where it is
that token. It accepts x_i with the same probability p_i(x_i), and emits what plain sampling with the same
generator emits, whatever was drafted; `verify_sampling` draws k uniforms for a draft of k, so there the tokens a
seed gives depend on how much was drafted.
"""

from __future__ import annotations

import torch

from ..core import Draft, Verdict
from ..sampling import SamplingParams, draw, sample


def verify_sampling(draft: Draft, target_probs: torch.Tensor, generator: torch.Generator) -> Verdict:
    """target_probs: [len(draft) + 1, vocab_size], processed; draft.probs: [len(draft), vocab_size] or None."""
    k = len(draft)
    assert target_probs.shape[0] == k + 1, (target_probs.shape, k)
    accepted = 0
    if k:
        x = torch.tensor(draft.tokens)  # [k]
        rows = torch.arange(k)
        p_x = target_probs[rows, x]  # [k]
        q_x = torch.ones(k) if draft.probs is None else draft.probs[rows, x].float()  # [k]
        u = torch.rand(k, generator=generator)  # [k]
        ok = u * q_x < p_x  # u < p/q without dividing (q may be 0)
        accepted = int(torch.cumprod(ok.to(torch.int64), dim=0).sum())
    if accepted < k:
        bonus = correction(target_probs[accepted], draft_row(draft, accepted, target_probs[accepted]), generator)
    else:
        bonus = sample(target_probs[k], generator)
    return Verdict(draft=draft, accepted=accepted, tokens=tuple(draft.tokens[:accepted]) + (bonus,))


def verify_walk(draft: Draft, target_logits: torch.Tensor, sampling: SamplingParams,
                generator: torch.Generator) -> Verdict:
    """A point-mass draft (draft.probs None: prediction, lookup, phrases) under sampling: position by position the
    target draws its own token (sampling.draw); a draft token is accepted where it is that token, and the first
    draw that differs is the bonus. Every emitted token is the target's draw, so the output is plain sampling's,
    token for token under the same generator: one uniform per output position, however long the drafts were.
    Rows after the first differing draw are not processed.

    target_logits: [len(draft) + 1, vocab_size], raw. Example: draft (5, 6, 7), draws (5, 9): accepted 1, tokens
    (5, 9)."""
    k = len(draft)
    assert draft.probs is None and target_logits.shape[0] == k + 1, (target_logits.shape, k)
    for i, x in enumerate(draft.tokens):
        pick = draw(target_logits[i], sampling, generator)
        if pick != x:
            return Verdict(draft=draft, accepted=i, tokens=tuple(draft.tokens[:i]) + (pick,))
    return Verdict(draft=draft, accepted=k, tokens=tuple(draft.tokens) + (draw(target_logits[k], sampling, generator),))


def draft_row(draft: Draft, i: int, like: torch.Tensor) -> torch.Tensor:
    """The drafter's distribution at position i, [vocab_size]: its probs, or a point mass on its token."""
    if draft.probs is not None:
        return draft.probs[i].float()
    q = torch.zeros_like(like)
    q[draft.tokens[i]] = 1.0
    return q


def correction(p: torch.Tensor, q: torch.Tensor, generator: torch.Generator) -> int:
    """The token that replaces a rejected draft token: drawn from max(0, p - q) renormalised, or
    from p where that residual is zero numerically (p == q). p: [V] the distribution to emit, q: [V]."""
    residual = torch.clamp(p - q, min=0)  # [V]
    total = float(residual.sum())
    return sample(residual / total if total > 1e-12 else p, generator)
