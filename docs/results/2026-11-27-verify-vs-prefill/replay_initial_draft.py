"""Replay prediction drafting with initial_draft 16-128 over outputs.jsonl (collect_outputs.py), with pass costs
measured on the EPYC, through the engine (scripts/draft_replay.py): replay_initial_draft.txt."""
import sys, json, statistics
sys.path.insert(0, "scripts")
from draft_replay import replay, cost_of
from quickdraft.drafters.prediction import PredictionConfig, PredictionDrafter
from quickdraft.sizing import PassCosts
rows = [json.loads(l) for l in open("outputs.jsonl")]
# pass costs in one-token passes, measured on this EPYC (short context / ~2.5k context)
short = cost_of({1: 1, 9: 1.16, 17: 1.6, 26: 2.18, 51: 3.5, 89: 6.0, 129: 8.2})
long = cost_of({1: 1, 9: 1.17, 17: 1.64, 21: 1.9, 63: 4.6, 91: 7.2, 129: 9.2})
configs = {f"init {i}" + (f" min {m}" if m != 8 else ""): PredictionConfig(initial_draft=i, min_draft=m)
           for i in (16, 32, 48, 64, 128) for m in (8,)}
for wl in ("apply_edit_eval", "edit_eval", "refactor"):
    rs = [r for r in rows if r["workload"] == wl]
    cost = long if wl == "refactor" else short
    print(wl, len(rs), "tasks")
    base = None
    for name, cfg in configs.items():
        shared = PassCosts()
        times, passes = [], []
        for r in rs:
            steps = []
            t = replay(PredictionDrafter(r["prediction"], cfg), r["prompt"], r["output"], cost, shared, steps)
            times.append(t); passes.append(len(steps))
        if base is None: base = times
        ratios = [b / t for b, t in zip(base, times)]
        print(f"  {name:20s} time {sum(times):8.1f} passes {sum(passes):5d}  speedup vs first: median {statistics.median(ratios):.3f} min {min(ratios):.3f} max {max(ratios):.3f}")
