"""Shared fixtures: tiny randomly initialised transformers models built in-process (no downloads)."""

from __future__ import annotations

import pytest
import torch
from transformers import (Gemma3TextConfig, Gemma3ForCausalLM, LlamaConfig, LlamaForCausalLM, Qwen2Config,
                          Qwen2ForCausalLM)

VOCAB = 96


def tiny_model(arch: str, seed: int = 0):
    common = dict(
        vocab_size=VOCAB, hidden_size=48, intermediate_size=96, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=8192,
        initializer_range=0.3,  # sharp logits: varied, content-dependent greedy output
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    if arch == "llama":
        model = LlamaForCausalLM(LlamaConfig(**common))
    elif arch == "qwen2":
        model = Qwen2ForCausalLM(Qwen2Config(**common))
    elif arch == "gemma3":  # sliding-window layers: rollback must work past the window too
        config = Gemma3TextConfig(**common, head_dim=12, sliding_window=16, layer_types=["sliding_attention", "full_attention"])
        model = Gemma3ForCausalLM(config)
    else:
        raise ValueError(arch)
    return model.eval()


@pytest.fixture(scope="session", params=["llama", "qwen2"])
def tiny(request):
    return tiny_model(request.param)


def reference_greedy(model, prompt: list[int], n: int) -> list[int]:
    """Plain greedy decoding by transformers itself: the ground truth for exactness."""
    ids = torch.tensor([prompt])
    with torch.inference_mode():
        out = model.generate(
            ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=n, min_new_tokens=n,
            eos_token_id=None, pad_token_id=0,
        )
    return out[0, len(prompt):].tolist()
