"""What prefix reuse saves (runners/hf.HFRunner): a second request that starts like the one before it.

Two scenarios on held-out-style tasks, each request pair run twice in one process, with reuse off and on (the order
alternating from task to task), the second request timed end to end and its output compared:

- edit: a refactor task's file with its own instruction (the file as prediction), then the same file with
  another instruction (--second-instruction). The file comes first in the prompt (prompts.edit_request), so
  the second request shares all of the file.
- rag: a Spec-Bench RAG question over its passages, then another question (--second-question) over the same
  passages.
- turns: as edit, with another task's first request between the two (two clients taking turns on one server).

    .venv/bin/python docs/results/2026-11-26-prefix-reuse/prefix_reuse.py --model qwen2.5-coder-0.5b --skip 3 --limit 4 --max-new-tokens 512

Prints one line per task and the medians; the CPU comes first.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import quickdraft
from quickdraft.bench.workloads import data_dir
from quickdraft.cpu import describe
from quickdraft.prompts import edit_request


def edit_pairs(data: Path, skip: int, limit: int, second: str) -> list[tuple[str, list, list, str]]:
    rows = [json.loads(line) for line in open(data / "aider_refactor" / "refactor_tasks.jsonl", encoding="utf-8")]
    rows.sort(key=lambda r: r["original_chars"])  # as the bench's refactor workload orders them
    pairs = []
    for r in rows[skip : skip + limit]:
        first, prediction = edit_request(r["instruction"], r["original_code"], r["filename"])
        again, _ = edit_request(second, r["original_code"], r["filename"])
        pairs.append((r["task_id"], [{"role": "user", "content": first}], [{"role": "user", "content": again}], prediction))
    return pairs


def rag_pairs(data: Path, skip: int, limit: int, second: str) -> list[tuple[str, list, list, None]]:
    rows = [json.loads(line) for line in open(data / "spec_bench" / "question.jsonl", encoding="utf-8")]
    rows = [r for r in rows if r["category"] == "rag"][skip : skip + limit]
    pairs = []
    for r in rows:
        text = r["turns"][0]
        passages = text[: text.rstrip().rfind("\n") + 1]  # the passages; the question is the last line
        pairs.append((f"rag-{r['question_id']}", [{"role": "user", "content": text}],
                      [{"role": "user", "content": passages + second}], None))
    return pairs


def run_pair(gen, first, second, prediction, reuse: bool, max_new_tokens: int, between=None):
    gen.runner.reuse_prefix = reuse
    gen.generate(first, prediction=prediction, max_new_tokens=max_new_tokens)
    if between is not None:  # another client's request: (messages, prediction)
        gen.generate(between[0], prediction=between[1], max_new_tokens=max_new_tokens)
    t = time.perf_counter()
    result = gen.generate(second, prediction=prediction, max_new_tokens=max_new_tokens)
    return time.perf_counter() - t, result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--runner", default="transformers", choices=["transformers", "llama.cpp"])
    ap.add_argument("--scenarios", default="edit,rag")
    ap.add_argument("--skip", type=int, default=3, help="tasks left out at the start (held-out: those after them)")
    ap.add_argument("--limit", type=int, default=4)
    ap.add_argument("--max-new-tokens", type=int, default=512)
    ap.add_argument("--second-instruction", default="Add a one-line docstring to every function that has none.")
    ap.add_argument("--second-question", default="Summarize the passages above in two sentences.")
    ap.add_argument("--data", default=None)
    args = ap.parse_args()
    data = data_dir(args.data)
    gen = quickdraft.load(args.model, runner=args.runner, dtype=args.dtype, progress=False)
    runner = gen.runner
    chunk = getattr(runner, "prefill_chunk", None) or getattr(runner, "n_batch", None)
    print(f"CPU: {describe()}; {args.model} on {args.runner} ({getattr(runner, 'dtype', 'its GGUF')}); prefill chunk "
          f"{chunk}; {args.max_new_tokens} new tokens at most\n")
    gen.generate("warm up", drafter="none", max_new_tokens=4)
    for scenario in args.scenarios.split(","):
        make = {"edit": lambda: edit_pairs(data, args.skip, args.limit, args.second_instruction),
                "turns": lambda: edit_pairs(data, args.skip, args.limit, args.second_instruction),
                "rag": lambda: rag_pairs(data, args.skip, args.limit, args.second_question)}[scenario]
        print(f"## {scenario}\n")
        print("| task | prompt tokens | cached | prefill off / on | second request off / on | speedup | same output |")
        print("|---|---|---|---|---|---|---|")
        speedups = []
        pairs = make()
        for i, (task, first, second, prediction) in enumerate(pairs):
            other = pairs[(i + 1) % len(pairs)]
            between = (other[1], other[3]) if scenario == "turns" else None
            runs = {}
            for reuse in ((False, True) if i % 2 == 0 else (True, False)):
                runs[reuse] = run_pair(gen, first, second, prediction, reuse, args.max_new_tokens, between)
            (off_s, off), (on_s, on) = runs[False], runs[True]
            speedups.append(off_s / on_s)
            print(f"| {task} | {on.stats.prompt_tokens} | {on.stats.cached_tokens} | {off.stats.prefill_s:.2f} / "
                  f"{on.stats.prefill_s:.2f} s | {off_s:.2f} / {on_s:.2f} s | {off_s / on_s:.2f}x | "
                  f"{'yes' if on.token_ids == off.token_ids else 'NO'} |", flush=True)
        print(f"\nmedian speedup of the second request: {statistics.median(speedups):.2f}x "
              f"[{min(speedups):.2f}-{max(speedups):.2f}]\n")


if __name__ == "__main__":
    main()
