"""Row invariance of the loaded target at many cache lengths: the largest logit difference between rows of
n-token passes and one-token decoding, n = 2, 5, 16, 33, 64, after every cache length from 1 to 64 and
then every 37th up to --longest (arbitrary, fixed tokens). Prints the lengths where any pass differed.

    .venv/bin/python docs/results/2026-11-25-fp32-exact/sweep.py --model qwen2.5-coder-0.5b --dtype bf16 \
        [--attention quickdraft_grouped|quickdraft_rows]
"""

from __future__ import annotations

import argparse
import random
import time

import quickdraft
from quickdraft.cpu import describe
from quickdraft.runners import attention
from quickdraft.runners.invariance import row_invariance

SIZES = (2, 5, 16, 33, 64)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--dtype", choices=["fp32", "bf16"], default="bf16")
    ap.add_argument("--attention", default=None, help="replace the attention the load chose")
    ap.add_argument("--longest", type=int, default=2100)
    args = ap.parse_args()
    runner = quickdraft.load(args.model, dtype=args.dtype, progress=False).runner
    if args.attention:
        runner.model.set_attn_implementation(attention.register(args.attention))
    rng = random.Random(0)
    tokens = [rng.randrange(runner.vocab_size) for _ in range(args.longest + max(SIZES))]
    lengths = [*range(1, 65), *range(101, args.longest + 1, 37)]
    start, differ = time.time(), []
    for cached in lengths:
        worst = row_invariance(runner, tokens[: cached + max(SIZES)], SIZES)
        if worst:
            differ.append((cached, worst))
    print(f"CPU: {describe()}; {args.model} {args.dtype}, attention {runner.model.config._attn_implementation}, "
          f"passes of {SIZES} tokens after {len(lengths)} cache lengths (1-64, then every 37th to {lengths[-1]}), "
          f"{time.time() - start:.0f} s")
    print(f"cache lengths where a pass differed from one-token decoding: {len(differ)}"
          + "".join(f"\n  {c}: {w:g}" for c, w in differ))


if __name__ == "__main__":
    main()
