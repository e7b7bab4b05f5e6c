"""Pass costs and row invariance of the transformers target as it loaded before this change (weights packed
for one-row passes; float32 on SDPA with no padding; bf16 on grouped attention with layers padded to 16
rows) and as it loads now (hf.exact_runner: packed for 16-row passes, layers padded to the fewest rows they
need, float32 attention one row at a time). Both loaded in one process, passes alternated.

    .venv/bin/python docs/results/2026-11-25-fp32-exact/pass_costs.py --model qwen2.5-coder-0.5b --dtype fp32
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import torch
from transformers import AutoModelForCausalLM

import quickdraft
from quickdraft.cpu import describe
from quickdraft.runners import attention
from quickdraft.runners.hf import HFRunner, PackedLinear, use_kernels
from quickdraft.runners.invariance import RowPadded, row_invariance, rows_invariant


def before(path: str, dtype: torch.dtype) -> HFRunner:
    grouped = dtype == torch.bfloat16
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype,
                                                 attn_implementation=attention.register() if grouped else "sdpa")
    use_kernels(model, "onednn")
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if isinstance(child, PackedLinear):
                child.weight = torch.ops.mkldnn._reorder_linear_weight(child.weight.to_dense(), 1)
                if grouped and not rows_invariant(child, child.in_features, dtype):
                    setattr(module, name, RowPadded(child, 16))
    return HFRunner(model)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--context", type=int, default=800)
    ap.add_argument("--sizes", default="1,2,4,8,16,32")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[args.dtype]
    now = quickdraft.load(args.model, dtype=args.dtype, progress=False)
    runners = {"before": before(now.runner.model.name_or_path, dtype), "now": now.runner}
    rng = random.Random(0)
    vocab = now.runner.vocab_size
    probe = [rng.randrange(vocab) for _ in range(333)]
    worst = {k: max(row_invariance(r, probe[:n], sizes=(2, 5, 16, 33)) for n in (40, 120, 333)) for k, r in runners.items()}
    context = [rng.randrange(vocab) for _ in range(args.context)]
    for r in runners.values():
        r.reset()
        r.prefill(context)
    sizes = [int(n) for n in args.sizes.split(",")]
    seconds: dict[str, dict[int, list[float]]] = {k: {n: [] for n in sizes} for k in runners}
    for _ in range(args.repeats):
        for n in sizes:
            tokens = [rng.randrange(vocab) for _ in range(n)]
            for k, r in runners.items():
                t = time.perf_counter()
                r.forward(tokens)
                seconds[k][n].append(time.perf_counter() - t)
                r.rollback(len(context))
    print(f"CPU: {describe()}; {args.model} {args.dtype}, {args.context} cached tokens, median of {args.repeats}")
    for k, r in runners.items():
        print(f"{k}: attention {r.model.config._attn_implementation}, largest logit difference between n-token passes "
              f"and one-token decoding (n = 2, 5, 16, 33 after 7, 87, 300 cached tokens): {worst[k]:g}")
    print("\n| tokens | before ms | now ms | before / now |\n|---|---|---|---|")
    for n in sizes:
        b, a = (statistics.median(seconds[k][n]) for k in ("before", "now"))
        print(f"| {n} | {b * 1e3:.1f} | {a * 1e3:.1f} | {b / a:.2f} |")


if __name__ == "__main__":
    main()
