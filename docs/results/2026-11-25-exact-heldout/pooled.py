"""Speculative sampling against plain sampling, ROUGE-L, paired by (task, repeat): the held-out summaries
(tasks 21 on, this folder's runs.jsonl) beside the first 20 (../2026-11-25-exact-recheck2), and both together.
Intervals resample tasks (each task's mean difference over its repeats), as the bench report does.

    .venv/bin/python docs/results/2026-11-25-exact-heldout/pooled.py
"""

import json
from pathlib import Path

from quickdraft.bench.scoring import bootstrap

HERE = Path(__file__).parent


def differences(path: Path, repeats: int = 1 << 30) -> dict[str, list[float]]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    base = {(r["task"], r["repeat"]): r["scores"]["ROUGE-L"] for r in rows if r["method"] == "plain-sampled"}
    out: dict[str, list[float]] = {}
    for r in rows:
        if r["method"] == "draft-model-sampled" and (r["task"], r["repeat"]) in base and r["repeat"] < repeats:
            out.setdefault(r["task"], []).append(r["scores"]["ROUGE-L"] - base[(r["task"], r["repeat"])])
    return out


def line(name: str, by_task: dict[str, list[float]]) -> str:
    means = [sum(d) / len(d) for d in by_task.values()]
    pairs = [x for d in by_task.values() for x in d]
    _, lo, hi = bootstrap(means)
    return (f"| {name} | {len(by_task)} | {len(pairs)} | {sum(pairs) / len(pairs):+.1f} [{lo:+.1f} to {hi:+.1f}] | "
            f"{sum(x < 0 for x in means)} / {sum(x > 0 for x in means)} |")


first = differences(HERE.parent / "2026-11-25-exact-recheck2" / "runs.jsonl")
held_out = differences(HERE / "runs.jsonl")
first_two = differences(HERE.parent / "2026-11-25-exact-recheck2" / "runs.jsonl", repeats=2)  # as many as held out
print("| tasks | tasks | pairs | exact minus plain, ROUGE-L [95 %, tasks resampled] | tasks below / above 0 |")
print("|---|---|---|---|---|")
print(line("first 20 (241-260), 4 seeds", first))
print(line("first 20, seeds 0-1", first_two))
ids = sorted(int(t.rsplit("-", 1)[1]) for t in held_out)
print(line(f"held out ({ids[0]}-{ids[-1]})", held_out))
print(line(f"all {len(first) + len(held_out)}, seeds as run", {**first, **held_out}))
print(line(f"all {len(first) + len(held_out)}, seeds 0-1", {**first_two, **held_out}))
