"""Seconds per forward pass of n tokens on the transformers runner, torch's Linear kernels against
weights packed for oneDNN (runners.kernels.use_kernels), over a cached context of random tokens.

When to run: on a new CPU, torch version or kernel choice. The cost of an n-token pass against a one-token
pass is what drafting can gain there (the engine's sizer measures the same costs as it runs).

Both copies of the model are loaded in one process and measured alternately (median of --repeats per
size), so the two columns share the machine's state.

Usage: .venv/bin/python scripts/kernel_costs.py [--model qwen2.5-coder-1.5b] [--dtype fp32|bf16] [--context 300]
         [--sizes 1,2,4,8,16,24,32] [--repeats 3]

In bf16 both copies are loaded as dtype "bf16" loads them (row-invariant, checked at load), one on torch's
bf16 Linear and one packed.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import quickdraft
from quickdraft.cpu import describe


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--context", type=int, default=300)
    ap.add_argument("--sizes", default="1,2,4,8,16,24,32")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    args = ap.parse_args()
    runners = {k: quickdraft.load(args.model, kernels=k, dtype=args.dtype, progress=False).runner
               for k in ("torch", "onednn")}
    assert runners["onednn"].kernels == "onednn", f"torch has no oneDNN {args.dtype} kernels here"
    rng = random.Random(0)
    vocab = min(r.vocab_size for r in runners.values())
    context = [rng.randrange(vocab) for _ in range(args.context)]
    seconds: dict[str, dict[int, list[float]]] = {k: {} for k in runners}
    sizes = [int(n) for n in args.sizes.split(",")]
    for _ in range(args.repeats):
        for n in sizes:
            tokens = [rng.randrange(vocab) for _ in range(n)]
            for k, r in runners.items():
                r.reset()
                r.prefill(context)
                t = time.perf_counter()
                r.forward(tokens)
                seconds[k].setdefault(n, []).append(time.perf_counter() - t)
    med = {k: {n: statistics.median(v) for n, v in s.items()} for k, s in seconds.items()}
    print(f"CPU: {describe()}; {args.model} {args.dtype}, {args.context} cached tokens, median of {args.repeats}\n")
    print("| tokens | torch ms | (x its 1 token) | onednn ms | (x its 1 token) | onednn speedup |")
    print("|---|---|---|---|---|---|")
    for n in sizes:
        t, o = med["torch"][n], med["onednn"][n]
        print(f"| {n} | {t * 1e3:.0f} | {t / med['torch'][sizes[0]]:.2f} | {o * 1e3:.0f} | "
              f"{o / med['onednn'][sizes[0]]:.2f} | {t / o:.2f} |")


if __name__ == "__main__":
    main()
