"""The held-out sittings against vLLM n-gram (sittings/*.jsonl, scripts/vllm_bench.py rows): end to end per task,
the median over tasks whose outputs have the same length (vLLM counts the end-of-sequence token: +-1), and the
time to first token (max_tokens 1: ttft.jsonl).

    python3 docs/results/2026-11-27-verify-vs-prefill/sittings.py
"""
import json
import statistics
from pathlib import Path

HERE = Path(__file__).parent / "sittings"


def rows(name):
    return [json.loads(line) for line in (HERE / f"{name}.jsonl").read_text().splitlines()]


def ratios(vllm, ours, workload):
    keys = [k for k in vllm if (workload == "apply") == k.startswith("apply") and k in ours]
    same = [vllm[k]["seconds"] / ours[k]["seconds"] for k in keys if abs(vllm[k]["tokens"] - ours[k]["tokens"]) <= 1]
    summed = sum(vllm[k]["seconds"] for k in keys) / sum(ours[k]["seconds"] for k in keys)
    return statistics.median(same), summed, same


ttft = rows("ttft")
v_first = {r["task"]: r for r in ttft if r["server"] == "vllm-plain"}
q_first = {r["task"]: r for r in ttft if r["server"] == "quickdraft"}
for w in ("refactor", "apply"):
    m, s, each = ratios(v_first, q_first, w)
    print(f"time to first token, {w}: vLLM / quickdraft median {m:.2f}x, summed {s:.2f}x, per task {[round(x, 2) for x in each]}")
# (sitting, quickdraft's rows, vLLM n-gram's rows): e2e-pl and e2e-pl2 ran quickdraft after e2e's vLLM run
for label, vllm_from, ours_from, methods in (
        ("sitting 1 (before PredictionOrLookup)", "e2e", "e2e", ["qd-prediction"]),
        ("sitting 1 (before PredictionOrLookup)", "e2e", "e2e-pl", ["qd-prediction+lookup"]),
        ("sitting 1, quickdraft again (after)", "e2e", "e2e-pl2", ["qd-prediction", "qd-prediction+lookup"]),
        ("sitting 2 (after)", "sit2", "sit2", ["qd-prediction", "qd-prediction+lookup"]),
        ("sitting 3 (after; quickdraft first, +lookup first)", "sit3", "sit3", ["qd-prediction", "qd-prediction+lookup"]),
        ("sitting 4 (after)", "sit4", "sit4", ["qd-prediction", "qd-prediction+lookup"])):
    vllm = {r["task"]: r for r in rows(vllm_from) if r["server"] == "vllm-ngram"}
    for method in methods:
        ours = {r["task"]: r for r in rows(ours_from) if r["server"] == "quickdraft" and r["method"] == method}
        for w in ("refactor", "apply"):
            m, s, each = ratios(vllm, ours, w)
            print(f"{label}: vLLM n-gram / {method}, {w}: median {m:.2f}x, summed {s:.2f}x, per task "
                  f"{[round(x, 2) for x in each]}")
