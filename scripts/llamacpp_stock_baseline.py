"""llama.cpp baselines on a stock llama-cpp-python build, for the same prompts as a `quickdraft bench` run.

When to run: beside a `quickdraft bench` run, whenever a comparison with stock llama.cpp is reported
(docs/benchmarks.md).

quickdraft's llama.cpp runner needs a build without llamafile (runners/llamacpp.py), and one process
can hold only one build, so the stock build (what `pip install llama-cpp-python` compiles, with its
default kernels) is measured in a second virtual environment, on prompt token ids written by the first:

    .venv/bin/python scripts/llamacpp_stock_baseline.py prompts --model qwen2.5-coder-0.5b \\
        --workloads refactor,summarization --limit 5 --out prompts.json
    python3 -m venv /tmp/stock && /tmp/stock/bin/pip install llama-cpp-python==0.3.36
    /tmp/stock/bin/python scripts/llamacpp_stock_baseline.py run --prompts prompts.json \\
        --max-new-tokens refactor=512,summarization=200 --out stock.jsonl

`run` imports nothing but llama_cpp, the standard library and quickdraft/bench/llamacpp_stock.py (put
on the path by itself, so quickdraft need not be installed there), which builds each `Llama` exactly as the
bench builds its baselines. Methods: plain greedy (Llama.generate) and llama-cpp-python's
LlamaPromptLookupDecoding(num_pred_tokens=10), as `quickdraft bench` runs them. On a build with llama.cpp's
AMX kernels both load without repacked weights (they crash there; docs/llamacpp.md); every row records
`stock_repack` and the CPU's model and flags.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "quickdraft"


def cmd_prompts(args: argparse.Namespace) -> None:
    from quickdraft import models
    from quickdraft.bench import workloads
    from quickdraft.runners.llamacpp import LlamaCppModel, LlamaCppTokenizer

    gguf = models.gguf_file(args.model, progress=False)
    tok = LlamaCppTokenizer(LlamaCppModel(gguf))
    data = workloads.data_dir(args.data)
    rows = []
    for name in workloads.select(args.workloads):
        for task in list(workloads.WORKLOADS[name].load(data, args.skip + args.limit))[args.skip :]:
            rows.append({"workload": name, "task": task.id, "prompt_ids": tok.encode_chat(list(task.messages))})
    json.dump({"model": args.model, "gguf": str(gguf), "eos": sorted(tok.eos_token_ids), "prompts": rows},
              open(args.out, "w"))
    print(f"wrote {len(rows)} prompts to {args.out}")


def cmd_run(args: argparse.Namespace) -> None:
    sys.path[:0] = [str(SRC), str(SRC / "bench")]  # stdlib-only modules of quickdraft, not the package
    import cpu
    import llamacpp_stock as stock

    stock_llama = stock.stock_llama
    doc = json.load(open(args.prompts))
    limits = dict(kv.split("=") for kv in args.max_new_tokens.split(","))
    eos = set(doc["eos"])
    threads = len(os.sched_getaffinity(0))
    builds = {  # built as the bench builds its llama.cpp baselines (AMX repack off where it crashes)
        "stock-plain": lambda: stock_llama(doc["gguf"], n_ctx=args.n_ctx, threads=threads),
        "stock-prompt-lookup": lambda: stock_llama(doc["gguf"], n_ctx=args.n_ctx, threads=threads, num_pred_tokens=10),
    }
    unknown = sorted(set(args.methods.split(",")) - set(builds))
    if unknown:
        sys.exit(f"unknown method(s) {', '.join(unknown)}: choose from {', '.join(builds)}")
    engines = {m: builds[m]() for m in args.methods.split(",")}
    info = __import__("llama_cpp").llama_print_system_info().decode()
    with open(args.out, "a") as sink:
        for repeat in range(args.repeats):
            for row in doc["prompts"]:
                for method, llm in engines.items():  # interleaved: each task runs every method in turn
                    n = int(limits[row["workload"]])
                    out: list[int] = []
                    t0 = time.perf_counter()
                    first = None
                    llm.reset()  # generate() would keep the longest prefix it cached (a repeat's whole prompt): prefill
                    for t in llm.generate(row["prompt_ids"], temp=0.0, top_k=1, top_p=1.0, min_p=0.0,
                                          repeat_penalty=1.0, reset=True):
                        first = first or time.perf_counter()
                        if t in eos:
                            break
                        out.append(t)
                        if len(out) >= n:
                            break
                    total = time.perf_counter() - t0
                    rec = {"workload": row["workload"], "task": row["task"], "method": method, "repeat": repeat,
                           "prompt_tokens": len(row["prompt_ids"]), "completion_tokens": len(out),
                           "prefill_s": round(first - t0, 3), "total_s": round(total, 3),
                           "tokens_per_s": round(len(out) / total, 3), "output_tokens": out, "system_info": info,
                           "stock_repack": stock.repack_allowed(info), "cpu": cpu.cpu_info()}
                    sink.write(json.dumps(rec) + "\n")
                    sink.flush()
                    print(f"{row['workload']}/{row['task']} {method}: {len(out)} tokens, {total:.1f} s "
                          f"({rec['prefill_s']:.1f} s to the first token)", file=sys.stderr)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    a = sub.add_parser("prompts", help="write the prompt token ids of benchmark tasks (needs quickdraft)")
    a.add_argument("--model", default="qwen2.5-coder-0.5b")
    a.add_argument("--workloads", default="refactor,summarization")
    a.add_argument("--limit", type=int, default=5)
    a.add_argument("--skip", type=int, default=0, help="tasks left out at the start of each workload (as bench --skip)")
    a.add_argument("--data", default=None)
    a.add_argument("--out", required=True)
    a.set_defaults(func=cmd_prompts)
    b = sub.add_parser("run", help="run stock llama.cpp on them (needs only llama-cpp-python)")
    b.add_argument("--prompts", required=True)
    b.add_argument("--max-new-tokens", required=True, help="per workload, e.g. refactor=512,summarization=200")
    b.add_argument("--n-ctx", type=int, default=16384)
    b.add_argument("--repeats", type=int, default=1)
    b.add_argument("--methods", default="stock-plain,stock-prompt-lookup")
    b.add_argument("--out", required=True)
    b.set_defaults(func=cmd_run)
    args = p.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
