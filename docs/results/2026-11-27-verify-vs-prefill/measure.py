"""Decode time of well-predicted edits against prefill of the same tokens at the same positions.

For each task: quickdraft generates with the file as prediction (decode_s: the verify passes), then the same
prompt is prefilled again and the tokens those passes read (the prompt's last token and the output but its last)
are prefilled after it, in the runner's prefill passes. Also printed: the prompt's own prefill time per token times
as many tokens (the measure of docs/results/2026-11-29-edits-sitting/summary.py). Repeats alternate the two.

    .venv/bin/python docs/results/2026-11-27-verify-vs-prefill/measure.py --workload refactor --skip 4 --limit 8
"""

from __future__ import annotations

import argparse
import statistics
import time

import quickdraft
from quickdraft.bench import workloads
from quickdraft.cpu import describe


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--workload", default="refactor")
    p.add_argument("--skip", type=int, default=4)
    p.add_argument("--limit", type=int, default=8)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--max-new-tokens", type=int, default=512)
    args = p.parse_args()
    tasks = list(workloads.WORKLOADS[args.workload].load(workloads.data_dir(), args.skip + args.limit))[args.skip:]
    gen = quickdraft.load("qwen2.5-coder-0.5b", progress=False)
    runner = gen.runner
    runner.reuse_prefix = False
    gen.generate(tasks[0].messages, drafter="none", max_new_tokens=8)
    print(describe())
    print("task | tokens | from prediction | passes | decode s | prefill of the same tokens s | ratio | prompt prefill "
          "per token x tokens s | ratio")
    for task in tasks:
        decode, same, prompt_rate = [], [], []
        for _ in range(args.repeats):
            res = gen.generate(task.messages, prediction=task.prediction, max_new_tokens=args.max_new_tokens)
            s = res.stats
            read = [res.prompt_token_ids[-1], *res.token_ids[:-1]]  # what the verify passes added to the cache
            runner.reset()
            runner.prefill(res.prompt_token_ids[:-1])
            t = time.perf_counter()
            runner.prefill(read)
            same.append(time.perf_counter() - t)
            runner.reset()
            decode.append(s.decode_s)
            prompt_rate.append(s.prefill_s / (s.prompt_tokens - 1) * len(read))
        d, f, q = statistics.median(decode), statistics.median(same), statistics.median(prompt_rate)
        kept = s.accepted_prediction_tokens / max(1, s.completion_tokens)
        print(f"{task.id} | {s.completion_tokens} | {kept:.0%} | {s.target_passes} | {d:.2f} | {f:.2f} | {d / f:.2f} | "
              f"{q:.2f} | {d / q:.2f}", flush=True)


if __name__ == "__main__":
    main()
