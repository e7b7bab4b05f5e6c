"""A held-out sitting against vLLM n-gram on apply_refactor (sitting.jsonl, scripts/vllm_bench.py rows): end to end
per task, the median over tasks whose outputs have the same length (vLLM counts the end-of-sequence token: +-1).

    python3 docs/results/2026-11-27-apply-refactor/sitting.py
"""
import json
import statistics
from pathlib import Path

rows = [json.loads(line) for line in (Path(__file__).parent / "sitting.jsonl").read_text().splitlines()]
vllm = {r["task"]: r for r in rows if r["server"] == "vllm-ngram"}
for method in ("qd-prediction", "qd-prediction+lookup"):
    ours = {r["task"]: r for r in rows if r["server"] == "quickdraft" and r["method"] == method}
    for w in ("apply",):
        keys = [k for k in vllm if (w == "apply") == k.startswith("apply") and k in ours]
        same = [vllm[k]["seconds"] / ours[k]["seconds"] for k in keys if abs(vllm[k]["tokens"] - ours[k]["tokens"]) <= 1]
        summed = sum(vllm[k]["seconds"] for k in keys) / sum(ours[k]["seconds"] for k in keys)
        print(f"vLLM n-gram / {method}, {w}: median {statistics.median(same):.2f}x over {len(same)} of {len(keys)} tasks, "
              f"summed {summed:.2f}x, per task {[round(x, 2) for x in same]}")
