"""Replay prediction, prediction+lookup as PredictionOrLookup (now) and as FirstOf (before) over outputs.jsonl
(collect_outputs.py), with pass costs measured on the EPYC, through the engine (scripts/draft_replay.py):

    .venv/bin/python docs/results/2026-11-27-verify-vs-prefill/replay_prediction_lookup.py outputs.jsonl
"""
import sys, json, statistics
sys.path.insert(0, "scripts")
from draft_replay import replay, cost_of
from quickdraft.drafters.base import FirstOf
from quickdraft.drafters.prediction import PredictionDrafter
from quickdraft.drafters.lookup import PromptLookupDrafter
from quickdraft.sizing import PassCosts
rows = [json.loads(l) for l in open(sys.argv[1] if len(sys.argv) > 1 else "outputs.jsonl")]
short = cost_of({1: 1, 9: 1.16, 17: 1.6, 26: 2.18, 51: 3.5, 89: 6.0, 129: 8.2})
long = cost_of({1: 1, 9: 1.17, 17: 1.64, 21: 1.9, 63: 4.6, 91: 7.2, 129: 9.2})

from quickdraft.drafters.build import PredictionOrLookup
configs = {
    "PredictionOrLookup": lambda p: PredictionOrLookup(PredictionDrafter(p), PromptLookupDrafter()),
    "prediction": lambda p: PredictionDrafter(p),
    "FirstOf (before)": lambda p: FirstOf([PredictionDrafter(p), PromptLookupDrafter()]),
}
for wl in ("apply_edit_eval", "edit_eval", "refactor"):
    rs = [r for r in rows if r["workload"] == wl]
    if not rs: continue
    cost = long if wl == "refactor" else short
    base = None
    print(wl, len(rs))
    for name, make in configs.items():
        shared = PassCosts(); times = []; passes = 0
        for r in rs:
            steps = []
            times.append(replay(make(r["prediction"]), r["prompt"], r["output"], cost, shared, steps)); passes += len(steps)
        base = base or times
        ratios = [b / t for b, t in zip(base, times)]
        print(f"  {name:22s} time {sum(times):7.1f} passes {passes:5d}  vs PredictionOrLookup: median {statistics.median(ratios):.3f} [{min(ratios):.2f}-{max(ratios):.2f}]  summed {sum(base)/sum(times):.3f}")
