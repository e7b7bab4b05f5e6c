"""The only place where logits become probabilities or tokens.

The distribution quickdraft preserves is the target's *processed* distribution: logits divided by
the temperature, then restricted to the top_k tokens and to the smallest top_p nucleus, then
renormalised. Drafters that have distributions (a draft model) must process theirs with the same
SamplingParams, so that the acceptance ratio compares like with like.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .errors import QuickdraftError


GREEDY_BELOW = 1e-5  # a temperature below this decodes greedily, as vLLM does: logits / T would overflow


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 0.0  # 0 (or below GREEDY_BELOW): greedy (argmax), the default
    top_p: float = 1.0  # nucleus: keep the smallest set of tokens whose probability reaches top_p
    top_k: int = 0  # keep the k most likely tokens; 0: all
    seed: int | None = None  # makes a sampled run reproducible

    def __post_init__(self) -> None:
        if not isinstance(self.temperature, (int, float)) or not self.temperature >= 0:
            raise QuickdraftError(f"temperature must be a number >= 0; got {self.temperature!r}")
        if not isinstance(self.top_p, (int, float)) or not 0 < self.top_p <= 1:
            raise QuickdraftError(f"top_p must be in (0, 1]; got {self.top_p!r}")
        if not isinstance(self.top_k, int) or self.top_k < 0:
            raise QuickdraftError(f"top_k must be an integer >= 0; got {self.top_k!r}")
        if self.seed is not None and not isinstance(self.seed, int):
            raise QuickdraftError(f"seed must be an integer; got {self.seed!r}")

    @property
    def greedy(self) -> bool:
        return self.temperature < GREEDY_BELOW

    def generator(self) -> torch.Generator:
        g = torch.Generator()
        if self.seed is None:
            g.seed()
        else:
            g.manual_seed(self.seed)
        return g


def probs_from_logits(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    """Processed distributions, float32 [n, vocab_size], from logits [n, vocab_size] (sampling only).

    Example: logits (2, 1, 0, -9), temperature 1, top_k 2 -> softmax over (2, 1) = (0.73, 0.27, 0, 0).
    """
    if params.greedy:
        raise ValueError("probs_from_logits is for sampling; greedy decoding uses argmax")
    z = logits.float() / params.temperature  # [n, V]
    if params.top_k and params.top_k < z.shape[-1]:
        kth = torch.topk(z, params.top_k, dim=-1).values[..., -1:]  # [n, 1]
        z = z.masked_fill(z < kth, float("-inf"))
    if params.top_p < 1.0:
        sorted_z, order = torch.sort(z, dim=-1, descending=True)  # [n, V]
        cum = torch.softmax(sorted_z, dim=-1).cumsum(dim=-1)
        drop_sorted = cum - torch.softmax(sorted_z, dim=-1) >= params.top_p  # mass before it already reaches p
        drop_sorted[..., 0] = False  # the likeliest token always stays (a tiny top_p is 0 in float32)
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        z = z.masked_fill(drop, float("-inf"))
    return torch.softmax(z, dim=-1)


def sample(probs: torch.Tensor, generator: torch.Generator) -> int:
    """One token from a distribution [vocab_size]."""
    return int(torch.multinomial(probs, 1, generator=generator))
