"""End-to-end A/B of the prediction drafter's min_draft (2, the old default, against 8), on tasks the replay that
chose 8 did not see: refactor and EditEval tasks 16.. (the replay used each workload's first 16).

Per task, in one process on one loaded model, in rotated order: plain decoding, prediction with min_draft 8,
prediction with min_draft 2 (PredictionConfig.for_policy patched for the run; the request is otherwise the
CLI's `--edit`). Every output is checked against plain decoding's. Prints one JSON row per run and a summary.

    .venv/bin/python docs/results/2026-11-25-min-draft/ab_min_draft.py --skip 16 --limit 8 > rows.jsonl
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import replace

import quickdraft
from quickdraft.bench import workloads as W
from quickdraft.cpu import describe
from quickdraft.drafters import prediction as P

ORIGINAL = P.PredictionConfig.for_policy.__func__


def with_min_draft(n: int) -> None:
    P.PredictionConfig.for_policy = classmethod(lambda cls, policy: replace(ORIGINAL(cls, policy), min_draft=n))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--skip", type=int, default=16)
    ap.add_argument("--limit", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=512)
    args = ap.parse_args()
    gen = quickdraft.load("qwen2.5-coder-0.5b", progress=False)
    gen.generate("warm up", max_new_tokens=8)
    runs = [("plain", None), ("min8", 8), ("min2", 2)]
    rows = []
    for w in ("refactor", "edit_eval"):
        tasks = list(W.WORKLOADS[w].load(W.data_dir(), args.skip + args.limit))[args.skip:]
        for i, task in enumerate(tasks):
            order = runs[i % 3:] + runs[: i % 3]
            out = {}
            for name, n in order:
                if n is not None:
                    with_min_draft(n)
                res = gen.generate(task.messages, max_new_tokens=args.max_new_tokens,
                                   **({"drafter": "none"} if n is None else {"prediction": task.prediction}))
                s = res.stats
                out[name] = res.token_ids
                row = dict(cpu=describe(), dtype=gen.runner.dtype, kernels=gen.runner.kernels, workload=w, task=task.id,
                           run=name, tokens=len(res.token_ids), prefill_s=round(s.prefill_s, 3),
                           decode_s=round(s.decode_s, 3), passes=s.target_passes,
                           accepted=s.accepted_prediction_tokens, rejected=s.rejected_prediction_tokens)
                rows.append(row)
                print(json.dumps(row), flush=True)
            assert out["min8"] == out["plain"] and out["min2"] == out["plain"], f"{task.id}: differs from plain"
    for w in ("refactor", "edit_eval"):
        def total(name, key):
            return sum(r[key] for r in rows if r["workload"] == w and r["run"] == name)
        by = {(r["task"], r["run"]): r for r in rows if r["workload"] == w}
        tasks = sorted({t for t, _ in by})
        e2e = [(by[t, "min2"]["prefill_s"] + by[t, "min2"]["decode_s"]) / (by[t, "min8"]["prefill_s"] + by[t, "min8"]["decode_s"])
               for t in tasks]
        for name in ("plain", "min8", "min2"):
            print(f"{w:9s} {name:5s} tokens {total(name, 'tokens')} decode {total(name, 'decode_s'):.1f} s "
                  f"end to end {total(name, 'prefill_s') + total(name, 'decode_s'):.1f} s passes {total(name, 'passes')} "
                  f"accepted {total(name, 'accepted')} rejected {total(name, 'rejected')}", file=sys.stderr)
        print(f"{w:9s} min8 over min2, end to end per task: median {statistics.median(e2e):.3f}x "
              f"[{min(e2e):.3f}-{max(e2e):.3f}], all identical to plain", file=sys.stderr)


if __name__ == "__main__":
    main()
