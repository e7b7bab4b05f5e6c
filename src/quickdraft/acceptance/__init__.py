"""Acceptance rules: how the target's scores decide which draft tokens to keep.

    exact     greedy: the longest prefix equal to the target's argmax (greedy.py);
              sampling: speculative sampling, lossless (rejection.py)
    mentored  sampling only: lossy, KL(target || emitted) <= kl_bound per token (mentored.py)
    tree      tree drafts, exact (greedy and sampling): follow the target's own pick down the tree (tree.py)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..core import Draft, Verdict
from ..errors import QuickdraftError
from ..sampling import SamplingParams, probs_from_logits
from .greedy import verify_greedy
from .mentored import verify_mentored
from .rejection import verify_sampling
from .tree import verify_tree

RULES = ("exact", "mentored")


@dataclass(frozen=True)
class Acceptance:
    rule: str = "exact"
    kl_bound: float = 0.0  # mentored only: per-token bound on KL(target || emitted), in nats

    def __post_init__(self) -> None:
        if self.rule not in RULES:
            raise QuickdraftError(f"acceptance must be one of {', '.join(RULES)}; got {self.rule!r}")
        if isinstance(self.kl_bound, bool) or not isinstance(self.kl_bound, (int, float)) \
                or not math.isfinite(self.kl_bound) or self.kl_bound < 0:
            raise QuickdraftError(f"kl_bound must be a finite number >= 0; got {self.kl_bound!r}")
        if self.rule == "exact" and self.kl_bound:
            raise QuickdraftError("kl_bound applies to acceptance 'mentored' only")

    @property
    def lossy(self) -> bool:
        return self.rule == "mentored" and self.kl_bound > 0

    def check(self, sampling: SamplingParams) -> None:
        if self.rule == "mentored" and sampling.greedy:
            raise QuickdraftError("mentored acceptance trades a bounded KL divergence for speed under sampling; "
                                  "with greedy decoding (temperature 0) use the exact rule, or set a temperature")


def verify(draft: Draft, logits: torch.Tensor, sampling: SamplingParams, acceptance: Acceptance,
           generator: torch.Generator | None) -> Verdict:
    """logits: [len(draft) + 1, vocab_size], the target's raw scores for the draft positions."""
    if draft.parents is not None:
        if acceptance.rule == "mentored":
            raise QuickdraftError("mentored acceptance takes linear drafts only; tree drafts are verified exactly")
        return verify_tree(draft, logits, sampling, generator)
    if sampling.greedy:
        return verify_greedy(draft, logits)
    probs = probs_from_logits(logits, sampling)  # [len(draft) + 1, vocab_size]
    if acceptance.rule == "mentored":
        return verify_mentored(draft, probs, generator, acceptance.kl_bound)
    return verify_sampling(draft, probs, generator)


__all__ = ["Acceptance", "RULES", "verify", "verify_greedy", "verify_mentored", "verify_sampling", "verify_tree"]
