"""The values that cross the engine's interfaces.

Glossary (used the same way in every module):
    context   prompt tokens followed by the output tokens so far.
    draft     tokens proposed by a drafter for the positions right after the context.
    target    the model whose output quickdraft reproduces; it verifies drafts.
    accepted  the longest prefix of the draft the target agrees with.
    bonus     the one token the target produces itself after the accepted prefix: the correction of
              the first rejected draft token, or one token past a fully accepted draft.
    rejected  draft tokens sent for verification that do not end up in the output.

One target pass therefore emits `accepted + 1` tokens: output tokens = accepted + bonus.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass(frozen=True)
class Draft:
    """Tokens proposed for the positions right after the context.

    `probs` is None for deterministic drafters (a point mass on each token: prediction, prompt
    lookup) and for a draft model under greedy decoding; under sampling a draft model fills it with
    the distributions it sampled its tokens from.
    """

    tokens: tuple[int, ...] = ()
    probs: torch.Tensor | None = None  # [len(tokens), vocab_size] or None
    source: str = ""  # which drafter proposed it ("prediction", "lookup", "draft-model", ...)
    forwards: int = 0  # draft-model forward passes spent producing it (0 for lookup-style drafters)
    # None: a linear draft. Otherwise a tree (trees.py): parents[i] is the index of token i's parent
    # in the draft, -1 for the last context token; the target keeps its longest accepted path.
    parents: tuple[int, ...] | None = None
    # the drafter's estimate, per token, that the target accepts it if it accepts the ones before it (a
    # draft model's probability of its own token); None: no estimate. Sizing uses it (sizing.py: trim).
    confidence: tuple[float, ...] | None = None

    def __len__(self) -> int:
        return len(self.tokens)

    def head(self, k: int) -> "Draft":
        """Its first k tokens (with their distributions): (5, 6, 7).head(2) -> (5, 6). For a tree, the
        subtree of its first k tokens (parents come before children)."""
        if k >= len(self.tokens):
            return self
        return Draft(self.tokens[:k], None if self.probs is None else self.probs[:k], self.source, self.forwards,
                     None if self.parents is None else self.parents[:k],
                     None if self.confidence is None else self.confidence[:k])


EMPTY_DRAFT = Draft()


@dataclass(frozen=True)
class Verdict:
    """What the target decided about one draft.

    Example: draft (5, 6, 7), target's own choices at those positions (5, 6, 9, 4):
    accepted = 2 and tokens = (5, 6, 9): two draft tokens kept, 9 is the bonus (a correction here).
    """

    draft: Draft
    accepted: int  # length of the accepted prefix of draft.tokens
    tokens: tuple[int, ...]  # draft.tokens[:accepted] + (bonus,)
    # lossy rules: KL(target || emitted) in nats at each position of `tokens` decided here (the accepted ones and the
    # rejected one; the bonus after a fully accepted draft: 0): the divergence the emitted tokens actually incurred.
    # () for exact rules. The engine counts only the positions whose tokens it emits: not those after EOS, a stop
    # string or the token limit
    kls: tuple[float, ...] = ()
    # tree drafts: draft indices of the accepted root-to-node path (len == accepted); None for linear drafts
    path: tuple[int, ...] | None = None
    # the target's argmax after every input of the pass ([root, *draft]), where the rule computed it
    # (greedy and tree rules): drafters learn phrases from it (drafters/phrase_pool.py: harvest)
    argmax: tuple[int, ...] | None = None

    @property
    def bonus(self) -> int:
        return self.tokens[-1]

    @property
    def kl(self) -> float:
        """KL(target || emitted) summed over the positions decided here (0.0 for exact rules)."""
        return sum(self.kls)


@dataclass(frozen=True)
class Step:
    """Output of one engine iteration, after stopping rules were applied.

    tokens may be shorter than verdict.tokens when generation stopped inside the block (EOS, a stop
    string, the token limit); finish_reason is then set ("stop" or "length").
    """

    tokens: tuple[int, ...]
    from_draft: tuple[bool, ...]  # same length as tokens: True where a draft token was accepted
    verdict: Verdict
    finish_reason: str | None = None


@dataclass
class Stats:
    """Counters for one generation, with OpenAI's meaning for the prediction counts.

    accepted_prediction_tokens: draft tokens the target confirmed that appear in the output.
    rejected_prediction_tokens: draft tokens sent for verification that are not in the output.
    The bonus token is a generated token: counted in completion_tokens, in neither of the above.
    """

    prompt_tokens: int = 0
    # prompt tokens whose cache rows the prefill took from an earlier request instead of computing them (prefix
    # reuse, runners/hf.HFRunner): OpenAI's usage.prompt_tokens_details.cached_tokens
    cached_tokens: int = 0
    completion_tokens: int = 0
    accepted_prediction_tokens: int = 0
    rejected_prediction_tokens: int = 0
    draft_tokens: int = 0  # all tokens proposed for verification
    target_passes: int = 0  # decode passes of the target (the prefill is not counted)
    draft_forwards: int = 0  # forward passes of a draft model
    acceptance: str = "exact"  # the rule (acceptance.RULES)
    kl_bound: float = 0.0
    lossy: bool = False  # the rule may emit other tokens than the target's distribution would (Acceptance.lossy)
    kl: float = 0.0  # mentored: KL(target || emitted) summed over the positions of the emitted tokens (nats)
    prefill_s: float = 0.0
    decode_s: float = 0.0
    drafter_s: float = 0.0  # part of decode_s spent proposing drafts
    by_source: dict[str, list[int]] = field(default_factory=dict)  # source -> [accepted, rejected]
    # the target's passes checked row-invariant at load (runners/load.exact_runner): True, False (checked, not
    # invariant: float32 that failed the check), None (not checked: a llama.cpp target, whose build is checked instead)
    row_invariant: bool | None = None

    @property
    def tokens_per_pass(self) -> float:
        """Mean output tokens per target pass (accepted + bonus); 1.0 for plain decoding."""
        return self.completion_tokens / self.target_passes if self.target_passes else 0.0

    @property
    def accepted_per_pass(self) -> float:
        return self.accepted_prediction_tokens / self.target_passes if self.target_passes else 0.0

    @property
    def kl_per_token(self) -> float:
        """Mean KL(target || emitted) per output token: 0.0 for exact acceptance."""
        return self.kl / self.completion_tokens if self.completion_tokens else 0.0

    @property
    def decode_tokens_per_s(self) -> float:
        return self.completion_tokens / self.decode_s if self.decode_s > 0 else 0.0

    @property
    def tokens_per_s(self) -> float:
        """End to end: output tokens over prefill plus decode time."""
        total = self.prefill_s + self.decode_s
        return self.completion_tokens / total if total > 0 else 0.0

    def as_dict(self) -> dict:
        return {
            "prompt_tokens": self.prompt_tokens,
            "cached_tokens": self.cached_tokens,
            "completion_tokens": self.completion_tokens,
            "accepted_prediction_tokens": self.accepted_prediction_tokens,
            "rejected_prediction_tokens": self.rejected_prediction_tokens,
            "draft_tokens": self.draft_tokens,
            "target_passes": self.target_passes,
            "draft_forwards": self.draft_forwards,
            "acceptance": self.acceptance,
            "kl_bound": self.kl_bound,
            "lossy": self.lossy,
            "kl_per_token": round(self.kl_per_token, 6),
            "tokens_per_pass": round(self.tokens_per_pass, 4),
            "accepted_per_pass": round(self.accepted_per_pass, 4),
            "prefill_s": round(self.prefill_s, 4),
            "decode_s": round(self.decode_s, 4),
            "drafter_s": round(self.drafter_s, 4),
            "decode_tokens_per_s": round(self.decode_tokens_per_s, 3),
            "tokens_per_s": round(self.tokens_per_s, 3),
            "by_source": {k: {"accepted": a, "rejected": r} for k, (a, r) in self.by_source.items()},
            "row_invariant": self.row_invariant,
        }
