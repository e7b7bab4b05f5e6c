"""The 0.5B as a draft model, int8 (the default) against bf16: prefill of a 720-token prompt (random token ids) and
one-token steps after it, alternating in one process, 3 rounds. docs/runtime.md, "The model drafters on every
Spec-Bench category". From the repository root: .venv/bin/python docs/results/2026-11-26-floor-model-drafters/draft_precision.py"""
import random
import statistics
import time

from quickdraft.loading import _Opened
from quickdraft.options import LoadOptions

opened = _Opened("transformers", "qwen2.5-coder-0.5b", LoadOptions(), False)
random.seed(0)
ids = [random.randrange(1000, 30000) for _ in range(720)]
runners = {"int8": opened.runner(draft_precision="int8"), "bf16": opened.runner(dtype="bf16")}
for rnd in range(3):
    for name, runner in runners.items():
        runner.reset()
        if hasattr(runner, "reuse_prefix"):
            runner.reuse_prefix = False  # a fresh prefill every round
        t = time.perf_counter()
        runner.prefill(ids[:-1])
        prefill = time.perf_counter() - t
        steps = []
        for i in range(8):
            t = time.perf_counter()
            runner.forward([ids[-1] if i == 0 else 100 + i])
            steps.append(time.perf_counter() - t)
        print(rnd, name, f"prefill {prefill:.2f} s, step {1000 * statistics.median(steps):.1f} ms", flush=True)
