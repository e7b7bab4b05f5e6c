"""The lean pass and padded keys end to end: the README's edit, alternating runs in one process.

Configurations of one loaded runner (prefix reuse off, so every run prefills):
    lean+padded   what the load keeps where it gives the model forward's bits (lean.py with KeyBuffers)
    lean          the lean pass over transformers' cache as it is
    forward       neither: the model's own forward
Jobs: the file as prediction (up to 1024 tokens) and plain decoding (256 tokens). Every run of a job must
write the same tokens.

    .venv/bin/python docs/results/2026-11-26-lean-e2e/ab_lean_e2e.py --rounds 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import quickdraft
from quickdraft.prompts import edit_request

ROOT = Path(__file__).resolve().parents[3]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="qwen2.5-coder-0.5b")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    message, fenced = edit_request("Rename the function parse_line to parse_record and update its caller.",
                                   (ROOT / "examples/inventory.py").read_text(), "inventory.py")
    messages = [{"role": "user", "content": message}]
    gen = quickdraft.load(args.model, progress=False)
    runner, lean = gen.runner, gen.runner.lean
    assert lean is not None, "this load kept no lean pass"
    padded = lean.pad_keys
    configs = {"lean+padded": (lean, True), "lean": (lean, False), "forward": (None, False)}
    if not padded:
        del configs["lean+padded"]
    jobs = {"prediction": dict(drafter="prediction", prediction=fenced, max_new_tokens=1024),
            "plain": dict(drafter="none", max_new_tokens=256)}
    times = {(j, c): [] for j in jobs for c in configs}
    tokens = {j: set() for j in jobs}
    for r in range(args.rounds + 1):  # round 0 warms up
        for job, kw in jobs.items():
            for name, (l, pad) in configs.items():
                runner.lean = l
                if l is not None:
                    l.pad_keys = pad
                t0 = time.perf_counter()
                res = gen.generate(messages, prefix_reuse=False, **kw)
                dt = time.perf_counter() - t0
                tokens[job].add(tuple(res.token_ids))
                if r:
                    times[(job, name)].append(dt)
    rows = []
    for job in jobs:
        base = statistics.median(times[(job, "forward")])
        for name in configs:
            ts = times[(job, name)]
            rows.append({"job": job, "config": name, "seconds": [round(t, 3) for t in ts],
                         "median": round(statistics.median(ts), 3),
                         "forward_over_this": round(base / statistics.median(ts), 3),
                         "same_tokens": len(tokens[job]) == 1})
            print(json.dumps(rows[-1]), flush=True)


if __name__ == "__main__":
    main()
