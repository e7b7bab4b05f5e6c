"""Measure the engine core on real tasks, side by side in one process, on the same loaded weights.

  refactor:       plain greedy vs predictions (default policy, openai policy) on Aider refactor tasks
  summarization:  plain greedy vs prompt lookup vs transformers' generate (plain, prompt_lookup_num_tokens=10)

Usage: .venv/bin/python scripts/measure_engine.py [--model qwen2.5-coder-0.5b] [--tasks 5]
         [--max-new-tokens 512] [--which refactor,summarization] [--out runs.jsonl]
Prints one line per run and a summary; every run is also written as JSON to --out.
"""

from __future__ import annotations

import argparse
import difflib
import json
import statistics
import time

import torch

import quickdraft
from quickdraft.bench import workloads


def hf_generate(gen, ids, max_new, eos, **extra):
    model = gen.runner.model
    x = torch.tensor([ids])
    t0 = time.perf_counter()
    with torch.inference_mode():
        out = model.generate(x, attention_mask=torch.ones_like(x), do_sample=False, max_new_tokens=max_new,
                             eos_token_id=sorted(eos), pad_token_id=sorted(eos)[0], **extra)
    dt = time.perf_counter() - t0
    toks = out[0, len(ids):].tolist()
    while toks and toks[-1] in eos:  # generate() keeps the EOS; quickdraft does not
        toks.pop()
    return toks, dt


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--tasks", type=int, default=5)
    ap.add_argument("--max-new-tokens", type=int, default=512)
    ap.add_argument("--which", default="refactor,summarization")
    ap.add_argument("--out", default="measure_engine.jsonl")
    args = ap.parse_args()

    gen = quickdraft.load(args.model)
    data = workloads.data_dir()
    gen.generate("warm up", drafter="none", max_new_tokens=4)
    eos = gen.tokenizer.eos_token_ids
    rows = []
    out = open(args.out, "a")

    def record(workload, task, method, tokens, plain_tokens, seconds, stats=None):
        row = {"workload": workload, "task": task, "method": method, "tokens": len(tokens),
               "seconds": round(seconds, 3), "tok_s": round(len(tokens) / seconds, 3),
               "identical": tokens == plain_tokens, "stats": stats.as_dict() if stats else None}
        rows.append(row)
        out.write(json.dumps(row) + "\n")
        out.flush()
        s = stats
        extra = f" acc {s.accepted_prediction_tokens} rej {s.rejected_prediction_tokens} passes {s.target_passes}" if s else ""
        print(f"{workload:13} {task[:34]:34} {method:18} {len(tokens):4} tok {seconds:7.2f} s "
              f"{len(tokens)/seconds:6.2f} tok/s identical={tokens == plain_tokens}{extra}", flush=True)

    def ours(task, **options):
        r = gen.generate(task.messages, max_new_tokens=args.max_new_tokens, **options)
        if task.prediction is not None and options.get("drafter") == "none":  # did the model really edit?
            diff = difflib.unified_diff(task.prediction.splitlines(), r.text.splitlines(), lineterm="", n=0)
            changed = sum(1 for d in diff if d[:1] in "+-" and not d.startswith(("+++", "---")))
            print(f"  {task.id}: output differs from the prediction in {changed} line(s) (+/-)", flush=True)
        return r.token_ids, r.stats.prefill_s + r.stats.decode_s, r.stats

    which = args.which.split(",")
    if "refactor" in which:
        for task in workloads.refactor(data, args.tasks):
            plain, t, s = ours(task, drafter="none")
            record("refactor", task.id, "plain", plain, plain, t, s)
            for name, opts in [("prediction", dict(drafter="prediction")),
                               ("openai-policy", dict(drafter="prediction", policy="openai"))]:
                toks, t, s = ours(task, prediction=task.prediction, **opts)
                record("refactor", task.id, name, toks, plain, t, s)
    if "summarization" in which:
        for task in workloads.spec_bench(data, "summarization", args.tasks):
            plain, t, s = ours(task, drafter="none")
            record("summarization", task.id, "plain", plain, plain, t, s)
            toks, t, s = ours(task, drafter="lookup")
            record("summarization", task.id, "lookup", toks, plain, t, s)
            ids = gen.encode_prompt(task.messages)
            toks, t = hf_generate(gen, ids, args.max_new_tokens, eos)
            record("summarization", task.id, "hf-plain", toks, plain, t)
            toks, t = hf_generate(gen, ids, args.max_new_tokens, eos, prompt_lookup_num_tokens=10)
            record("summarization", task.id, "hf-prompt-lookup", toks, plain, t)

    print("\nsummary (end-to-end time including prefill; speedup = plain time / method time, same tokens)")
    by = {}
    for r in rows:
        by.setdefault((r["workload"], r["method"]), []).append(r)
    for (w, m), rs in by.items():
        plain = {r["task"]: r["seconds"] for r in rows if r["workload"] == w and r["method"] == "plain"}
        speed = [plain[r["task"]] / r["seconds"] for r in rs]
        tot_tok, tot_s = sum(r["tokens"] for r in rs), sum(r["seconds"] for r in rs)
        print(f"{w:13} {m:18} {tot_tok/tot_s:6.2f} tok/s  speedup median {statistics.median(speed):.2f}x "
              f"(min {min(speed):.2f}, max {max(speed):.2f})  identical {sum(r['identical'] for r in rs)}/{len(rs)}")


if __name__ == "__main__":
    main()
