"""The lossy acceptance rules people use today, for comparison with mentored decoding (which bounds its
divergence; these do not). Opt-in, sampling only, marked lossy in the stats.

typical (Medusa's typical acceptance: T. Cai et al., "Medusa", 2024, section 2.3.1; vLLM's former
TypicalAcceptanceSampler): draft token x at a position whose target distribution is p is accepted when

    p(x) > min(epsilon, delta * exp(-H(p)))          H(p) = -sum p log p (nats)

a threshold that is epsilon where p is flat (high entropy) and lower where p is peaked, so that a
token the target finds plausible is kept even when the draft's own probability would make speculative
sampling reject it. At the first rejected position the bonus token is drawn from p itself, and after a
fully accepted draft from the next row, as in plain sampling. The draft's distribution plays no part:
the rule works the same for a draft model and for deterministic drafters. Defaults: epsilon 0.09,
delta 0.3 (Medusa's posterior threshold and alpha).

threshold (SGLang's speculative `threshold_single` / `threshold_acc`): accept x when p(x) >= t_single,
or when the speculative-sampling test passes against a relaxed ratio, u < min(1, p(x) / (t_acc q(x)))
(t_acc in (0, 1]; q a point mass for deterministic drafters). A rejected token is replaced from
max(0, p - q), renormalised, as in speculative sampling. t_single = 1 and t_acc = 1 is exactly
speculative sampling.

Neither rule bounds how far the emitted distribution is from p; Verdict.kl stays 0 for them (the
divergence is not computed), and the stats name the rule so that reports mark the output lossy.
"""

from __future__ import annotations

import torch

from ..core import Draft, Verdict
from ..sampling import sample
from .rejection import correction, draft_row


def typical_threshold(p: torch.Tensor, epsilon: float, delta: float) -> float:
    """min(epsilon, delta * exp(-H(p))) for one target distribution p: [V].

    Example: p uniform over 4 tokens (H = log 4): min(0.09, 0.3 / 4) = 0.075; p = (0.97, 0.01, 0.01, 0.01)
    (H = 0.168): min(0.09, 0.3 * 0.845) = 0.09.
    """
    support = p > 0
    ps = p[support].double()
    entropy = float(-(ps * torch.log(ps)).sum())
    return min(epsilon, delta * float(torch.exp(torch.tensor(-entropy, dtype=torch.float64))))


def verify_typical(draft: Draft, target_probs: torch.Tensor, generator: torch.Generator, epsilon: float,
                   delta: float) -> Verdict:
    """target_probs: [len(draft) + 1, vocab_size], processed. Accepts the longest prefix whose tokens clear
    their position's typical threshold; the bonus is drawn from p at the first position that does not (or
    after the draft)."""
    k = len(draft)
    assert target_probs.shape[0] == k + 1, (target_probs.shape, k)
    for i, x in enumerate(draft.tokens):
        p = target_probs[i]  # [V]
        if not float(p[x]) > typical_threshold(p, epsilon, delta):
            return Verdict(draft, i, tuple(draft.tokens[:i]) + (sample(p, generator),))
    return Verdict(draft, k, tuple(draft.tokens) + (sample(target_probs[k], generator),))


def verify_threshold(draft: Draft, target_probs: torch.Tensor, generator: torch.Generator, t_single: float,
                     t_acc: float) -> Verdict:
    """target_probs: [len(draft) + 1, vocab_size], processed; draft.probs [len(draft), vocab_size] or None.
    Draws k uniforms, then one token, as speculative sampling does (t_single = t_acc = 1 reproduces it)."""
    k = len(draft)
    assert target_probs.shape[0] == k + 1, (target_probs.shape, k)
    u = torch.rand(k, generator=generator)  # [k]
    for i, x in enumerate(draft.tokens):
        p = target_probs[i]  # [V]
        q = draft_row(draft, i, p)  # [V]
        if float(p[x]) >= t_single or float(u[i]) * t_acc * float(q[x]) < float(p[x]):
            continue
        return Verdict(draft, i, tuple(draft.tokens[:i]) + (correction(p, q, generator),))
    return Verdict(draft, k, tuple(draft.tokens) + (sample(target_probs[k], generator),))
