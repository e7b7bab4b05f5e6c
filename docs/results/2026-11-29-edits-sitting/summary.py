"""Per-task end-to-end time ratios of issue 44's sitting at today's code (commands.sh), target passes before and after,
and decode time against prefill time for the well-predicted edits.

    python3 docs/results/2026-11-29-edits-sitting/summary.py > docs/results/2026-11-29-edits-sitting/summary.txt

Ratio = the other tool's seconds for the task / quickdraft's (its own engine, bf16, in vllm_bench.py's process on
tcmalloc; above 1: quickdraft finishes sooner), over tasks where both wrote the same number of tokens (within one: vLLM
counts the end-of-turn token); a task where they differ is listed, not compared. bench: quickdraft's own bench in its
own process (plain decoding, the exactness reference); before: the bench at f6181fc, before issue 44's drafting
changes. The apply workload's prediction is the merge the snippet describes.
"""

import json
import statistics
from pathlib import Path

HERE = Path(__file__).parent
WORKLOADS = ("refactor", "edit_eval", "apply_edit_eval")


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def table() -> dict:
    """(workload, task, tool:method) -> (seconds, tokens)."""
    t = {}
    for r in rows(HERE / "vllm" / "runs.jsonl"):
        t[(r["workload"], r["task"], ("vllm:" if r["engine"] == "vllm" else "quickdraft:") + r["method"])] = (
            r["seconds"], r["tokens"])
    for prefix, folder in (("bench:", "quickdraft-bench"), ("before:", "before")):
        for r in rows(HERE / folder / "runs.jsonl"):
            t[(r["workload"], r["task"], prefix + r["method"])] = (r["seconds"], r["completion_tokens"])
    for r in rows(HERE / "stock-llamacpp" / "stock.jsonl"):
        t[(r["workload"], r["task"], "stock:" + r["method"])] = (r["total_s"], r["completion_tokens"])
    return t


def ratios(t: dict, workload: str, mine: str, others: list[str]) -> None:
    tasks = sorted({k[1] for k in t if k[0] == workload})
    own = [t[(workload, k, mine)] for k in tasks if (workload, k, mine) in t]
    if not own:
        return
    print(f"## {workload} ({len(tasks)} tasks), against {mine}")
    print(f"{mine}: {sum(s for s, _ in own):.1f} s in all for {sum(n for _, n in own)} tokens over {len(own)} tasks")
    for other in others:
        pairs = [(t[(workload, k, other)], t[(workload, k, mine)]) for k in tasks
                 if (workload, k, other) in t and (workload, k, mine) in t]
        if not pairs:
            continue
        same = [(o, m) for o, m in pairs if abs(o[1] - m[1]) <= 1]
        line = f"{other} / {mine}: "
        if same:
            rs = [o[0] / m[0] for o, m in same]
            line += (f"median {statistics.median(rs):.2f}x [{min(rs):.2f}-{max(rs):.2f}], summed "
                     f"{sum(o[0] for o, _ in same) / sum(m[0] for _, m in same):.2f}x over {len(same)} tasks")
        if len(same) < len(pairs):
            line += (f"; {len(pairs) - len(same)} left out (token counts differ: "
                     + ", ".join(f"{o[1]} vs {m[1]}" for o, m in pairs if abs(o[1] - m[1]) > 1) + ")")
        print(line)
    print()


def passes() -> None:
    """Target passes per workload and method, before (f6181fc) and now, over the tasks both ran."""
    now = {(r["workload"], r["task"], r["method"]): r for r in rows(HERE / "quickdraft-bench" / "runs.jsonl")}
    old = {(r["workload"], r["task"], r["method"]): r for r in rows(HERE / "before" / "runs.jsonl")}
    print("## target passes, before (f6181fc) -> now, summed over the tasks both ran")
    for workload in WORKLOADS:
        for method in ("prediction", "prediction+lookup"):
            keys = [k for k in now if k[0] == workload and k[2] == method and k in old]
            if keys:
                b, a = sum(old[k]["target_passes"] for k in keys), sum(now[k]["target_passes"] for k in keys)
                sb, sa = sum(old[k]["seconds"] for k in keys), sum(now[k]["seconds"] for k in keys)
                print(f"{workload} {method}: passes {b} -> {a} ({100 * (a - b) / b:+.0f} %), seconds {sb:.1f} -> {sa:.1f} "
                      f"({100 * (sa - sb) / sb:+.0f} %), {len(keys)} tasks")
    print()


def exactness() -> None:
    rs = [r for folder, name in (("quickdraft-bench", "runs"), ("before", "runs"))
          for r in rows(HERE / folder / f"{name}.jsonl")]
    drafted = [r for r in rs if r["method"] != "plain" and r["engine"] == "quickdraft"]
    print(f"## exactness: {sum(r['exact'] is True for r in drafted)} of {len(drafted)} drafted quickdraft bench runs "
          "identical to plain decoding")
    print()


def decode_against_prefill() -> None:
    """Decode seconds over the prefill seconds of as many tokens (the task's own prefill, per prompt token, times
    the output's tokens), for runs with at least 90 % of the output from the prediction."""
    print("## decode / prefill of as many tokens, runs with >= 90 % of the output accepted from the prediction")
    for r in rows(HERE / "quickdraft-bench" / "runs.jsonl"):
        n, prompt = r["completion_tokens"], sum(r["prompt_tokens"])
        if r["method"].startswith("prediction") and n and r["accepted"] >= 0.9 * n:
            same = r["prefill_s"] * n / prompt
            print(f"{r['workload']}/{r['task'][:40]} {r['method']}: {n} tokens, {r['target_passes']} passes, decode "
                  f"{r['decode_s']:.2f} s, prefill of {n} tokens {same:.2f} s: {r['decode_s'] / same:.2f}x")
    print()


def main() -> None:
    t = table()
    others = ["vllm:vllm-ngram", "vllm:vllm+qd-prediction", "vllm:vllm+qd-prediction+lookup", "vllm:vllm-plain",
              "stock:stock-plain", "stock:stock-prompt-lookup", "bench:hf-prompt-lookup", "bench:plain",
              "bench:prediction", "bench:prediction+lookup", "before:prediction", "before:prediction+lookup"]
    for mine in ("quickdraft:qd-prediction", "quickdraft:qd-prediction+lookup"):
        for workload in WORKLOADS:
            ratios(t, workload, mine, [o for o in others + ["quickdraft:qd-prediction", "quickdraft:qd-prediction+lookup"]
                                       if o != mine])
    passes()
    exactness()
    decode_against_prefill()


if __name__ == "__main__":
    main()
