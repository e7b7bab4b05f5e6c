"""Record qwen2.5-coder-0.5b's own greedy answer to refactor requests as line edits of the original file
(src/quickdraft/bench/apply_refactor_edits.jsonl, read by the apply_refactor workload).

The request is the refactor workload's (prompts.edit_request); the file as prediction, which gives the
same tokens as plain greedy decoding (quickdraft's exactness), only sooner. Smallest files first, until
--budget-s runs out (bf16 weights, the load's default on the project's CPU). Every answer is recorded;
one that is not a whole file (the model wrote only the moved function, or stopped at the token limit) as
edits null with why, so the next run does not redo it. The workload uses the refactor done by moving lines
(bench/apply.py move_method_out) for those.

    .venv/bin/python docs/results/2026-11-27-apply/make_refactor_edits.py --budget-s 540
"""

from __future__ import annotations

import argparse
import json
import time
from difflib import SequenceMatcher
from pathlib import Path

import quickdraft
from quickdraft.bench import apply, scoring, workloads
from quickdraft.errors import QuickdraftError


def whole_file(original: str, answer: str) -> bool:
    """The answer keeps most of the file (not just the function it moved)."""
    a, b = original.splitlines(), answer.splitlines()
    kept = sum(m.size for m in SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks())
    return kept >= 0.8 * len(a)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--budget-s", type=float, default=540)
    p.add_argument("--out", default=str(apply.REFACTOR_EDITS))
    args = p.parse_args()
    data = workloads.data_dir()
    out = Path(args.out)
    done = {e["task_id"] for e in apply._jsonl(out)} if out.is_file() else set()
    rows = {r["task_id"]: r for r in apply._jsonl(data / "aider_refactor" / "refactor_tasks.jsonl")}
    gen = quickdraft.load("qwen2.5-coder-0.5b")
    start = time.perf_counter()
    for task in workloads.refactor(data):
        if task.id in done:
            continue
        if time.perf_counter() - start > args.budget_s:
            break
        original = rows[task.id]["original_code"]
        budget = len(gen.tokenizer.encode(original, add_special_tokens=False)) + 256
        t = time.perf_counter()
        try:
            result = gen.generate(task.messages, prediction=task.prediction, drafter="prediction",
                                  max_new_tokens=budget)
        except QuickdraftError as e:  # a prompt longer than the model's context: recorded, so the next run goes on
            why = str(e)
            print(task.id, why, flush=True)
        else:
            answer = scoring.extract_code(result.text)
            why = ("stopped at the token limit" if result.finish_reason == "length"
                   else "no change" if answer.strip() == original.strip()
                   else "" if whole_file(original, answer) else "not a whole file")
            print(task.id, result.finish_reason, result.stats.completion_tokens, f"{time.perf_counter() - t:.1f} s",
                  why, flush=True)
        edits = None if why else apply.line_edits(original, answer if answer.endswith("\n") else answer + "\n")
        with open(args.out, "a") as f:
            f.write(json.dumps({"task_id": task.id, "model": "qwen2.5-coder-0.5b", "edits": edits, "skipped": why}) + "\n")


if __name__ == "__main__":
    main()
