"""The bf16 runner's prefill attention against SDPA's (its prefill before), on the real model, alternating in one process.

Four measurements, each printed as it finishes:

- --layer CACHED,...: one layer's attention alone for a 512-token prefill pass after CACHED tokens, on random values of
  qwen2.5-coder-0.5b's shapes (14 query heads, 2 KV heads, 64 dimensions), SDPA against the blocks, in bf16 and
  float32 (median of 7);
- prefill seconds for prompts of --lengths random tokens, each attention in turn, --reps rounds;
- --accuracy K: how far each bf16 prefill leaves the model from float32: on refactor tasks SKIP+1..SKIP+K (their
  original file, at most 2,600 tokens), the file but its last 64 tokens prefilled, then one 64-token pass; per
  position the KL divergence from the float32 model's distribution (prefilled and passed the same way) and whether
  the argmax agrees;
- --refactors SKIP:END: whole edits of the refactor set (tasks SKIP+1..END, the file as prediction, 512 new tokens),
  each run twice with either attention in turn: seconds in all, prefill and decoding.

    .venv/bin/python docs/results/2026-11-26-prefill-blocks/ab_prefill.py --layer 512,1536,3584 --lengths ''
    .venv/bin/python docs/results/2026-11-26-prefill-blocks/ab_prefill.py --lengths 728,2048,4096 --accuracy 4 --refactors 3:7

Prefix reuse is off (every run prefills its whole prompt). Timings depend on the machine: its CPU is printed first.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import torch

import quickdraft
from quickdraft.cpu import describe
from quickdraft.runners import attention

SDPA = "sdpa"


def layer_times(cached: list[int]) -> None:
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    def median_ms(f) -> float:
        f()
        seconds = []
        for _ in range(7):
            t = time.perf_counter()
            f()
            seconds.append(time.perf_counter() - t)
        return statistics.median(seconds) * 1e3

    torch.manual_seed(0)
    n, H, Hkv, D = 512, 14, 2, 64
    for c in cached:
        L = c + n
        visible = torch.arange(L)[None] <= torch.arange(c, L)[:, None]  # [n, L]: causal after the cache
        for dtype in (torch.bfloat16, torch.float32):
            q = torch.randn(1, H, n, D, dtype=dtype)
            k, v = torch.randn(1, Hkv, L, D, dtype=dtype), torch.randn(1, Hkv, L, D, dtype=dtype)
            mask = torch.zeros(1, 1, n, L, dtype=dtype).masked_fill(~visible, torch.finfo(dtype).min)
            s = median_ms(lambda: sdpa(q, k, v, attn_mask=mask, enable_gqa=True, scale=D ** -0.5))
            b = median_ms(lambda: attention.prefill_attention(None, q, k, v, mask, D ** -0.5))
            print(f"one layer, 512-token pass after {c} cached tokens, {dtype}: SDPA {s:.1f} ms, blocks {b:.1f} ms "
                  f"({s / b:.2f}x)", flush=True)


def prefill_times(runner, lengths: list[int], reps: int) -> None:
    rng = random.Random(0)
    for n in lengths:
        tokens = [rng.randrange(1000, runner.vocab_size - 1000) for _ in range(n)]
        seconds: dict[str, list[float]] = {SDPA: [], attention.PREFILL: []}
        for r in range(reps):
            for impl in (SDPA, attention.PREFILL) if r % 2 == 0 else (attention.PREFILL, SDPA):
                runner.prefill_attention = impl
                runner.reset()
                t = time.perf_counter()
                runner.prefill(tokens)
                seconds[impl].append(time.perf_counter() - t)
        s, p = statistics.median(seconds[SDPA]), statistics.median(seconds[attention.PREFILL])
        print(f"prefill of {n} tokens: SDPA {s:.2f} s, blocks {p:.2f} s ({s / p:.2f}x); each round "
              f"{[round(x, 2) for x in seconds[SDPA]]} / {[round(x, 2) for x in seconds[attention.PREFILL]]}", flush=True)


def accuracy(gen, model: str, tasks) -> None:
    fp32 = quickdraft.load(model, dtype="fp32", progress=False).runner
    fp32.reuse_prefix = False
    totals: dict[str, list[tuple[float, float]]] = {SDPA: [], attention.PREFILL: []}
    for task in tasks:
        ids = gen.tokenizer.encode(task.prediction)[:2600]
        k = len(ids) - 64
        fp32.reset()
        fp32.prefill(ids[:k])
        reference = torch.log_softmax(fp32.forward(ids[k:]), -1)  # [64, vocab]
        for impl in totals:
            gen.runner.prefill_attention = impl
            gen.runner.reset()
            gen.runner.prefill(ids[:k])
            logits = gen.runner.forward(ids[k:])
            kl = (reference.exp() * (reference - torch.log_softmax(logits, -1))).sum(-1)  # [64]
            agree = (logits.argmax(-1) == reference.argmax(-1)).double().mean().item()
            totals[impl].append((kl.mean().item(), agree))
            print(f"{task.id} ({len(ids)} tokens) {impl}: KL from float32 {kl.mean().item():.2e} a position, argmax "
                  f"agrees {agree:.3f}", flush=True)
    for impl, rows in totals.items():
        print(f"{impl}: mean KL {statistics.mean(r[0] for r in rows):.3e}, argmax agreement "
              f"{statistics.mean(r[1] for r in rows):.4f} over {64 * len(rows)} positions")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--layer", default="", help="cached lengths to time one layer's attention at (random values)")
    ap.add_argument("--lengths", default="728,2048,4096", help="prompt lengths to time prefill at ('' for none)")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--accuracy", type=int, default=0, help="refactor tasks to compare with float32 (after --skip)")
    ap.add_argument("--skip", type=int, default=3, help="refactor tasks to leave out first (for --accuracy)")
    ap.add_argument("--refactors", help="SKIP:END: end to end on refactor tasks SKIP+1..END")
    args = ap.parse_args()
    from quickdraft.bench import workloads as W

    print(f"CPU: {describe()}; torch {torch.__version__}, {torch.get_num_threads()} threads; {args.model} bf16, "
          f"prefill by SDPA against attention.prefill_attention (blocks of {attention.PREFILL_BLOCK} query rows)")
    if args.layer:
        layer_times([int(c) for c in args.layer.split(",")])
    if not (args.lengths or args.accuracy or args.refactors):
        return
    gen = quickdraft.load(args.model, dtype="bf16", progress=False)
    gen.runner.reuse_prefix = False
    if args.lengths:
        prefill_times(gen.runner, [int(n) for n in args.lengths.split(",")], args.reps)
    if args.accuracy:
        accuracy(gen, args.model, list(W.WORKLOADS["refactor"].load(W.data_dir(), args.skip + args.accuracy))[args.skip:])
    if args.refactors:
        skip, end = map(int, args.refactors.split(":"))
        import sys
        from pathlib import Path

        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "2026-11-26-verify-attention"))
        from ab_attention import edits_alternating

        runner = gen.runner
        edits_alternating(gen, list(W.WORKLOADS["refactor"].load(W.data_dir(), end))[skip:],
                          {impl: lambda impl=impl: setattr(runner, "prefill_attention", impl)
                           for impl in (SDPA, attention.PREFILL)})


if __name__ == "__main__":
    main()
