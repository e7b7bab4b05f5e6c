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
NUCLEUS_FIRST = 1024  # the likeliest tokens top_p looks at before it sorts a whole row (nucleus)


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 0.0  # 0 (or below GREEDY_BELOW): greedy (argmax), the default
    top_p: float = 1.0  # nucleus: keep the smallest set of tokens whose probability reaches top_p
    top_k: int = 0  # keep the k most likely tokens; 0: all
    # makes a sampled run reproducible: with point-mass drafts (prediction, lookup) plain sampling's own tokens
    # (acceptance/rejection.verify_walk); with a draft model only where its drafts repeat
    seed: int | None = None

    def __post_init__(self) -> None:
        number = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)  # noqa: E731 (True is an int)
        integer = lambda v: isinstance(v, int) and not isinstance(v, bool)  # noqa: E731
        if not number(self.temperature) or not 0 <= self.temperature < float("inf"):
            raise QuickdraftError(f"temperature must be a finite number >= 0; got {self.temperature!r}")
        if not number(self.top_p) or not 0 < self.top_p <= 1:
            raise QuickdraftError(f"top_p must be in (0, 1]; got {self.top_p!r}")
        if not integer(self.top_k) or self.top_k < 0:
            raise QuickdraftError(f"top_k must be an integer >= 0; got {self.top_k!r}")
        if self.seed is not None and (not integer(self.seed) or not -2**63 <= self.seed < 2**64):
            raise QuickdraftError(f"seed must be an integer in [-2**63, 2**64) (torch's generator); got {self.seed!r}")

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
        z = z.masked_fill(~nucleus(torch.softmax(z, dim=-1), params.top_p), float("-inf"))
    return torch.softmax(z, dim=-1)


def nucleus(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """Which tokens top_p keeps, bool [n, V], of probs [n, V]: the likeliest tokens in turn until their probability
    reaches top_p; a token is dropped where the tokens before it already reach it, and the likeliest always stays
    (a tiny top_p is 0 in float32).

    It looks at the NUCLEUS_FIRST likeliest first and sorts the whole row only where they hold less than top_p: a
    sort of the whole vocabulary for every sampled token was most of sampling's cost (measured:
    docs/results/2026-11-29-seeded-sampling#top_p-without-sorting-the-vocabulary).

    Example: probs (0.5, 0.3, 0.2), top_p 0.7 -> (True, True, False)."""
    top, order = torch.topk(probs, min(NUCLEUS_FIRST, probs.shape[-1]), dim=-1)  # [n, k], likeliest first
    cum = top.cumsum(dim=-1)
    if bool((cum[..., -1] < top_p).any()):  # a nucleus wider than k tokens: the whole row in order
        top, order = torch.sort(probs, dim=-1, descending=True)  # [n, V]
        cum = top.cumsum(dim=-1)
    keep_sorted = cum - top < top_p  # the mass before it does not reach top_p yet
    keep_sorted[..., 0] = True
    # a token past the k looked at has at least cum[k - 1] >= top_p before it: dropped
    return torch.zeros_like(probs, dtype=torch.bool).scatter(-1, order, keep_sorted)


def sample(probs: torch.Tensor, generator: torch.Generator) -> int:
    """One token from a distribution [vocab_size], by inverse transform: the first token whose cumulative
    probability exceeds one uniform times the total. One uniform a token (torch.multinomial draws one per vocabulary
    entry, many times slower: docs/results/2026-11-29-seeded-sampling), and a token of probability 0 is never drawn.

    Example: probs (0.5, 0, 0.5), uniform 0.7 -> cumulative (0.5, 0.5, 1.0) -> token 2."""
    cdf = probs.float().cumsum(0)  # [V]
    u = torch.rand((), generator=generator)
    i = int(torch.searchsorted(cdf, u * cdf[-1], right=True))
    return i if i < len(cdf) else int(torch.nonzero(probs).max())  # u * total rounded up to the total


def draw(logits: torch.Tensor, params: SamplingParams, generator: torch.Generator) -> int:
    """The target's own token at one position under sampling, from its logits row [vocab_size]: what plain
    sampling draws there. Every rule that lets the target draw its token (acceptance/rejection.verify_walk,
    acceptance/tree.verify_tree) draws it here, one position at a time, so that a row's draw is the same bits
    whatever pass computed the row."""
    return sample(probs_from_logits(logits[None], params)[0], generator)
