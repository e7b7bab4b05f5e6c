"""Draft-model drafter (Leviathan et al. 2023; Chen et al. 2023): a smaller model with the same
tokenizer proposes the next tokens one at a time; the target verifies them all in one pass.

The draft model runs on its own Runner with its own KV cache. The drafter remembers which tokens
that cache holds (`cached`, a prefix of the context followed by the draft tokens it fed), and after
every verdict cuts it back to the part the new context agrees with, so it stays in step whichever
drafter proposed and however much was accepted.

Example (greedy, k = 3): context c, cache c[:-1]. propose feeds [c[-1]] -> d1, then [d1] -> d2,
then [d2] -> d3; the cache now holds c + (d1, d2) (d3 was never fed). The target accepts d1 and
corrects d2 to b: the context becomes c + (d1, b); the cache is cut back to c + (d1,) and the next
propose feeds [b]. If all three are accepted with bonus b, the next propose feeds [d3, b].

Under sampling the drafter samples from its own processed distribution (the same SamplingParams as
the target, applied by quickdraft.sampling) and returns those distributions in Draft.probs, which is
what speculative sampling needs to stay lossless. Under greedy decoding it drafts its argmax.

Draft length. A fixed `k`, or adaptive (the default): start at `initial`; after a draft the target
accepted entirely, k += 2; after one it cut short, k -= 1; within [min_length, max_length]. This is
the rule transformers uses for assisted generation; it starts at 16 because a verify pass costs many draft-model
tokens, so a long first draft is cheap next to the pass it saves (measured: docs/drafters.md#the-draft-model).
Drafting also stops early, whatever k is, when the draft model's probability of its own choice
falls below `min_confidence`, or the product of those probabilities over the draft so far (its own
odds that the whole draft is right) below `min_joint`: on a CPU each verified token costs real time,
so tokens the draft model itself doubts are not worth sending. These probabilities are well calibrated
(a token the draft model gives 0.5-0.6 is accepted about as often; measured with docs/results/2026-11-23-qwen1.5b-draft/draft_model_replay.py:
docs/drafters.md#the-draft-model), so each draft carries them (Draft.confidence), their miss rates
scaled by the request's own misses (`calibrated`: on code the draft model is right more often than
it says), and the engine's sizer sends only the prefix worth a pass (sizing.py). The rules depend
only on the draft model's own state, so they change speed, never the output (exact under greedy,
lossless under sampling: the confidence of token i is the top probability of its distribution, known
before token i is drawn, and under sampling the sizer cuts a draft by those of the tokens up to i only;
the drafter asks it as it drafts, `keep`, and stops at the first token it cuts).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import torch

from ..core import EMPTY_DRAFT, Draft, Verdict
from ..errors import QuickdraftError, UnsupportedModelError
from ..runners.base import Runner
from ..sampling import SamplingParams, probs_from_logits, sample
from .base import Drafter


@dataclass(frozen=True)
class DraftModelConfig:
    k: int | None = None  # fixed draft length; None: adaptive (see the module docstring)
    initial: int = 16
    min_length: int = 1
    max_length: int = 32
    min_confidence: float = 0.3  # stop drafting when the draft's top probability is below this (0: never)
    min_joint: float = 0.5  # stop drafting when the product of those probabilities is below this (0: never)

    def __post_init__(self) -> None:
        if self.k is not None and (not isinstance(self.k, int) or self.k < 1):
            raise QuickdraftError(f"draft length must be a positive integer or 'auto'; got {self.k!r}")
        if not 1 <= self.min_length <= self.initial <= self.max_length:
            raise QuickdraftError("draft lengths must satisfy 1 <= min_length <= initial <= max_length; "
                                  f"got {self.min_length}, {self.initial}, {self.max_length}")
        if not 0 <= self.min_confidence < 1:
            raise QuickdraftError(f"min_confidence must be in [0, 1); got {self.min_confidence!r}")
        if not 0 <= self.min_joint < 1:
            raise QuickdraftError(f"min_joint must be in [0, 1); got {self.min_joint!r}")


class DraftModelDrafter(Drafter):

    def __init__(
        self,
        runner: Runner,
        vocab_size: int,
        sampling: SamplingParams = SamplingParams(),
        config: DraftModelConfig = DraftModelConfig(),
    ):
        """runner: the draft model's. vocab_size: the target's logits width; draft distributions are
        returned at that width (draft logits past the shared vocabulary are padding rows, dropped)."""
        self.runner = runner
        self.vocab_size = vocab_size
        self.shared = min(vocab_size, runner.vocab_size)
        self.sampling = sampling
        self.config = config
        # Request state is set by begin(); constructing a drafter never touches the (shared) runner.
        self.rng: torch.Generator | None = None
        self.cached: list[int] = []  # tokens in the draft model's cache
        self.k = config.k or config.initial
        self.forwards = 0  # draft-model forward passes over the whole request
        self.misses = [0.0, 0.0]  # decayed [rejections seen, rejections its confidences predicted], this request
        self._raw: list[float] = []  # the last draft's own probabilities
        # Set by the engine when its sizer trims this drafter's sampled drafts (sizing.DraftSizer.keeps): whether
        # the trim keeps the last of a draft's tokens given its rates so far. Drafting stops at the first token it
        # would cut (that token stays in the draft for the trim to cut), so a draft the trim sends short or empty
        # costs no draft-model forwards past that token. None: draft to the limits above.
        self.keep: Callable[[Sequence[float]], bool] | None = None

    def begin(self, prompt: Sequence[int]) -> None:
        self.runner.reset()
        self.cached = []
        self.k = self.config.k or self.config.initial
        self.forwards = 0
        self.misses = [0.0, 0.0]
        if not self.sampling.greedy:
            # Its own stream of random numbers, reproducible from the seed, independent of the target's.
            self.rng = torch.Generator()
            # seed + 1 modulo 2**64: torch takes seeds below 2**64 and reads negative ones modulo 2**64 already
            self.rng.manual_seed((self.sampling.seed + 1) % 2**64) if self.sampling.seed is not None else self.rng.seed()
        if len(prompt) > 1:
            self.runner.prefill(prompt[:-1])
            self.cached = list(prompt[:-1])

    def propose(self, context: Sequence[int], budget: int) -> Draft:
        k = min(budget, self.k, self.runner.max_context - len(context))
        if k <= 0:
            return EMPTY_DRAFT
        new = list(context[len(self.cached) :])  # at least the last context token (never cached)
        tokens: list[int] = []
        rows: list[torch.Tensor] = []
        confidences: list[float] = []
        self._raw = []
        forwards, joint = 0, 1.0
        while len(tokens) < k:
            logits = self.runner.forward(new)[-1, : self.shared]  # [shared]: the next token's
            forwards += 1
            self.cached.extend(new)
            token, row, raw = self._choose(logits)
            confidence = self.calibrated(raw)
            joint *= confidence  # the odds that the draft is right up to here
            if tokens and (raw < self.config.min_confidence or joint < self.config.min_joint):
                break  # the draft model doubts its own next token: stop here (keep at least one)
            tokens.append(token)
            confidences.append(confidence)
            self._raw.append(raw)
            if row is not None:
                rows.append(row)
            if self.keep is not None and not self.keep(confidences):
                break  # the sizer cuts the draft here: drafting on would buy nothing
            new = [token]
        self.forwards += forwards
        probs = torch.stack(rows) if rows else None  # [len(tokens), vocab_size] under sampling
        return Draft(tokens=tuple(tokens), probs=probs, source="draft-model", forwards=forwards,
                     confidence=tuple(confidences))

    def calibrated(self, p: float) -> float:
        """p calibrated by this request's misses (calibrate)."""
        return calibrate(p, self.misses)

    def _choose(self, logits: torch.Tensor) -> tuple[int, torch.Tensor | None, float]:
        """(token, its processed distribution at the target's width or None, confidence)."""
        if self.sampling.greedy:
            top = torch.softmax(logits.float(), dim=-1).max()
            return int(logits.argmax()), None, float(top)
        p = probs_from_logits(logits[None], self.sampling)[0]  # [shared]
        row = torch.zeros(self.vocab_size)  # [vocab_size]
        row[: self.shared] = p
        return sample(row, self.rng), row, float(p.max())

    def observe(self, context: Sequence[int], verdict: Verdict) -> None:
        realign(self.runner, self.cached, context)
        draft = verdict.draft
        if draft.source != "draft-model" or not len(draft):
            return
        full = verdict.accepted == len(draft)
        note_misses(self.misses, self._raw[: len(draft)], verdict.accepted)
        if self.config.k is None:
            c = self.config
            self.k = max(c.min_length, min(c.max_length, self.k + 2 if full else self.k - 1))


