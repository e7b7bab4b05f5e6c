"""Where a decoding step's time goes on the transformers runner (issue 20, item 3).

When to run: when a decoding step's time is in question (a new CPU, a runner change): it says how much of a
step is the weights' products and how much is left to take out (docs/runtime.md).

For each dtype asked, loads the model as quickdraft does (`quickdraft.load(..., dtype=...)`), caches
--context random tokens, then times one-token steps (runner.forward plus the rollback the engine does
after a plain step: none) and passes of --verify tokens, and profiles --steps one-token steps with
torch.profiler: self CPU time per operator, grouped into matmuls (the weights' work), attention, the KV
cache's copies, and the rest (framework overhead: norms, rotary, small ops, Python).

    .venv/bin/python scripts/step_profile.py --model qwen2.5-coder-0.5b --dtypes fp32,bf16,bf16-eager --context 800

("bf16-eager": dtype bf16 with transformers' eager attention put back, as the runner loaded it before
runners/attention.py.)

Prints a table per dtype; the numbers depend on the machine (its CPU is printed first).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import torch

import quickdraft
from quickdraft.cpu import describe

GROUPS = {  # operator name fragments -> group
    "matmul": ("linear", "addmm", "mm", "mkldnn", "matmul", "bmm"),
    "cache copies": ("cat", "copy_", "index_select", "slice_scatter", "clone"),
    "attention": ("softmax", "scaled_dot_product", "baddbmm"),
}


def group_of(name: str) -> str:
    low = name.lower()
    for group, parts in GROUPS.items():
        if any(p in low for p in parts):
            return group
    return "rest"


def time_steps(runner, context: list[int], steps: int, n: int, rng: random.Random) -> float:
    """Median seconds of a pass of n tokens after `context` is cached (the pass rolled back after)."""
    runner.reset()
    runner.prefill(context)
    seconds = []
    for _ in range(steps):
        tokens = [rng.randrange(runner.vocab_size) for _ in range(n)]
        t = time.perf_counter()
        runner.forward(tokens)
        seconds.append(time.perf_counter() - t)
        runner.rollback(len(context))
    return statistics.median(seconds)


def profile_steps(runner, context: list[int], steps: int, rng: random.Random) -> tuple[dict[str, float], list]:
    runner.reset()
    runner.prefill(context)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            runner.forward([rng.randrange(runner.vocab_size)])  # the cache grows, as in decoding
    groups: dict[str, float] = {}
    rows = []
    for e in prof.key_averages():
        if e.self_cpu_time_total <= 0:
            continue
        groups[group_of(e.key)] = groups.get(group_of(e.key), 0.0) + e.self_cpu_time_total / 1e3 / steps
        rows.append((e.self_cpu_time_total / 1e3 / steps, e.count // steps, e.key))
    return groups, sorted(rows, reverse=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--dtypes", default="fp32,bf16")
    ap.add_argument("--context", type=int, default=800)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--verify", type=int, default=32)
    ap.add_argument("--top", type=int, default=12)
    args = ap.parse_args()
    print(f"CPU: {describe()}; torch {torch.__version__}, {torch.get_num_threads()} threads; {args.model}, "
          f"{args.context} cached tokens\n")
    rng = random.Random(0)
    for dtype in args.dtypes.split(","):
        dtype, _, attention = dtype.partition("-")  # "bf16-eager": transformers' eager attention (before grouped)
        runner = quickdraft.load(args.model, dtype=dtype, progress=False).runner
        if attention:
            runner.model.set_attn_implementation(attention)
            dtype += f" ({attention} attention)"
        context = [rng.randrange(runner.vocab_size) for _ in range(args.context)]
        one = time_steps(runner, context, args.steps, 1, rng)
        many = time_steps(runner, context, max(args.steps // 4, 3), args.verify, rng)
        groups, rows = profile_steps(runner, context, args.steps, rng)
        total = sum(groups.values())
        print(f"## {dtype} (kernels {runner.kernels}, row_invariant {runner.row_invariant})\n")
        print(f"one-token step {one * 1e3:.1f} ms (wall, median of {args.steps}); {args.verify}-token pass "
              f"{many * 1e3:.1f} ms ({many / one:.2f}x); profiled self CPU per step {total:.1f} ms:\n")
        print("| group | ms per step | share |")
        print("|---|---|---|")
        for g, ms in sorted(groups.items(), key=lambda kv: -kv[1]):
            print(f"| {g} | {ms:.1f} | {ms / total:.0%} |")
        print(f"\ntop {args.top} operators (self CPU ms per step, calls per step):\n")
        for ms, calls, name in rows[: args.top]:
            print(f"    {ms:7.2f} ms  {calls:5d}  {name}")
        print()
        del runner


if __name__ == "__main__":
    main()
