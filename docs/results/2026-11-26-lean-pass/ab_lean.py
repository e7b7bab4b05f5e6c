"""Passes through the model's forward against the lean pass (runners/lean.py), alternating in one process.

Loads the model as quickdraft does and makes two runners of it, each with its own cache, one through the model's
forward and one through the lean pass. For each context length and round both prefill the context, then run --steps
one-token decoding steps (the cache growing, as in plain decoding) and --passes verify passes of --verify tokens
(each rolled back, as a rejected draft is), alternating step by step between the two runners (which goes first
alternating too), so that both see the same machine; every logit of the two is compared bit for bit.

    .venv/bin/python docs/results/2026-11-26-lean-pass/ab_lean.py --model qwen2.5-coder-0.5b --dtype bf16 --contexts 800,3000
    .venv/bin/python docs/results/2026-11-26-lean-pass/ab_lean.py --model qwen2.5-coder-0.5b --draft int8 --contexts 800 --verify 8

--against unpadded compares the runner as loaded with the lean pass without padded keys (lean.append, KeyBuffers)
instead of with the model's forward.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import torch

import quickdraft
from quickdraft.cpu import describe


def run(runners: dict, context: list[int], steps: int, passes: int, verify: int, rng: random.Random):
    """Both runners (the same model; their own caches) prefilled with `context`, then one-token steps and verify
    passes alternating between them, each step's tokens the same for both: {path: (step seconds, pass seconds,
    logits)}."""
    out = {path: ([], [], []) for path in runners}
    for runner in runners.values():
        runner.reset()
        runner.prefill(context)
    order = list(runners)
    for i in range(steps):
        token = [rng.randrange(runners[order[0]].vocab_size)]
        for path in (order if i % 2 == 0 else order[::-1]):
            t = time.perf_counter()
            out[path][2].append(runners[path].forward(token))
            out[path][0].append(time.perf_counter() - t)
    for i in range(passes):
        tokens = [rng.randrange(runners[order[0]].vocab_size) for _ in range(verify)]
        for path in (order if i % 2 == 0 else order[::-1]):
            runner = runners[path]
            length = runner.length
            t = time.perf_counter()
            out[path][2].append(runner.forward(tokens))
            out[path][1].append(time.perf_counter() - t)
            runner.rollback(length)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--contexts", default="800,3000")
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--passes", type=int, default=6)
    ap.add_argument("--verify", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--draft", default="", help="int8 or fp32: the model as a draft model in that precision (on SDPA)")
    ap.add_argument("--against", choices=("forward", "unpadded"), default="forward", help="what the runner as loaded "
                    "is compared with: the model's forward, or the lean pass without padded keys (KeyBuffers)")
    args = ap.parse_args()
    if args.draft:  # the model as a draft model loads: transformers' SDPA, Linear layers in --draft precision
        runner = quickdraft.load(args.model, draft_model=args.model, draft_precision=args.draft,
                                 progress=False).draft_runner
    else:
        runner = quickdraft.load(args.model, dtype=args.dtype, progress=False).runner
    if runner.lean is None:
        raise SystemExit(f"{args.model} loaded without the lean pass (its layers are not ones lean.py reproduces, "
                         "or its logits differed from the model's forward)")
    from quickdraft.runners.hf import HFRunner

    other = HFRunner(runner.model, runner.max_context, reuse_prefix=False)  # the same weights, its own cache
    if args.against == "forward":
        other.lean = None
    elif not runner.lean.pad_keys:
        raise SystemExit(f"{args.model} loaded without padded keys: nothing to compare them with")
    else:
        other.lean.pad_keys = False  # the lean pass on the cache as transformers keeps it
    runner.reuse_prefix = False
    runners = {"model": other, "lean": runner}
    what = (f"draft model in {args.draft}, attention sdpa" if args.draft
            else f"{runner.dtype} (kernels {runner.kernels})")
    print(f"CPU: {describe()}; torch {torch.__version__}, {torch.get_num_threads()} threads; {args.model} {what}; "
          f"medians over {args.rounds} rounds\n")
    a, b = ("model forward", "lean") if args.against == "forward" else ("unpadded", "padded keys")
    print(f"| cached tokens | one-token step: {a} / {b} | {args.verify}-token pass: {a} / {b} | same logits |")
    print("|---|---|---|---|")
    for length in map(int, args.contexts.split(",")):
        context = [random.Random(length).randrange(runner.vocab_size) for _ in range(length)]
        times = {path: ([], []) for path in runners}
        same = True
        for r in range(args.rounds):
            out = run(runners, context, args.steps, args.passes, args.verify, random.Random(r))
            for path in runners:
                times[path][0].extend(out[path][0])
                times[path][1].extend(out[path][1])
            same &= all(torch.equal(a, b) for a, b in zip(out["model"][2], out["lean"][2]))
        (a1, am), (b1, bm) = ([statistics.median(t) * 1e3 for t in times[p]] for p in runners)
        print(f"| {length:,} | {a1:.1f} / {b1:.1f} ms ({a1 / b1:.2f}x) | {am:.1f} / {bm:.1f} ms ({am / bm:.2f}x) "
              f"| {same} |")

if __name__ == "__main__":
    main()
