"""Held-out sittings against vLLM n-gram (sitting.tsv: scripts/vllm_bench.py rows, trimmed to the fields read here):
end to end per task, the median over tasks whose outputs have the same length (vLLM counts the end-of-sequence token:
+-1). Sitting 1: vLLM n-gram, then quickdraft's engine on glibc's malloc in the same process, then the engine alone
on tcmalloc in a new process. Sitting 2: the engine on tcmalloc first, then vLLM n-gram, in one process. Sitting 3: vLLM n-gram, then
the engine on tcmalloc, in one process. Sitting 4, a session later: as sitting 3. Sitting 5, after the re-anchoring
evidence changed (91d6dd5): as sitting 3. Sitting 6, after `auto` became prediction+lookup (51eec39): as
sitting 3, where qd-prediction named no drafter and so ran as `auto` (qd-auto: prediction+lookup, first in the process).
Sittings 7 and 8, after lookup's drafts began to follow the copy (e49074f): as sitting 3, and as sitting 2 with
prediction+lookup before the prediction. Sitting 9, at 90b8e13 (lookup continues the longest copy), on another CPU,
an AMD EPYC of family 26 (the others: family 25): as sitting 3, then vLLM with quickdraft's plugin (vllm-quickdraft,
prediction+lookup). Sitting 10, at 4b1485b on the family-26 EPYC: as sitting 3. Sitting 11, at 602df03 on the same
EPYC: as sitting 3. Sittings 12 and 13, at 91cc109 (the softmax kernel), the same EPYC: as sitting 3, and as sitting 2.

    python3 docs/results/2026-11-27-tcmalloc/sitting.py
"""
import csv
import statistics
from pathlib import Path

with open(Path(__file__).parent / "sitting.tsv", newline="") as f:
    rows = [{**r, "sitting": int(r["sitting"]), "seconds": float(r["seconds"]), "tokens": int(r["tokens"])}
            for r in csv.DictReader(f, delimiter="\t")]
for r in rows:  # the plugin's rows: "vllm" as an allocator, to be read beside the engine's
    if r["server"] == "vllm-quickdraft":
        r["server"], r["allocator"] = "quickdraft", "vllm"
for sitting in range(1, 14):
    vllm = {r["task"]: r for r in rows if r["sitting"] == sitting and r["server"] == "vllm-ngram"}
    for method in ("qd-prediction", "qd-auto", "qd-prediction+lookup", "vllm+qd-prediction+lookup"):
        runs = {a: {r["task"]: r for r in rows if r["sitting"] == sitting and r["server"] == "quickdraft"
                    and r["method"] == method and r["allocator"] == a} for a in ("system", "tcmalloc", "vllm")}
        if not any(runs.values()):
            continue
        for w in ("refactor", "apply"):
            keys = [k for k in vllm if (w == "apply") == k.startswith("apply")]
            for a, ours in runs.items():
                if not ours:
                    continue
                same = [vllm[k]["seconds"] / ours[k]["seconds"] for k in keys if abs(vllm[k]["tokens"] - ours[k]["tokens"]) <= 1]
                summed = sum(vllm[k]["seconds"] for k in keys) / sum(ours[k]["seconds"] for k in keys)
                print(f"sitting {sitting}: vLLM n-gram / {method} {'inside vLLM' if a == 'vllm' else 'on ' + a}, {w}: median {statistics.median(same):.2f}x over "
                      f"{len(same)} of {len(keys)} tasks, summed {summed:.2f}x, per task {[round(x, 2) for x in same]}")
            if runs["system"] and runs["tcmalloc"]:
                gain = [runs["system"][k]["seconds"] / runs["tcmalloc"][k]["seconds"] for k in keys]
                assert all(runs["system"][k]["tokens"] == runs["tcmalloc"][k]["tokens"] for k in keys)
                print(f"  {method}, {w}: seconds on glibc / on tcmalloc, median per task {statistics.median(gain):.3f}x")
