"""One process of the allocator A/B: the tasks' prefill and decode seconds on whatever allocator the process runs on.
Run it alternately with and without tcmalloc preloaded (the library, unlike the CLI, does not start again on it):

    T=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4
    for i in 1 2; do .venv/bin/python docs/results/2026-11-27-tcmalloc/ab.py refactor 12 15 2
                     LD_PRELOAD=$T .venv/bin/python docs/results/2026-11-27-tcmalloc/ab.py refactor 12 15 2; done
    DR=prediction+lookup ... ab.py apply_edit_eval 12 24 1

Arguments: workload, first and end task index (tasks no held-out run uses), rounds over the tasks in the process.
"""
import os
import sys

import quickdraft
from quickdraft.bench import workloads
from quickdraft.cpu import allocator

wl, lo, hi, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
drafter = os.environ.get("DR", "prediction")
tasks = list(workloads.WORKLOADS[wl].load(workloads.data_dir(), hi))[lo:hi]
gen = quickdraft.load("qwen2.5-coder-0.5b", progress=False)
gen.runner.reuse_prefix = False  # every request pays its own prefill
gen.generate(tasks[0].messages, drafter="none", max_new_tokens=4)
for r in range(rounds):
    prefill = decode = 0.0
    for t in tasks:
        s = gen.generate(t.messages, prediction=t.prediction, max_new_tokens=512, drafter=drafter).stats
        prefill, decode = prefill + s.prefill_s, decode + s.decode_s
    print(allocator(), drafter, wl, f"tasks {lo}-{hi - 1}", "round", r, "prefill", round(prefill, 2), "decode",
          round(decode, 2), flush=True)
