"""The 0.5B draft model's one-token step in int8 and in bf16 (after 300 random tokens, median of 20), the 1.5B
target's (median of 10), then greedy draft-model generation of the first four HumanEval tasks, 128 new tokens.

    LD_PRELOAD=$T .venv/bin/python docs/results/2026-11-29-mentored-t0.7/draft_step.py int8,bf16
"""
import random
import sys
import time

import quickdraft
from quickdraft.bench import workloads as W


def step_ms(runner, reps: int) -> float:
    """Median one-token step after 300 random tokens."""
    random.seed(0)
    runner.reset()
    runner.prefill([random.randrange(1000, 30000) for _ in range(300)])
    seconds = []
    for _ in range(reps):
        t = time.perf_counter()
        runner.forward([random.randrange(1000, 30000)])
        seconds.append(time.perf_counter() - t)
    return round(sorted(seconds)[reps // 2] * 1e3, 2)


tasks = list(W.WORKLOADS["humaneval"].load(W.data_dir("../shared/data"), 4))
for prec in sys.argv[1].split(","):
    gen = quickdraft.load("qwen2.5-coder-1.5b", draft_model="qwen2.5-coder-0.5b", draft_precision=prec)
    print(prec, "draft one-token step ms", step_ms(gen.draft_runner, 20))
    print(prec, "target one-token step ms", step_ms(gen.runner, 10))
    for task in tasks:
        t = time.perf_counter()
        r = gen.generate(task.messages, max_new_tokens=128, drafter="draft-model")
        print(prec, task.id, round(time.perf_counter() - t, 2), r.stats, flush=True)