def calibrate(p: float, misses: Sequence[float]) -> float:
    """A draft model's probability p of its token, its miss rate 1 - p scaled by how often it has missed
    (misses[0], drafts cut short) against how often its probabilities said it would (misses[1]), prior
    1 : 1. Example: on code it missed 0 times where its probabilities predicted 3 -> p = 0.9 becomes
    1 - 0.1 / 4 = 0.975."""
    seen, predicted = misses
    return max(0.0, 1.0 - (1.0 - p) * (seen + 1.0) / (predicted + 1.0))


def note_misses(misses: list[float], raw: Sequence[float], accepted: int) -> None:
    """calibrate()'s evidence after a draft whose tokens the draft model gave probabilities `raw`, of which
    the target accepted `accepted` (more: the draft went on past them, as Ouroboros's branches do): one miss
    if it was cut short, and the misses its probabilities predicted up to the first rejected token."""
    misses[0] = 0.9 * misses[0] + (accepted < len(raw))
    misses[1] = 0.9 * misses[1] + sum(1.0 - p for p in raw[: accepted + 1])


def realign(runner: Runner, cached: list[int], context: Sequence[int]) -> None:
    """Cut a draft model's cache (holding `cached`) back to its longest prefix that agrees with the
    context, leaving out the context's last token (never cached). Example: cached (1, 2, 7, 8),
    context (1, 2, 3, 4) -> cached (1, 2)."""
    keep = 0
    limit = min(len(cached), len(context) - 1)
    while keep < limit and cached[keep] == context[keep]:
        keep += 1
    if keep < len(cached):
        runner.rollback(keep)
        del cached[keep:]


def check_vocabularies(target: Mapping[str, int], draft: Mapping[str, int], target_name: str = "target",
                       draft_name: str = "draft") -> None:
    """Refuse a draft model whose tokenizer maps any token text to a different id than the target's.

    Vocabularies must be identical; logits widths may differ (padding rows past the vocabulary).
    """
    if target == draft:
        return
    only_target = sorted(set(target) - set(draft))
    only_draft = sorted(set(draft) - set(target))
    moved = sorted(t for t in set(target) & set(draft) if target[t] != draft[t])
    detail = []
    if only_target:
        detail.append(f"{len(only_target)} token(s) only in {target_name}'s (e.g. {only_target[:3]})")
    if only_draft:
        detail.append(f"{len(only_draft)} token(s) only in {draft_name}'s (e.g. {only_draft[:3]})")
    if moved:
        detail.append(f"{len(moved)} token(s) with different ids (e.g. {moved[:3]})")
    raise UnsupportedModelError(
        f"the draft model {draft_name!r} does not share the tokenizer of {target_name!r}: " + "; ".join(detail)
        + ". A draft model must use the same vocabulary as the target (e.g. qwen2.5-coder-0.5b for qwen2.5-coder-1.5b)"
    )
