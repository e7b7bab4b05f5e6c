"""Per-task end-to-end time ratios on the held-out edits (refactor and EditEval tasks 4-11), run again on 2026-11-26
with the bf16 prefill in blocks, every tool in one sitting on one machine (commands.sh).

    python3 docs/results/2026-11-26-heldout-again/summary.py > docs/results/2026-11-26-heldout-again/summary.txt

Ratio = the other tool's seconds for the task / quickdraft prediction's seconds (quickdraft's own engine, bf16, in
vllm_bench.py's process; above 1: quickdraft finishes sooner), over tasks where both wrote the same number of tokens
(within one: vLLM counts the end-of-turn token); a task where they differ is listed, not compared. bench: rows are
quickdraft's own bench in its own process (plain decoding, and a second measurement of the prediction runs).
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
    for r in rows(HERE / "vllm" / "runs.jsonl"):
        t[(r["workload"], r["task"], ("vllm:" if r["engine"] == "vllm" else "quickdraft:") + r["method"])] = (
            r["seconds"], r["tokens"])
    for r in rows(HERE / "quickdraft-bench" / "runs.jsonl"):
        t[(r["workload"], r["task"], "bench:" + r["method"])] = (r["seconds"], r["completion_tokens"])
    for r in rows(HERE / "stock-llamacpp" / "stock.jsonl"):
        t[(r["workload"], r["task"], "stock:" + r["method"])] = (r["total_s"], r["completion_tokens"])
    return t


def main() -> None:
    t = table()
    mine = "quickdraft:qd-prediction"
    others = ["vllm:vllm-ngram", "vllm:vllm+qd-prediction", "vllm:vllm-plain", "stock:stock-plain",
              "stock:stock-prompt-lookup", "quickdraft:qd-lookup", "bench:plain", "bench:prediction"]
    for workload in ("refactor", "edit_eval"):
        tasks = sorted({k[1] for k in t if k[0] == workload})
        print(f"## {workload} ({len(tasks)} tasks)")
        own = [t[(workload, k, mine)] for k in tasks if (workload, k, mine) in t]
        print(f"{mine}: {sum(s for s, _ in own):.1f} s in all for {sum(n for _, n in own)} tokens over {len(own)} tasks")
        for other in others:
            pairs = [(t[(workload, k, other)], t[(workload, k, mine)]) for k in tasks
                     if (workload, k, other) in t and (workload, k, mine) in t]
            if not pairs:
                continue
            same = [(o, m) for o, m in pairs if abs(o[1] - m[1]) <= 1]
            ratios = [o[0] / m[0] for o, m in same]
            line = f"{other} / {mine}: "
            if ratios:
                line += (f"median {statistics.median(ratios):.2f}x [{min(ratios):.2f}-{max(ratios):.2f}], summed "
                         f"{sum(o[0] for o, _ in same) / sum(m[0] for _, m in same):.2f}x over {len(same)} tasks")
            if len(same) < len(pairs):
                line += (f"; {len(pairs) - len(same)} left out (token counts differ: "
                         + ", ".join(f"{o[1]} vs {m[1]}" for o, m in pairs if abs(o[1] - m[1]) > 1) + ")")
            print(line)
        print()


if __name__ == "__main__":
    main()
