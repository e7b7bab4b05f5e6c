"""`auto` beside a prediction, before (the prediction alone) and after (prediction+lookup): per held-out task, both
drafters in the order A B B A, decode seconds and target passes (means of two), outputs asserted identical.

    LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4 \
      .venv/bin/python docs/results/2026-11-27-auto-default/ab_auto.py apply_edit_eval 4 12   # also edit_eval 4 8, refactor 4 8
"""
import sys

import quickdraft
from quickdraft.bench import workloads
from quickdraft.cpu import describe
w, skip, limit = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
tasks = list(workloads.WORKLOADS[w].load(workloads.data_dir(), skip + limit))[skip:]
gen = quickdraft.load("qwen2.5-coder-0.5b", progress=False)
gen.runner.reuse_prefix = False
gen.generate(tasks[0].messages, drafter="none", max_new_tokens=8)
print(describe(), w, f"tasks {skip}..{skip + limit - 1}", flush=True)
tot = {"prediction": [0.0, 0], "prediction+lookup": [0.0, 0]}
for t in tasks:
    res = {}
    for d in ("prediction", "prediction+lookup", "prediction+lookup", "prediction"):
        r = gen.generate(t.messages, prediction=t.prediction, drafter=d, max_new_tokens=512)
        res.setdefault(d, []).append(r)
    a, b = res["prediction"], res["prediction+lookup"]
    assert all(x.token_ids == a[0].token_ids for x in a + b)
    da, db = sum(x.stats.decode_s for x in a) / 2, sum(x.stats.decode_s for x in b) / 2
    pa, pb = sum(x.stats.target_passes for x in a) / 2, sum(x.stats.target_passes for x in b) / 2
    tot["prediction"][0] += da; tot["prediction"][1] += pa; tot["prediction+lookup"][0] += db; tot["prediction+lookup"][1] += pb
    print(f"{t.id} | {a[0].stats.completion_tokens} | {pa:g} passes, {da:.2f} s | {pb:g} passes, {db:.2f} s | {db / da:.3f}", flush=True)
print(f"all | | {tot['prediction'][1]:g} passes, {tot['prediction'][0]:.2f} s | {tot['prediction+lookup'][1]:g} passes, "
      f"{tot['prediction+lookup'][0]:.2f} s | {tot['prediction+lookup'][0] / tot['prediction'][0]:.3f}", flush=True)
