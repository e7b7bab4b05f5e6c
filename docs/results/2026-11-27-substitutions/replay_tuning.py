"""Replay the prediction drafter with and without substitutions (PredictionConfig.substitute) over outputs of tasks
that no held-out run uses (../2026-11-27-verify-vs-prefill/collect_outputs.py: refactors 12-21, EditEval 12-39, apply
12-59), through the engine, with pass costs measured on the AMD EPYC (scripts/draft_replay.py):

    .venv/bin/python docs/results/2026-11-27-substitutions/replay_tuning.py outputs.jsonl
"""
import json
import statistics
import sys

sys.path.insert(0, "scripts")
from draft_replay import cost_of, replay  # noqa: E402

from quickdraft.drafters.build import PredictionOrLookup  # noqa: E402
from quickdraft.drafters.lookup import PromptLookupDrafter  # noqa: E402
from quickdraft.drafters.prediction import PredictionConfig, PredictionDrafter  # noqa: E402
from quickdraft.sizing import PassCosts  # noqa: E402

rows = [json.loads(line) for line in open(sys.argv[1] if len(sys.argv) > 1 else "outputs.jsonl")]
short = cost_of({1: 1, 9: 1.16, 17: 1.6, 26: 2.18, 51: 3.5, 89: 6.0, 129: 8.2})  # after ~500 cached tokens
long = cost_of({1: 1, 9: 1.17, 17: 1.64, 21: 1.9, 63: 4.6, 91: 7.2, 129: 9.2})  # after ~3,000
OFF = PredictionConfig(substitute=False)
configs = {
    "prediction, before": lambda p: PredictionDrafter(p, OFF),
    "prediction, after": lambda p: PredictionDrafter(p),
    "prediction+lookup, before": lambda p: PredictionOrLookup(PredictionDrafter(p, OFF), PromptLookupDrafter()),
    "prediction+lookup, after": lambda p: PredictionOrLookup(PredictionDrafter(p), PromptLookupDrafter()),
}
for wl in ("apply_edit_eval", "edit_eval", "refactor"):
    rs = [r for r in rows if r["workload"] == wl]
    cost = long if wl == "refactor" else short
    print(wl, len(rs), "tasks; time in one-token passes; ratios: before / after, per task")
    for name, make in configs.items():
        shared, times, passes = PassCosts(), [], 0
        for r in rs:
            steps = []
            times.append(replay(make(r["prediction"]), r["prompt"], r["output"], cost, shared, steps))
            passes += len(steps)
        if name.endswith("before"):
            base = times
        ratios = [b / t for b, t in zip(base, times)]
        print(f"  {name:26s} time {sum(times):7.1f} passes {passes:5d}  median {statistics.median(ratios):.3f} "
              f"[{min(ratios):.2f}-{max(ratios):.2f}] summed {sum(base) / sum(times):.3f}"
              + (f"  per task {[round(x, 2) for x in ratios]}" if wl == "refactor" and name.endswith("after") else ""))
