"""A/B of the draft model's length rules, side by side with plain decoding, interleaved per task in
one process on the same loaded weights, through the benchmark's own Session (so multi-turn tasks run
as in `quickdraft bench run`). Greedy outputs must all be identical.

--compare sizing: draft-model (draft_sizing="off": its own adaptive length and confidence stop only)
  against draft-model-capped (draft_sizing="cost": also capped at the length that pays given the
  measured pass costs, acceptance and seconds per draft token).
--compare confidence: the confidence stop at 0.3 (the default) against 0.4 (transformers' default).
--compare trim: the draft model before drafts were trimmed by its confidences (draft_sizing="off",
  min_joint=0) against the default now (trimmed, paused after a draft worth nothing, min_joint=0.5),
  and transformers' assisted generation with the same draft model.

Usage: .venv/bin/python scripts/ab_draft_sizing.py --workloads mt_bench,humaneval --limit 3 [--skip 0]
         [--compare sizing|confidence] [--model qwen2.5-coder-1.5b] [--draft-model qwen2.5-coder-0.5b]
         [--max-new-tokens 128] [--out ab.jsonl]
"""

from __future__ import annotations

import argparse
import json
import statistics

import quickdraft
from quickdraft.bench import workloads as W
from quickdraft.bench.harness import BenchConfig, Session
from quickdraft.bench.methods import METHODS, Method
from quickdraft.cpu import describe
from quickdraft.drafters.draft_model import DraftModelConfig

PLAIN = Method("plain", "quickdraft", "plain decoding", options=(("drafter", "none"),))
COMPARE = {
    "sizing": [
        Method("draft-model", "quickdraft", "draft model, own length rule",
               options=(("drafter", "draft-model"), ("draft_sizing", "off"))),
        Method("draft-model-capped", "quickdraft", "draft model, also capped by measured costs",
               options=(("drafter", "draft-model"), ("draft_sizing", "cost"))),
    ],
    "confidence": [
        Method(f"draft-model-conf{c}", "quickdraft", f"draft model, confidence stop below {c}",
               options=(("drafter", "draft-model"), ("draft", DraftModelConfig(min_confidence=c))))
        for c in (0.3, 0.4)
    ],
    "trim": [
        Method("draft-model-untrimmed", "quickdraft", "draft model as before confidence trimming",
               options=(("drafter", "draft-model"), ("draft_sizing", "off"), ("draft", DraftModelConfig(min_joint=0)))),
        Method("draft-model", "quickdraft", "draft model, defaults", options=(("drafter", "draft-model"),)),
        METHODS["hf-assisted"],
    ],
}


CPU = describe()  # every row names the CPU and its flags: ratios differ between CPU kinds

def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--draft-model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--workloads", default="mt_bench,humaneval")
    ap.add_argument("--limit", type=int, default=3)
    ap.add_argument("--skip", type=int, default=0, help="leave out the first tasks of each workload")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--out", default="ab_draft_sizing.jsonl")
    ap.add_argument("--compare", choices=sorted(COMPARE), default="sizing")
    args = ap.parse_args()
    methods = [PLAIN, *COMPARE[args.compare]]

    data = W.data_dir()
    names = W.select(args.workloads)
    gen = quickdraft.load(args.model, draft_model=args.draft_model)
    config = BenchConfig(model=args.model, workloads=tuple(names), methods=("plain",), out=None, data=data,
                         draft_model=args.draft_model, max_new_tokens=args.max_new_tokens, repeats=1)
    session = Session(gen, config)
    gen.generate("warm up", drafter="draft-model", max_new_tokens=8)
    rows = []
    with open(args.out, "a") as out:
        for name in names:
            tasks = list(W.WORKLOADS[name].load(data, args.skip + args.limit))[args.skip:]
            for i, task in enumerate(tasks):
                ms = methods[i % len(methods):] + methods[: i % len(methods)]  # rotate the order per task
                got = {}
                for m in ms:
                    o = session.run(m, task)
                    seconds = o.times.get("prefill_s", 0.0) + o.times.get("decode_s", 0.0)
                    n = sum(len(t) for t in o.tokens)
                    got[m.name] = o.tokens
                    row = {"cpu": CPU, "workload": name, "task": task.id, "method": m.name, "tokens": n,
                           "seconds": round(seconds, 3), **{k: o.counts.get(k) for k in
                                                          ("target_passes", "draft_tokens", "accepted", "draft_forwards")}}
                    rows.append(row)
                    out.write(json.dumps(row) + "\n")
                    out.flush()
                    print(json.dumps(row), flush=True)
                same = {m.name: got[m.name] == got["plain"] for m in ms}
                print(f"{task.id}: identical={same}", flush=True)
                assert all(same[m.name] for m in ms if m.engine == "quickdraft"), f"{task.id}: outputs differ"
    summarize(rows, methods[1:])


def summarize(rows: list[dict], methods: list[Method]) -> None:
    for name in sorted({r["workload"] for r in rows}):
        base = {r["task"]: r["seconds"] for r in rows if r["workload"] == name and r["method"] == "plain"}
        for m in methods:
            s = [base[r["task"]] / r["seconds"] for r in rows if r["workload"] == name and r["method"] == m.name]
            if s:
                print(f"{name:12} {m.name:20} speedup over plain: median {statistics.median(s):.2f} "
                      f"(min {min(s):.2f}, max {max(s):.2f}, {len(s)} tasks)")


if __name__ == "__main__":
    main()
