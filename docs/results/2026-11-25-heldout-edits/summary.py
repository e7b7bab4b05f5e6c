"""Per-task end-to-end time ratios on the held-out edits (refactor and EditEval tasks 4-11), from the rows here.

    python3 docs/results/2026-11-25-heldout-edits/summary.py > docs/results/2026-11-25-heldout-edits/summary.txt

Ratio = the other tool's seconds for the task / quickdraft's seconds (above 1: quickdraft finishes sooner), for tasks
where both wrote the same number of tokens (within one: vLLM counts the end-of-turn token) (a run that stopped early is listed, not compared).
"""

import json
import statistics
from pathlib import Path

HERE = Path(__file__).parent


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def table() -> dict:
    """(workload, task, method) -> (seconds, tokens)."""
    t = {}
    for r in rows(HERE / "quickdraft-bench" / "runs.jsonl"):
        t[(r["workload"], r["task"], "bench:" + r["method"])] = (r["seconds"], r["completion_tokens"])
    for r in rows(HERE / "vllm" / "runs.jsonl"):
        t[(r["workload"], r["task"], ("vllm:" if r["engine"] == "vllm" else "script:") + r["method"])] = (r["seconds"], r["tokens"])
    for r in rows(HERE / "vllm-tuned" / "runs.jsonl"):  # vLLM on both cores with tcmalloc and Intel OpenMP preloaded
        t[(r["workload"], r["task"], "tuned:" + r["method"])] = (r["seconds"], r["tokens"])
    for r in rows(HERE / "stock-llamacpp" / "stock.jsonl"):
        t[(r["workload"], r["task"], "stock:" + r["method"])] = (r["total_s"], r["completion_tokens"])
    return t


def main() -> None:
    t = table()
    ours = ["bench:prediction", "script:qd-prediction", "vllm:vllm+qd-prediction", "tuned:vllm+qd-prediction"]
    others = ["vllm:vllm-ngram", "vllm:vllm+qd-prediction", "vllm:vllm-plain", "tuned:vllm-ngram", "tuned:vllm+qd-prediction",
              "tuned:vllm-plain", "bench:llamacpp-plain", "stock:stock-plain",
              "stock:stock-prompt-lookup", "bench:plain"]
    for workload in ("refactor", "edit_eval"):
        tasks = sorted({k[1] for k in t if k[0] == workload})
        print(f"## {workload} ({len(tasks)} tasks)")
        for mine in ours:
            for other in others:
                pairs = [(t[(workload, k, other)], t[(workload, k, mine)]) for k in tasks
                         if (workload, k, other) in t and (workload, k, mine) in t]
                if not pairs or other == mine:
                    continue
                same = [(o, m) for o, m in pairs if abs(o[1] - m[1]) <= 1]  # vLLM counts the end-of-turn token, quickdraft does not
                ratios = [o[0] / m[0] for o, m in same]
                print(f"{other} / {mine}: median {statistics.median(ratios):.2f}x [{min(ratios):.2f}-{max(ratios):.2f}], "
                      f"summed {sum(o[0] for o, _ in same) / sum(m[0] for _, m in same):.2f}x over {len(same)} tasks"
                      + (f"; {len(pairs) - len(same)} left out (token counts differ: "
                         + ", ".join(f"{o[1]} vs {m[1]}" for o, m in pairs if abs(o[1] - m[1]) > 1) + ")" if len(same) < len(pairs) else ""))
        print()


if __name__ == "__main__":
    main()
