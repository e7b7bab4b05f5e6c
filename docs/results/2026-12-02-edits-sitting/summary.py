"""Per-task end-to-end time ratios of the held-out edits sitting (commands.sh), and whether each tool's drafted
output was its own plain output.

    python3 docs/results/2026-12-02-edits-sitting/summary.py > docs/results/2026-12-02-edits-sitting/summary.txt

Ratio = the other tool's seconds for the task / quickdraft's (its own engine, bf16, in vllm_bench.py's process on
tcmalloc; above 1: quickdraft finishes sooner), over tasks where both wrote the same number of tokens (within one: vLLM
counts the end-of-turn token); a task where they differ is listed, not compared. bench: quickdraft's own bench in its
own process (quickdraft's plain decoding, the exactness reference, and transformers as it loads the model). The apply
workload's prediction is the merge the snippet describes.
"""

import importlib.util
from pathlib import Path

HERE = Path(__file__).parent
WORKLOADS = ("refactor", "edit_eval", "apply_edit_eval")


def _earlier():  # the 2026-11-29 sitting's summary.py: the same rows reader and per-task ratios
    spec = importlib.util.spec_from_file_location("earlier", HERE.parent / "2026-11-29-edits-sitting" / "summary.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_EARLIER = _earlier()
rows, ratios = _EARLIER.rows, _EARLIER.ratios


def table() -> dict:
    """(workload, task, tool:method) -> (seconds, tokens)."""
    t = {}
    for r in rows(HERE / "vllm" / "runs.jsonl"):
        t[(r["workload"], r["task"], ("vllm:" if r["engine"] == "vllm" else "quickdraft:") + r["method"])] = (
            r["seconds"], r["tokens"])
    for r in rows(HERE / "quickdraft-bench" / "runs.jsonl"):
        t[(r["workload"], r["task"], "bench:" + r["method"])] = (r["seconds"], r["completion_tokens"])
    for r in rows(HERE / "stock-llamacpp" / "stock.jsonl"):
        t[(r["workload"], r["task"], "stock:" + r["method"])] = (r["total_s"], r["completion_tokens"])
    return t


def exactness() -> None:
    """Each bench method's outputs against its own engine's plain output (quickdraft's against plain, transformers'
    against hf-plain), from the rows' `exact` flags."""
    print("## exactness: runs identical to their own engine's plain decoding")
    by_method: dict[str, list] = {}
    for r in rows(HERE / "quickdraft-bench" / "runs.jsonl"):
        if r["method"] not in ("plain", "hf-plain"):
            by_method.setdefault(r["method"], []).append(r["exact"])
    for method, flags in by_method.items():
        print(f"{method}: {sum(f is True for f in flags)} of {len(flags)}")
    print()


def main() -> None:
    t = table()
    others = ["vllm:vllm-ngram", "vllm:vllm+qd-prediction", "vllm:vllm+qd-prediction+lookup", "vllm:vllm-plain",
              "stock:stock-plain", "stock:stock-prompt-lookup", "bench:hf-prompt-lookup", "bench:hf-plain",
              "bench:plain", "bench:prediction", "bench:prediction+lookup"]
    for mine in ("quickdraft:qd-prediction+lookup", "quickdraft:qd-prediction"):
        for workload in WORKLOADS:
            ratios(t, workload, mine, [o for o in others + ["quickdraft:qd-prediction", "quickdraft:qd-prediction+lookup"]
                                       if o != mine])
    for workload in WORKLOADS:  # the two engines' plain decoding
        ratios(t, workload, "bench:plain", ["bench:hf-plain", "vllm:vllm-plain", "stock:stock-plain"])
    exactness()


if __name__ == "__main__":
    main()
