"""transformers' greedy generate() a token, three ways on the same bf16 weights of qwen2.5-coder-0.5b, taking turns
three times on one 673-token prompt (the README's example file): on quickdraft's loaded model (its packed Linear
layers and attention: what the bench's hf-* methods ran before 2026-12-02), the same with transformers' attention
and the padding wrappers passed through, and a stock load (AutoModelForCausalLM.from_pretrained, what they run now).
Per token: (time of 129 new tokens - time of 1) / 128. From the repository root: .venv/bin/python <this file>"""

import statistics
import time
from contextlib import contextmanager

import torch
from transformers import AutoModelForCausalLM, GenerationConfig

import quickdraft
from quickdraft.runners.kernels import FixedRows, RowPadded

g = quickdraft.load("qwen2.5-coder-0.5b", progress=False)
loaded = g.runner.model
ids = g.tokenizer.encode("Rewrite this file:\n" + open("examples/inventory.py").read())
x = torch.tensor([ids])
stock = AutoModelForCausalLM.from_pretrained(loaded.name_or_path, dtype=torch.bfloat16).eval()
print("prompt tokens", len(ids), "| stock attention", stock.config._attn_implementation)


@contextmanager
def passthrough(model):
    padded = [m for m in model.modules() if isinstance(m, RowPadded)]
    fixed = [m for m in model.modules() if isinstance(m, FixedRows)]
    rows, attention = [m.min_rows for m in padded], model.config._attn_implementation
    for m in padded:
        m.min_rows = 0
    for m in fixed:
        m.in_blocks = False
    model.set_attn_implementation("sdpa")
    try:
        yield
    finally:
        for m, r in zip(padded, rows):
            m.min_rows = r
        for m in fixed:
            m.in_blocks = True
        model.set_attn_implementation(attention)


def seconds(model, n):
    config = GenerationConfig(do_sample=False, num_beams=1, max_new_tokens=n, min_new_tokens=n, pad_token_id=0)
    t = time.perf_counter()
    with torch.inference_mode():
        model.generate(x, attention_mask=torch.ones_like(x), generation_config=config)
    return time.perf_counter() - t


def ms_a_token(model):
    return (seconds(model, 129) - seconds(model, 1)) / 128 * 1000


ms = {"loaded": [], "passthrough": [], "stock": []}
for _ in range(3):
    ms["loaded"].append(ms_a_token(loaded))
    with passthrough(loaded):
        ms["passthrough"].append(ms_a_token(loaded))
    ms["stock"].append(ms_a_token(stock))
for name, values in ms.items():
    print(f"{name}: {', '.join(f'{v:.1f}' for v in values)} ms a token, median {statistics.median(values):.1f}")
