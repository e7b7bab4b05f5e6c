"""Ouroboros ablation (issue 5; the shape of the paper's Table 4): plain decoding, speculative decoding
with the draft model, then Ouroboros adding one mechanism at a time, on HumanEval, greedy.

    .venv/bin/python docs/results/2026-11-24-ouroboros/ouroboros_ablation.py --limit 10 --max-new-tokens 256 --out bench-out/ouroboros-ablation

A list of methods run by the benchmark's own loop (harness.run: every configuration on the same loaded
weights in one process, interleaved and rotated per task, every output checked against plain decoding's,
runs.jsonl and report.md in --out). Each configuration has its own phrase pool (the Generator keys pools by
configuration); warm start keeps it across the tasks, the other rows start each task empty. --only picks rows by
number (plain always runs).
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from quickdraft import load
from quickdraft.bench import harness, report
from quickdraft.bench import workloads as W
from quickdraft.bench.methods import METHODS, Method
from quickdraft.drafters.ouroboros import OuroborosConfig

# Cumulative, as in the paper: each row adds one mechanism to the row before; the last two are
# quickdraft's own (lengthening only where the measured pass costs say it pays; min_joint).
BASE = OuroborosConfig(draft_phrases=0, window=0, branches=0, harvest=False, context=False, warm_start=False,
                       branches_by_cost=False, min_joint=0.0)
STEPS = [
    ("+ phrase drafting (context phrases)", dict(draft_phrases=3, context=True)),
    ("+ lengthening", dict(branches=3)),
    ("+ harvest from verification", dict(harvest=True)),
    ("+ warm start (the paper's Ouroboros)", dict(warm_start=True)),
    ("+ branches only where they pay", dict(branches_by_cost=True)),
    ("+ drafts end where the draft model doubts them (the default)", dict(min_joint=0.5)),
]
EXTRA = [("default + lookahead window W=8", dict(window=8)),  # measured apart: off by default
         ("default without lengthening (K=0)", dict(branches=0)),
         ("default, one phrase per draft forward", dict(draft_phrases=1))]


def methods() -> list[Method]:
    """Row 0 plain, row 1 speculative decoding, then the Ouroboros rows (named ouroboros-2, ...)."""
    rows = [METHODS["plain"], METHODS["draft-model"]]
    cfg, changes = BASE, []
    for about, change in STEPS:
        cfg = replace(cfg, **change)
        changes.append((about, cfg))
    assert cfg == OuroborosConfig(), "the last cumulative row must be the default configuration"
    changes += [(about, replace(cfg, **change)) for about, change in EXTRA]
    for about, c in changes:
        rows.append(Method(f"ouroboros-{len(rows)}", "quickdraft", about, needs=("draft-model",),
                           options=(("drafter", "ouroboros"), ("ouroboros", c))))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--draft-model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--limit", type=int, default=10)
    ap.add_argument("--max-new-tokens", type=int, default=256)
    ap.add_argument("--only", default="", help="comma-separated row numbers to run (0 = plain, always run)")
    ap.add_argument("--out", default="bench-out/ouroboros-ablation")
    ap.add_argument("--kernels", default="auto", help="the target's Linear kernels: auto, onednn or torch")
    ap.add_argument("--dtype", default="auto", help="the target's precision: auto, bf16 or fp32")
    args = ap.parse_args()
    rows = methods()
    chosen = [rows[0], *(rows[int(i)] for i in args.only.split(",") if i and int(i))] if args.only else rows
    for i, m in enumerate(rows):
        print(f"{i:2d} {m.name:13s} {m.about}")
    config = harness.BenchConfig(model=args.model, workloads=("humaneval",), methods=tuple(m.name for m in chosen),
                                 out=Path(args.out), data=W.data_dir(), draft_model=args.draft_model, limit=args.limit,
                                 max_new_tokens=args.max_new_tokens, repeats=1, kernels=args.kernels, dtype=args.dtype)
    gen = load(args.model, draft_model=args.draft_model, kernels=args.kernels, dtype=args.dtype)
    summary = harness.run(config, gen, methods=chosen)
    print(report.build(config.out))
    return 1 if summary.mismatches else 0


if __name__ == "__main__":
    raise SystemExit(main())
