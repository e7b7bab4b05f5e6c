"""End to end on held-out refactor tasks (4-11, as the sitting), the softmax kernel against torch's softmax in one
process, A B B A per task: prediction+lookup (`auto`), 512 new tokens, greedy, prefix reuse off. Prints per task the
seconds (prefill + decode, median of each side's two runs), and whether each side's outputs agreed.

    LD_PRELOAD=$T .venv/bin/python docs/results/2026-11-29-softmax-kernel/ab_refactors.py
"""
import statistics

import quickdraft
from quickdraft.bench import workloads as W
from quickdraft.runners import native

kernel = native._library
sides = {"torch": lambda: None, "kernel": kernel}
tasks = list(W.refactor(W.data_dir("../shared/data"), 11))[3:]
gen = quickdraft.load("qwen2.5-coder-0.5b")
gen.runner.reuse_prefix = False
gen.generate(tasks[0].messages, max_new_tokens=8, prediction=tasks[0].prediction)  # warm
total = {name: {"prefill": 0.0, "decode": 0.0} for name in sides}
for task in tasks:
    runs = {name: [] for name in sides}
    for name in ("torch", "kernel", "kernel", "torch"):
        native._library = sides[name]
        r = gen.generate(task.messages, max_new_tokens=512, prediction=task.prediction)
        runs[name].append((r.stats.prefill_s, r.stats.decode_s, tuple(r.token_ids), r.stats.target_passes))
    line = [task.id[:28]]
    for name, rs in runs.items():
        p, d = statistics.median(x[0] for x in rs), statistics.median(x[1] for x in rs)
        total[name]["prefill"] += p
        total[name]["decode"] += d
        line.append(f"{name} {p:.2f}+{d:.2f} s ({rs[0][3]} passes, {len(rs[0][2])} tokens, "
                    f"{'same' if rs[0][2] == rs[1][2] else 'DIFFER'})")
    line.append("outputs of the two sides " + ("equal" if runs["torch"][0][2] == runs["kernel"][0][2] else "differ"))
    print(" | ".join(line), flush=True)
native._library = kernel
for name, t in total.items():
    print(name, {k: round(v, 2) for k, v in t.items()}, "sum", round(sum(t.values()), 2))
print("kernel/torch end to end", round(sum(total["kernel"].values()) / sum(total["torch"].values()), 3))
