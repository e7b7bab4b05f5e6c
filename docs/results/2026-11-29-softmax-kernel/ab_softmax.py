"""The softmax kernel (runners/softmax.c) against torch's softmax, both in one process, switched in turn: prefill
seconds of random tokens (prefix reuse off) and verify-pass milliseconds after `cached` tokens, median over rounds.

    LD_PRELOAD=$T .venv/bin/python docs/results/2026-11-29-softmax-kernel/ab_softmax.py prefill 1024,2048,3584 3
    LD_PRELOAD=$T .venv/bin/python docs/results/2026-11-29-softmax-kernel/ab_softmax.py passes 1,17,33,65,129 9 3000
"""
import random
import statistics
import sys
import time

import torch

import quickdraft
from quickdraft.runners import native

kernel = native._library
sides = {"torch": lambda: None, "kernel": kernel}
what, sizes, rounds = sys.argv[1], [int(n) for n in sys.argv[2].split(",")], int(sys.argv[3])
gen = quickdraft.load("qwen2.5-coder-0.5b")
runner = gen.runner
runner.reuse_prefix = False
print("attention:", runner.model.config._attn_implementation, "| kernel:", native.unavailable() or "in use", flush=True)
random.seed(0)
tokens = [random.randrange(1000, 30000) for _ in range(max(sizes) + (int(sys.argv[4]) if what == "passes" else 0))]


def timed(f) -> float:
    t = time.perf_counter()
    f()
    return time.perf_counter() - t


with torch.inference_mode():
    if what == "prefill":
        for n in sizes:
            seconds = {}
            for _ in range(rounds):
                for name, lib in sides.items():
                    native._library = lib
                    runner.reset()
                    runner.prefill(tokens[:n])  # warm
                    for _ in range(3):
                        runner.reset()
                        seconds.setdefault(name, []).append(timed(lambda: runner.prefill(tokens[:n])))
            med = {name: statistics.median(s) for name, s in seconds.items()}
            print(n, "tokens, prefill s:", {k: round(v, 3) for k, v in med.items()},
                  f"kernel/torch {med['kernel'] / med['torch']:.3f}", flush=True)
    else:
        cached = int(sys.argv[4])
        runner.reset()
        runner.prefill(tokens[:cached])
        ms = {}
        for r in range(rounds + 1):  # the first round warms up
            for name, lib in sides.items():
                native._library = lib
                for n in sizes:
                    t = timed(lambda: runner.forward(tokens[cached : cached + n]))
                    runner.rollback(cached)
                    if r:
                        ms.setdefault((name, n), []).append(t * 1000)
        for n in sizes:
            a, b = statistics.median(ms["torch", n]), statistics.median(ms["kernel", n])
            print(f"pass of {n} after {cached}: torch {a:.1f} ms, kernel {b:.1f} ms, kernel/torch {b / a:.3f}", flush=True)
native._library = kernel
