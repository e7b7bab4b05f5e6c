"""Pass costs on this CPU: verify passes against prefill passes of as many tokens at the same position (`curve`), and
a prompt's prefill in passes of 512-4,096 tokens (`chunks`), qwen2.5-coder-0.5b in bf16, held-out refactor prompts.

    T=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4
    LD_PRELOAD=$T .venv/bin/python docs/results/2026-11-29-second-cpu/passes.py curve
    LD_PRELOAD=$T .venv/bin/python docs/results/2026-11-29-second-cpu/passes.py chunks
"""
import statistics
import sys
import time

import torch

import quickdraft
from quickdraft.bench import workloads
from quickdraft.cpu import describe
from quickdraft.runners import attention, kernels

gen = quickdraft.load("qwen2.5-coder-0.5b", progress=False)
r = gen.runner
r.reuse_prefix = False
tasks = list(workloads.WORKLOADS["refactor"].load(workloads.data_dir(), 12))[4:]
prompts = [gen.tokenizer.encode_chat(t.messages) for t in tasks]
print(describe())


def median_s(fn, reps=5):
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def curve():
    """After 3,000 cached tokens: a verify pass of n tokens (every row's logits) against a prefill pass of n (the
    runner's prefill attention, the last row's logits), each rolled back after."""
    r.reset()
    r.prefill(prompts[-1][:3000])
    base, extra = r.length, list(range(1000, 1300))

    def verify(n):
        r.forward(extra[:n])
        r.rollback(base)

    def prefill(n):
        model, passes = r.model, r.model.config._attn_implementation
        model.set_attn_implementation(r.prefill_attention)
        try:
            with torch.inference_mode(), kernels.one_product(model):
                causal = {"causal_prefill": True} if r.prefill_attention == attention.PREFILL else {}
                model(input_ids=torch.tensor([extra[:n]]), past_key_values=r.cache, use_cache=True, logits_to_keep=1,
                      **causal)
        finally:
            model.set_attn_implementation(passes)
        r.rollback(base)

    one = median_s(lambda: verify(1))
    print("n | verify ms | in one-token passes | prefill pass ms | verify / prefill")
    for n in (1, 9, 17, 33, 49, 65, 97, 129, 256):
        v, p = median_s(lambda: verify(n)), median_s(lambda: prefill(n))
        print(f"{n} | {v * 1e3:.1f} | {v / one:.2f} | {p * 1e3:.1f} | {v / p:.2f}", flush=True)


def chunks():
    """Each prompt's prefill in passes of 512 (PREFILL_CHUNK) to 4,096 tokens, two rounds in opposite orders."""
    def run(ids, c):
        r.prefill_chunk = c
        r.reset()
        return median_s(lambda: r.prefill(ids[:-1]), reps=1)

    run(prompts[0], 512)
    sizes, res = (512, 1024, 2048, 4096), {}
    for rnd in range(2):
        for ids in prompts:
            for c in sizes if rnd == 0 else sizes[::-1]:
                res.setdefault((len(ids), c), []).append(run(ids, c))
    r.prefill_chunk = 512
    print("prompt tokens | " + " | ".join(f"{c} s (512's / this)" for c in sizes))
    for n in sorted({k[0] for k in res}):
        t = {c: statistics.median(res[n, c]) for c in sizes}
        print(f"{n} | " + " | ".join(f"{t[c]:.3f} ({t[512] / t[c]:.3f}x)" for c in sizes), flush=True)


{"curve": curve, "chunks": chunks}[sys.argv[1]]()
