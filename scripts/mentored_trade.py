"""Mentored decoding's trade (issue 21): tokens per second against answer quality, per KL bound, beside
plain sampling, speculative sampling (exact, D = 0) and the unbounded lossy rules people use today.

When to run: after a change to an acceptance rule, the draft model or the sizer under sampling: it measures
what a lossy rule costs in answers beside what it buys in speed (docs/mentored.md).

    .venv/bin/python scripts/mentored_trade.py --workloads humaneval,translation --limit 10 \
        --temperature 0.7 --out bench-out/mentored-t0.7

Every method samples at the same temperature with one seed per (task, repeat), shared by all of them
(the benchmark's rule), drafts with the draft model, and runs in the benchmark's own loop (harness.run:
interleaved, rotated, resumable: run the same command again to add tasks or repeats; a resumed run may
name fewer methods, e.g. `--bounds 0.1,0.3,1 --no-relaxed`, to add tasks faster). Rows carry the
quality scores of bench/scoring.py; the report's "Quality of the answers" table gives each method's mean
score with a 95 % bootstrap interval beside its speedup over plain sampling.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import quickdraft
from quickdraft.bench import harness, report
from quickdraft.bench import workloads as W
from quickdraft.bench.methods import METHODS, mentored_method

BOUNDS = (0.01, 0.03, 0.1, 0.3, 1.0)  # nats per token (the grid)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--draft-model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--workloads", default="humaneval,translation,math_reasoning,summarization")
    ap.add_argument("--limit", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--max-new-tokens", type=int, default=256)
    ap.add_argument("--skip", type=int, default=0, help="leave out each workload's first N tasks (held-out tasks)")
    ap.add_argument("--bounds", default=",".join(f"{b:g}" for b in BOUNDS), help="KL bounds, comma-separated")
    ap.add_argument("--relaxed", action=argparse.BooleanOptionalAction, default=True,
                    help="also run typical and threshold acceptance (--no-relaxed: fewer methods, more tasks an hour)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    methods = [METHODS["plain-sampled"], METHODS["draft-model-sampled"],
               *(mentored_method(float(b)) for b in args.bounds.split(","))]
    if args.relaxed:
        methods += [METHODS["typical-sampled"], METHODS["threshold-sampled"]]
    config = harness.BenchConfig(model=args.model, workloads=tuple(W.select(args.workloads)),
                                 methods=tuple(m.name for m in methods), out=Path(args.out), data=W.data_dir(),
                                 draft_model=args.draft_model, limit=args.limit, skip=args.skip, max_new_tokens=args.max_new_tokens,
                                 repeats=args.repeats, temperature=args.temperature, argv=("scripts/mentored_trade.py",))
    gen = quickdraft.load(args.model, draft_model=args.draft_model)
    harness.run(config, gen, methods=methods)
    print(report.build(config.out))


if __name__ == "__main__":
    main()
