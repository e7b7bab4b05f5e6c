"""A/B of the transformers runner's Linear kernels: torch's own (as transformers loads a model) against
weights packed once for oneDNN (kernels="onednn", the default), side by side in one process, per task
interleaved and rotated, through the benchmark's own Session (multi-turn tasks run as in
`quickdraft bench run`).

Two copies of the target are loaded, one per kernel choice, each with its own int8 draft model. Every
method's output must be identical to plain decoding on the same kernels; whether the two kernel choices
write the same text is counted (they may not: rounding decides near-ties).

Usage: .venv/bin/python docs/results/2026-11-23-kernels/ab_kernels.py --workloads humaneval,mt_bench --limit 3
         [--methods plain,draft-model,lookup] [--model qwen2.5-coder-1.5b] [--draft-model qwen2.5-coder-0.5b]
         [--max-new-tokens 128] [--dtype auto|bf16|fp32] [--out ab_kernels.jsonl]

(Two Generators, one per kernel choice, so not a method list for harness.run, which runs one.)
"""

from __future__ import annotations

import argparse
import json
import statistics

import quickdraft
from quickdraft.bench import workloads as W
from quickdraft.bench.harness import BenchConfig, Session
from quickdraft.bench.methods import METHODS
from quickdraft.cpu import describe

KERNELS = ("torch", "onednn")


CPU = describe()  # every row names the CPU and its flags: ratios differ between CPU kinds

def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--draft-model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--workloads", default="humaneval,mt_bench")
    ap.add_argument("--methods", default="plain,draft-model")
    ap.add_argument("--limit", type=int, default=3)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--out", default="ab_kernels.jsonl")
    ap.add_argument("--dtype", default="auto", choices=["auto", "bf16", "fp32"], help="the target's precision")
    args = ap.parse_args()
    methods = [METHODS[m] for m in args.methods.split(",")]
    assert methods[0].name == "plain", "plain first: the reference of each kernel choice"

    data = W.data_dir()
    names = W.select(args.workloads)
    config = BenchConfig(model=args.model, workloads=tuple(names), methods=("plain",), out=None, data=data,
                         draft_model=args.draft_model, max_new_tokens=args.max_new_tokens, repeats=1)
    sessions = {}
    for k in KERNELS:
        gen = quickdraft.load(args.model, draft_model=args.draft_model, kernels=k, dtype=args.dtype)
        gen.generate("warm up", drafter="draft-model", max_new_tokens=8)
        sessions[k] = Session(gen, config)
    runs = [(k, m) for m in methods for k in KERNELS]
    rows = []
    with open(args.out, "a") as out:
        for name in names:
            for i, task in enumerate(W.WORKLOADS[name].load(data, args.limit)):
                order = runs[i % len(runs):] + runs[: i % len(runs)]  # rotate the order per task
                got = {}
                for k, m in order:
                    o = sessions[k].run(m, task)
                    got[k, m.name] = o.tokens
                    row = {"cpu": CPU, "workload": name, "task": task.id, "kernels": k, "dtype": sessions[k].gen.runner.dtype,
                           "method": m.name,
                           "tokens": sum(len(t) for t in o.tokens),
                           "prefill_s": round(o.times.get("prefill_s", 0.0), 3),
                           "decode_s": round(o.times.get("decode_s", 0.0), 3),
                           **{c: o.counts.get(c) for c in ("target_passes", "draft_tokens", "accepted", "draft_forwards")}}
                    rows.append(row)
                    out.write(json.dumps(row) + "\n")
                    out.flush()
                    print(json.dumps(row), flush=True)
                for k in KERNELS:
                    for m in methods:
                        if m.engine == "quickdraft":
                            assert got[k, m.name] == got[k, "plain"], f"{task.id}: {m.name} on {k} differs from plain"
                print(f"{task.id}: every method identical to plain on its kernels; torch and onednn plain "
                      f"{'write the same' if got['torch', 'plain'] == got['onednn', 'plain'] else 'DIFFER'}", flush=True)
    summarize(rows, methods)


def summarize(rows: list[dict], methods: list) -> None:
    """Tokens/s over torch-kernel plain decoding of the same task, decode and end to end."""
    def rate(r: dict, end_to_end: bool) -> float:
        return r["tokens"] / (r["decode_s"] + (r["prefill_s"] if end_to_end else 0.0))

    for name in sorted({r["workload"] for r in rows}):
        base = {r["task"]: r for r in rows if r["workload"] == name and r["method"] == "plain" and r["kernels"] == "torch"}
        for m in methods:
            for k in KERNELS:
                mine = [r for r in rows if r["workload"] == name and r["method"] == m.name and r["kernels"] == k]
                dec = [rate(r, False) / rate(base[r["task"]], False) for r in mine]
                e2e = [rate(r, True) / rate(base[r["task"]], True) for r in mine]
                if mine:
                    print(f"{name:12} {m.name:12} {k:7} over torch plain: decode {statistics.median(dec):.2f} "
                          f"[{min(dec):.2f}-{max(dec):.2f}], end to end {statistics.median(e2e):.2f} "
                          f"[{min(e2e):.2f}-{max(e2e):.2f}] ({len(mine)} tasks)")


if __name__ == "__main__":
    main()
