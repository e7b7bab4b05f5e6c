"""Prefill attention with every KV head's block in one batched product (4dc1972) against one product per head (its
parent, 7b7fe63), registered in turn as the runner's prefill attention in one process: prefill seconds of random
tokens, prefix reuse off, median over rounds x 3; then whether the two give the same cache, bit for bit.

    LD_PRELOAD=$T .venv/bin/python docs/results/2026-11-29-edits-sitting/prefill_heads.py 2048,3584 2
"""
import random
import statistics
import subprocess
import sys
import time

import torch
from transformers import AttentionInterface

import quickdraft
from quickdraft.runners import attention

old_source = subprocess.run(["git", "show", "7b7fe63:src/quickdraft/runners/attention.py"], capture_output=True,
                            text=True, check=True).stdout
old = {"__name__": "attention_7b7fe63"}
exec(compile(old_source, "attention_7b7fe63", "exec"), old)
sides = {"one product per head": old["prefill_attention"], "heads batched": attention.prefill_attention}

lengths, rounds = [int(n) for n in sys.argv[1].split(",")], int(sys.argv[2])
gen = quickdraft.load("qwen2.5-coder-0.5b")
runner = gen.runner
runner.reuse_prefix = False
random.seed(0)
for n in lengths:
    tokens = [random.randrange(1000, 30000) for _ in range(n)]

    def prefill() -> float:
        runner.reset()
        t = time.perf_counter()
        runner.prefill(tokens)
        return time.perf_counter() - t

    seconds, caches = {}, {}
    for _ in range(rounds):
        for name, function in sides.items():
            AttentionInterface.register(attention.PREFILL, function)
            prefill()
            seconds.setdefault(name, []).extend(prefill() for _ in range(3))
            caches[name] = runner.cache.layers[-1].keys.clone()
    same = torch.equal(*caches.values())
    print(n, {name: round(statistics.median(s), 3) for name, s in seconds.items()}, "same cache:", same, flush=True)
AttentionInterface.register(attention.PREFILL, attention.prefill_attention)
