"""Eager attention without copying the KV cache per head (the transformers runner in bf16).

transformers' eager attention (what the bf16 runner must use: SDPA is not row-invariant,
docs/runtime.md) first repeats each key/value head for every query head that shares it (repeat_kv):
with grouped-query attention that writes the whole cache again, G times over, in every layer of every
step (qwen2.5-coder-0.5b: 14 query heads on 2 KV heads, 7 copies; after 1,400 cached tokens about
120 MB written per step in bf16). Here the G query heads of a group are stacked as rows of one product
against their shared keys instead:

    query [b, H, n, D] -> [b, Hkv, G n, D]           (head h = kv G + g, as repeat_kv orders them)
    scores = query keys^T * scaling                  [b, Hkv, G n, L]
    weights = softmax(scores + mask) in float32      (the mask [b, 1, n, L] broadcast over g)
    output = weights values -> [b, n, H, D]

The same sums as eager attention, in another kernel shape: whether every row of an n-token pass gets
the bits of a one-token pass is a property of the machine's kernels, checked when the runner loads
(runners/hf.bf16_runner) and by the tests, as for the rest of the model.
"""

from __future__ import annotations

import torch

NAME = "quickdraft_grouped"


def grouped_attention(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                      attention_mask: torch.Tensor | None, scaling: float, dropout: float = 0.0,
                      **kwargs) -> tuple[torch.Tensor, None]:
    b, H, n, D = query.shape  # key, value: [b, Hkv, L, D]
    Hkv, L = key.shape[1], key.shape[2]
    G = H // Hkv
    q = query.reshape(b, Hkv, G * n, D)  # [b, Hkv, G n, D]
    scores = torch.matmul(q, key.transpose(2, 3)) * scaling  # [b, Hkv, G n, L]
    if attention_mask is not None:
        mask = attention_mask[:, :, :, :L]  # [b, 1, n, L]
        scores = (scores.view(b, Hkv, G, n, L) + mask[:, :, None]).view(b, Hkv, G * n, L)
    weights = torch.nn.functional.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)
    out = torch.matmul(weights, value)  # [b, Hkv, G n, D]
    return out.view(b, H, n, D).transpose(1, 2).contiguous(), None  # [b, n, H, D]


def register() -> str:
    """Make the function loadable as attn_implementation=NAME (with eager attention's additive float mask);
    returns NAME."""
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.masking_utils import eager_mask

    AttentionInterface.register(NAME, grouped_attention)
    AttentionMaskInterface.register(NAME, eager_mask)
    return NAME
