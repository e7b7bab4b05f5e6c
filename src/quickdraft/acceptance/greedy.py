"""Greedy acceptance: keep the longest draft prefix equal to the target's argmax choices."""

from __future__ import annotations

import torch

from ..core import Draft, Verdict


def verify_greedy(draft: Draft, target_logits: torch.Tensor) -> Verdict:
    """Compare a draft with the target's greedy choices.

    target_logits: [len(draft) + 1, vocab_size]; row i is the target's prediction for the position of
    draft token i (row len(draft) predicts the token after the whole draft).

    Example: draft (5, 6, 7), argmax rows (5, 6, 9, 4) -> accepted 2, tokens (5, 6, 9).
    Because the accepted tokens equal the target's own choices, the output is exactly what plain
    greedy decoding of the target produces.
    """
    k = len(draft)
    assert target_logits.shape[0] == k + 1, (target_logits.shape, k)
    choices = target_logits.argmax(dim=-1)  # [k + 1]
    if k:
        agree = choices[:k] == torch.tensor(draft.tokens, dtype=choices.dtype)  # [k]
        accepted = int(torch.cumprod(agree.to(torch.int64), dim=0).sum())
    else:
        accepted = 0
    choices_list = tuple(choices.tolist())
    return Verdict(draft=draft, accepted=accepted, tokens=choices_list[: accepted + 1], argmax=choices_list)
