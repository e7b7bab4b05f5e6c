"""The README's edit (examples/inventory.py, the file as prediction) against the oracle: decoded plainly and with the
prediction (the real passes), then replayed with the same drafters and costs as scripts/draft_replay.py --oracle.

    .venv/bin/python docs/results/2026-11-27-prediction-oracle/readme_edit.py --costs 1:1,2:1.0,... > readme_edit.json
"""

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "scripts"))
from draft_replay import CONFIGS, cost_of, replay  # noqa: E402

from quickdraft import load  # noqa: E402
from quickdraft.bench import oracle  # noqa: E402
from quickdraft.prompts import edit_request  # noqa: E402
from quickdraft.sizing import PassCosts  # noqa: E402

INSTRUCTION = "Rename the function parse_line to parse_record and update its caller."

p = argparse.ArgumentParser()
p.add_argument("--costs", required=True)
args = p.parse_args()
costs = {int(k): float(v) for k, v in (kv.split(":") for kv in args.costs.split(","))}
cost = cost_of(costs)
gen = load("qwen2.5-coder-0.5b")
prompt, fenced = edit_request(INSTRUCTION, (ROOT / "examples/inventory.py").read_text(), "examples/inventory.py")
messages = [{"role": "user", "content": prompt}]
plain = gen.generate(messages, drafter="none", max_new_tokens=1024)
drafted = gen.generate(messages, prediction=fenced, max_new_tokens=1024)
assert drafted.token_ids == plain.token_ids
out, pred = plain.token_ids, gen.tokenizer.encode(fenced, add_special_tokens=False)
runs, src = oracle.longest_runs(out, pred), oracle.diff_sources(out, pred)
fastest, fewest = oracle.oracle(runs, cost, max(costs) - 1), oracle.passes_only(runs, max(costs) - 1)
row = {"workload": "readme edit", "task": "inventory.py", "tokens": len(out), "prediction_tokens": len(pred),
       "insertions": runs.count(0), "oracle_passes": fewest.passes, "oracle_time": round(fastest.cost, 2),
       "oracle_time_passes": fastest.passes, "bench_prediction_passes": drafted.stats.target_passes, "configs": {}}
capped = oracle.oracle(runs, cost, 64)  # at today's longest prediction draft
row["oracle_at_max_draft"] = {"max_draft": 64, "passes": capped.passes, "time": round(capped.cost, 2)}
for name in ("prediction", "prediction+lookup 3-gram"):
    steps: list[tuple[int, int]] = []
    t = replay(CONFIGS[name][1](pred), plain.prompt_token_ids, out, cost, PassCosts(), steps)
    by_pass, by_time = oracle.gap(steps, fewest, runs, src, cost), oracle.gap(steps, fastest, runs, src, cost)
    row["configs"][name] = {"passes": len(steps), "time": round(t, 2), "pass_gap": by_pass.passes_by_cause,
                            "time_gap": {c: round(v, 2) for c, v in by_time.time_by_cause.items()}}
print(json.dumps(row, indent=1))
