"""Ouroboros ablation (issue 5; the shape of the paper's Table 4): plain decoding, speculative decoding
with the draft model, then Ouroboros adding one mechanism at a time, on HumanEval, greedy.

    python scripts/ouroboros_ablation.py --limit 10 --max-new-tokens 256 --out ablation.jsonl

Every configuration runs on the same loaded weights in one process, interleaved per prompt (prompt 1
under every configuration, then prompt 2, ...), and every output is compared with plain decoding's.
Warm start keeps one pool across the prompts in order; the other rows start each prompt empty.
Prints a Markdown table: decode tokens/s (median over prompts and total tokens / total time), speedup
over plain and over speculative decoding, mean accepted tokens per target pass, draft forwards per pass.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import replace

from quickdraft import load
from quickdraft.bench.workloads import data_dir, humaneval
from quickdraft.cpu import describe
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


CPU = describe()  # every row names the CPU and its flags: ratios differ between CPU kinds

def configs() -> list[tuple[str, dict]]:
    rows: list[tuple[str, dict]] = [("plain", dict(drafter="none")), ("speculative", dict(drafter="draft-model"))]
    cfg = BASE
    for name, change in STEPS:
        cfg = replace(cfg, **change)
        rows.append((name, dict(drafter="ouroboros", ouroboros=cfg)))
    assert cfg == OuroborosConfig(), "the last cumulative row must be the default configuration"
    for name, change in EXTRA:
        rows.append((name, dict(drafter="ouroboros", ouroboros=replace(cfg, **change))))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--draft-model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--limit", type=int, default=10)
    ap.add_argument("--skip", type=int, default=0, help="prompts to skip first (to tune on others)")
    ap.add_argument("--max-new-tokens", type=int, default=256)
    ap.add_argument("--only", default="", help="comma-separated row numbers to run (0 = plain, always run)")
    ap.add_argument("--out", default="ouroboros-ablation.jsonl")
    ap.add_argument("--kernels", default="auto", help="the target's Linear kernels: auto, onednn or torch")
    args = ap.parse_args()

    gen = load(args.model, draft_model=args.draft_model, kernels=args.kernels)
    tasks = list(humaneval(data_dir(), args.skip + args.limit))[args.skip :]
    rows = configs()
    chosen = {0, *(int(i) for i in args.only.split(",") if i)} if args.only else set(range(len(rows)))
    gen.generate("hi", drafter="draft-model", max_new_tokens=4)  # warm up both models
    results: dict[str, list[dict]] = {name: [] for name, _ in rows}
    with open(args.out, "w") as log:
        for n, task in enumerate(tasks):
            prompt = task.messages
            plain_ids = None
            for i, (name, options) in enumerate(rows):
                if i not in chosen:
                    continue
                t0 = time.perf_counter()
                res = gen.generate(prompt, max_new_tokens=args.max_new_tokens, **options)
                wall = time.perf_counter() - t0
                if plain_ids is None:
                    plain_ids = res.token_ids
                s = res.stats
                rec = dict(cpu=CPU, task=task.id, row=name, identical=res.token_ids == plain_ids, wall_s=round(wall, 3),
                           **s.as_dict())
                results[name].append(rec)
                log.write(json.dumps(rec) + "\n")
                log.flush()
                print(f"[{n + 1}/{len(tasks)}] {name:38s} {s.decode_tokens_per_s:6.2f} tok/s  "
                      f"acc/pass {s.accepted_per_pass:5.2f}  fwd/pass "
                      f"{s.draft_forwards / max(1, s.target_passes):5.2f}  identical={rec['identical']}",
                      file=sys.stderr, flush=True)
    report(results, args)
    return 0 if all(r["identical"] for recs in results.values() for r in recs) else 1


def report(results: dict[str, list[dict]], args) -> None:
    def total_rate(recs):
        return sum(r["completion_tokens"] for r in recs) / sum(r["decode_s"] for r in recs)

    plain = results["plain"]
    spec = results.get("speculative") or []
    print(f"\nHumanEval, first {args.limit} prompts after {args.skip}, {args.max_new_tokens} new tokens, greedy; "
          f"target {args.model}, draft {args.draft_model}\n")
    print("| configuration | decode tok/s (median) | decode tok/s (total) | x plain | x speculative | "
          "accepted / pass | draft forwards / pass | identical |")
    print("|---|---|---|---|---|---|---|---|")
    for name, recs in results.items():
        if not recs:
            continue
        ratio_plain = statistics.median(r["decode_tokens_per_s"] / p["decode_tokens_per_s"] for r, p in zip(recs, plain))
        ratio_spec = (statistics.median(r["decode_tokens_per_s"] / q["decode_tokens_per_s"] for r, q in zip(recs, spec))
                      if spec else float("nan"))
        passes = sum(r["target_passes"] for r in recs)
        print(f"| {name} | {statistics.median(r['decode_tokens_per_s'] for r in recs):.2f} | {total_rate(recs):.2f} | "
              f"{ratio_plain:.2f} | {ratio_spec:.2f} | "
              f"{sum(r['accepted_prediction_tokens'] for r in recs) / passes:.2f} | "
              f"{sum(r['draft_forwards'] for r in recs) / passes:.2f} | "
              f"{sum(r['identical'] for r in recs)}/{len(recs)} |")


if __name__ == "__main__":
    sys.exit(main())
