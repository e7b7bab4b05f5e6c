"""The transformers runner's attention at two revisions, on the real model, passes alternating in one process.

Loads runners/attention.py as it was at --before (a git revision) beside the working tree's, registers the old
grouped attention under another name, and for each (cached tokens, pass size) times passes with one and then the
other on the same loaded model (bf16, as `quickdraft.load` gives it), checking that both give the same logits
bit for bit.

    .venv/bin/python docs/results/2026-11-26-verify-attention/ab_attention.py --before 4fc9e06
    .venv/bin/python docs/results/2026-11-26-verify-attention/ab_attention.py --before 4fc9e06 --refactors 3:5   # end to end, refactor tasks 4-5

--refactors SKIP:END: instead of single passes, whole edits of the refactor set (tasks SKIP+1..END, the file as
prediction, 512 new tokens), each run twice with either attention in turn: seconds in all, decoding and prefill,
and whether every run wrote the same tokens.

Timings depend on the machine: its CPU is printed first.
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import torch
from transformers import AttentionInterface, AttentionMaskInterface
from transformers.masking_utils import eager_mask

import quickdraft
from quickdraft.cpu import describe
from quickdraft.runners import attention

BEFORE = "quickdraft_grouped_before"


def load_before(revision: str):
    source = subprocess.run(["git", "show", f"{revision}:src/quickdraft/runners/attention.py"], check=True,
                            capture_output=True, text=True, cwd=Path(__file__).parent).stdout
    path = Path(tempfile.mkdtemp()) / "attention_before.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("attention_before", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", required=True, help="git revision of the attention to compare with")
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--cases", default="2000x1,2000x32,800x16,4000x32", help="CACHEDxPASS,...")
    ap.add_argument("--reps", type=int, default=8)
    ap.add_argument("--refactors", help="SKIP:END: end to end on refactor tasks SKIP+1..END instead")
    args = ap.parse_args()
    before = load_before(args.before)
    AttentionInterface.register(BEFORE, before.grouped_attention)
    AttentionMaskInterface.register(BEFORE, eager_mask)
    gen = quickdraft.load(args.model, dtype="bf16", progress=False)
    gen.runner.reuse_prefix = False  # each run of a task prefills its whole prompt, as the first one does
    runner = gen.runner
    print(f"CPU: {describe()}; torch {torch.__version__}, {torch.get_num_threads()} threads; {args.model} bf16, "
          f"row_invariant {runner.row_invariant}; attention at {args.before} against the working tree")
    if args.refactors:
        return end_to_end(gen, args)
    rng = random.Random(0)
    for case in args.cases.split(","):
        cached, n = map(int, case.split("x"))
        context = [rng.randrange(runner.vocab_size) for _ in range(cached)]
        runner.reset()
        runner.prefill(context)
        seconds: dict[str, list[float]] = {"before": [], "after": []}
        for _ in range(args.reps):
            tokens = [rng.randrange(runner.vocab_size) for _ in range(n)]
            logits = {}
            for name, impl in (("before", BEFORE), ("after", attention.NAME)):
                runner.model.set_attn_implementation(impl)
                t = time.perf_counter()
                logits[name] = runner.forward(tokens)  # [n, vocab]
                seconds[name].append(time.perf_counter() - t)
                runner.rollback(cached)
            if not torch.equal(logits["before"], logits["after"]):
                raise SystemExit(f"{cached} cached, {n}-token pass: the logits differ")
        b, a = statistics.median(seconds["before"]), statistics.median(seconds["after"])
        print(f"{cached} cached, {n}-token pass: before {b * 1e3:.1f} ms, after {a * 1e3:.1f} ms ({b / a:.2f}x), "
              f"logits identical ({args.reps} passes each)", flush=True)
    runner.model.set_attn_implementation(attention.NAME)


def end_to_end(gen, args) -> None:
    from quickdraft.bench import workloads as W

    skip, end = map(int, args.refactors.split(":"))
    model = gen.runner.model
    edits_alternating(gen, list(W.WORKLOADS["refactor"].load(W.data_dir(), end))[skip:],
                      {"before": lambda: model.set_attn_implementation(BEFORE),
                       "after": lambda: model.set_attn_implementation(attention.NAME)})
    model.set_attn_implementation(attention.NAME)


def edits_alternating(gen, tasks, variants: dict) -> None:
    """Whole edits (the file as prediction, 512 new tokens), each task run twice with every variant in turn
    (variants: name -> a function that switches the loaded `gen` to it): seconds in all, decoding and prefill, and
    whether every run of a task wrote the same tokens. Also docs/results/2026-11-26-prefill-blocks/ab_prefill.py's."""
    for task in tasks:
        outputs = []
        for _ in range(2):
            for name, switch in variants.items():
                switch()
                t = time.perf_counter()
                res = gen.generate(task.messages, prediction=task.prediction, max_new_tokens=512)
                s = res.stats
                outputs.append(res.token_ids)
                print(f"{task.id} {name}: {time.perf_counter() - t:.1f} s, decoding {s.decode_s:.1f} s, prefill "
                      f"{s.prefill_s:.1f} s, {s.target_passes} passes, {len(res.token_ids)} tokens, {s.prompt_tokens} "
                      "prompt tokens", flush=True)
        print(f"{task.id}: the same tokens every run: {all(o == outputs[0] for o in outputs)}")


if __name__ == "__main__":
    main()
