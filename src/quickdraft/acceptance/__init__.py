"""Acceptance rules: how the target's scores decide which draft tokens to keep.

    exact     greedy: the longest prefix equal to the target's argmax (greedy.py);
              sampling: speculative sampling, lossless; point masses (prediction, lookup) by the target's own
              draws, which gives plain sampling's tokens under the same seed (rejection.py)
    mentored  sampling only: lossy, KL(target || emitted) <= kl_bound per token (mentored.py)
    typical   sampling only: lossy, no bound: Medusa's typical acceptance (relaxed.py)
    threshold sampling only: lossy, no bound: SGLang's acceptance thresholds (relaxed.py)
    tree      tree drafts, exact (greedy and sampling): follow the target's own pick down the tree (tree.py)

The settings of mentored and threshold that are speculative sampling (kl_bound 0; thresholds of 1.0:
Acceptance.lossy False) verify as exact does, point masses by the target's own draws included.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, get_args

import torch

from ..core import Draft, Verdict
from ..errors import QuickdraftError
from ..sampling import SamplingParams, probs_from_logits
from .greedy import verify_greedy
from .mentored import verify_mentored
from .rejection import verify_sampling, verify_walk
from .relaxed import verify_threshold, verify_typical
from .tree import verify_tree

# The rule names, defined here once (every front end takes them from here)
Rule = Literal["exact", "mentored", "typical", "threshold"]
RULES: tuple[Rule, ...] = get_args(Rule)
SAMPLED_ONLY: tuple[Rule, ...] = ("mentored", "typical", "threshold")


@dataclass(frozen=True)
class Acceptance:
    rule: Rule = "exact"
    kl_bound: float = 0.0  # mentored only: per-token bound on KL(target || emitted), in nats
    epsilon: float = 0.09  # typical only: the threshold where the target is flat (Medusa's posterior threshold)
    delta: float = 0.3  # typical only: the factor of exp(-entropy) (Medusa's posterior alpha)
    t_single: float = 1.0  # threshold only: accept any draft token the target gives at least this
    t_acc: float = 1.0  # threshold only: accept with probability min(1, p / (t_acc q)), t_acc in (0, 1]

    def __post_init__(self) -> None:
        if self.rule not in RULES:
            raise QuickdraftError(f"acceptance must be one of {', '.join(RULES)}; got {self.rule!r}")
        for name in ("kl_bound", "epsilon", "delta", "t_single", "t_acc"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise QuickdraftError(f"{name} must be a finite number >= 0; got {value!r}")
        owner = {"kl_bound": "mentored", "epsilon": "typical", "delta": "typical", "t_single": "threshold",
                 "t_acc": "threshold"}
        for name, rule in owner.items():
            if rule != self.rule and getattr(self, name) != getattr(Acceptance, name):
                raise QuickdraftError(f"{name} applies to acceptance {rule!r} only")
        if not 0 < self.t_acc <= 1:
            raise QuickdraftError(f"t_acc must be in (0, 1] (1: the exact ratio); got {self.t_acc!r}")

    @property
    def lossy(self) -> bool:
        if self.rule == "mentored":
            return self.kl_bound > 0
        if self.rule == "threshold":
            return self.t_single < 1 or self.t_acc < 1
        return self.rule == "typical"

    def check(self, sampling: SamplingParams) -> None:
        if self.rule == "mentored" and sampling.greedy:
            raise QuickdraftError("mentored acceptance trades a bounded KL divergence for speed under sampling; "
                                  "with greedy decoding (temperature 0) use the exact rule, or set a temperature")
        if self.rule in ("typical", "threshold") and sampling.greedy:
            raise QuickdraftError(f"{self.rule} acceptance relaxes sampling's test; with greedy decoding "
                                  "(temperature 0) use the exact rule, or set a temperature")


def verify(draft: Draft, logits: torch.Tensor, sampling: SamplingParams, acceptance: Acceptance,
           generator: torch.Generator | None) -> Verdict:
    """logits: [len(draft) + 1, vocab_size], the target's raw scores for the draft positions."""
    if draft.parents is not None:
        if acceptance.rule != "exact":
            raise QuickdraftError(f"{acceptance.rule} acceptance takes linear drafts only; tree drafts are verified "
                                  "exactly")
        return verify_tree(draft, logits, sampling, generator)
    if sampling.greedy:
        return verify_greedy(draft, logits)
    exact = not acceptance.lossy  # mentored at D = 0, thresholds of 1.0: speculative sampling, so its draws too
    if exact and draft.probs is None:  # point masses: plain sampling's tokens under the same seed
        return verify_walk(draft, logits, sampling, generator)
    probs = probs_from_logits(logits, sampling)  # [len(draft) + 1, vocab_size]
    if exact:
        return verify_sampling(draft, probs, generator)
    if acceptance.rule == "mentored":
        return verify_mentored(draft, probs, generator, acceptance.kl_bound)
    if acceptance.rule == "typical":
        return verify_typical(draft, probs, generator, acceptance.epsilon, acceptance.delta)
    if acceptance.rule == "threshold":
        return verify_threshold(draft, probs, generator, acceptance.t_single, acceptance.t_acc)
    return verify_sampling(draft, probs, generator)


__all__ = ["Acceptance", "RULES", "Rule", "SAMPLED_ONLY", "verify", "verify_greedy", "verify_mentored", "verify_sampling",
           "verify_threshold", "verify_tree", "verify_typical", "verify_walk"]
