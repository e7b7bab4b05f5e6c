"""The 0.5B draft model's one-token step in int8 and in bf16 (after 300 random tokens, median of 20), the 1.5B
target's (median of 10), then greedy draft-model generation of the first four HumanEval tasks, 128 new tokens.

    LD_PRELOAD=$T .venv/bin/python docs/results/2026-11-29-mentored-t0.7/draft_step.py int8,bf16
"""
import random
import sys
import time

import quickdraft
from quickdraft.bench import workloads as W
tasks = list(W.WORKLOADS["humaneval"].load(W.data_dir("../shared/data"), 4))
for prec in sys.argv[1].split(","):
    gen = quickdraft.load("qwen2.5-coder-1.5b", draft_model="qwen2.5-coder-0.5b", draft_precision=prec)
    dr = gen.draft_runner
    print(prec, "draft runner:", type(dr).__name__ if dr else None)
    if dr is not None:
        random.seed(0); dr.reset(); dr.prefill([random.randrange(1000, 30000) for _ in range(300)])
        ts = []
        for _ in range(20):
            a = time.perf_counter(); dr.forward([random.randrange(1000, 30000)]); ts.append(time.perf_counter() - a)
        print(prec, "draft one-token step ms", round(sorted(ts)[10] * 1e3, 2))
    t = gen.runner; random.seed(0); t.reset(); t.prefill([random.randrange(1000, 30000) for _ in range(300)])
    ts = []
    for _ in range(10):
        a = time.perf_counter(); t.forward([random.randrange(1000, 30000)]); ts.append(time.perf_counter() - a)
    print(prec, "target one-token step ms", round(sorted(ts)[5] * 1e3, 2))
    for task in tasks:
        a = time.perf_counter(); r = gen.generate(task.messages, max_new_tokens=128, drafter="draft-model"); e = time.perf_counter() - a
        print(prec, task.id, round(e, 2), getattr(r, "stats", ""), flush=True)
