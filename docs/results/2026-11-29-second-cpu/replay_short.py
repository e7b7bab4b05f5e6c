"""Replay prompt lookup's short matches (LookupConfig.short_ngram, short_tokens) against none (short_ngram 0), with
prediction+lookup where a task has a prediction (or lookup alone: `lookup`), over outputs of tasks no held-out run
uses, through the engine with the sizer (scripts/draft_replay.py), at pass costs measured on the family-26 EPYC after
500 and 3,000 cached tokens (costs26.json: draft_replay.py's measure_costs). The outputs come from
../2026-11-27-verify-vs-prefill/collect_outputs.py, as in ../2026-11-28-lookup-growth/replay_growth.py's docstring.

    .venv/bin/python docs/results/2026-11-29-second-cpu/replay_short.py outputs.jsonl [lookup]
"""
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, "scripts")
from draft_replay import cost_of, replay  # noqa: E402

from quickdraft.drafters.build import PredictionOrLookup  # noqa: E402
from quickdraft.drafters.lookup import LookupConfig, PromptLookupDrafter  # noqa: E402
from quickdraft.drafters.prediction import PredictionDrafter  # noqa: E402
from quickdraft.sizing import PassCosts  # noqa: E402

curves = json.loads((Path(__file__).parent / "costs26.json").read_text())
short, long = (cost_of({int(n): c for n, c in curves[k].items()}) for k in ("500", "3000"))
VARIANTS = {"no short matches": LookupConfig(short_ngram=0),
            **{f"1-2-token matches, {k} tokens": LookupConfig(short_tokens=k) for k in (1, 2, 4, 8)},
            "2-token matches, 4 tokens": LookupConfig(short_ngram=2)}
rows = [json.loads(line) for line in open(sys.argv[1])]
alone = sys.argv[2:] == ["lookup"]
for wl in dict.fromkeys(r["workload"] for r in rows):
    rs = [r for r in rows if r["workload"] == wl]
    cost = long if wl in ("refactor", "summarization", "rag") else short
    base = None
    print(wl, len(rs), "tasks")
    for name, cfg in VARIANTS.items():
        shared, times, passes = PassCosts(), [], 0
        for r in rs:
            d = (PredictionOrLookup(PredictionDrafter(r["prediction"]), PromptLookupDrafter(cfg))
                 if r["prediction"] and not alone else PromptLookupDrafter(cfg))
            steps = []
            times.append(replay(d, r["prompt"], r["output"], cost, shared, steps))
            passes += len(steps)
        base = base or times
        ratios = [b / t for b, t in zip(base, times)]
        print(f"  {name:30s} time {sum(times):7.1f} passes {passes:5d}  none/this: median {statistics.median(ratios):.3f} "
              f"[{min(ratios):.2f}-{max(ratios):.2f}] summed {sum(base) / sum(times):.3f}", flush=True)
