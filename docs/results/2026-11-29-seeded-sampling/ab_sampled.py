"""Seeded sampling, plain and prompt lookup, on summaries: the tokens (a hash) and decode time of each.

Run once per code version with that version's src first on PYTHONPATH, alternating versions (A B B A):

    T=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4
    QUICKDRAFT_DATA=../shared/data PYTHONPATH=<checkout>/src LD_PRELOAD=$T \
        .venv/bin/python docs/results/2026-11-29-seeded-sampling/ab_sampled.py summarization 30 4 1.0 -

Arguments: workload, tasks skipped, tasks, top_p, lookup's short_ngram ("-": its default). Temperature 0.7,
seed 1, 256 new tokens, prefix reuse off.
"""
import hashlib
import json
import sys

import quickdraft
from quickdraft.bench import workloads
from quickdraft.sampling import SamplingParams
wl, skip, lim, top_p, short = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
tasks = list(workloads.WORKLOADS[wl].load(workloads.data_dir(), skip + lim))[skip:]
gen = quickdraft.load("qwen2.5-coder-0.5b", progress=False)
gen.runner.reuse_prefix = False
gen.generate(tasks[0].messages, max_new_tokens=4)
rows = []
for t in tasks:
    for drafter in ("none", "lookup"):
        kw = {}
        if drafter == "lookup" and short != "-":
            from quickdraft.drafters.lookup import LookupConfig
            kw["lookup"] = LookupConfig(short_ngram=int(short))
        r = gen.generate(t.messages, drafter=drafter, max_new_tokens=256,
                         sampling=SamplingParams(temperature=0.7, top_p=top_p, seed=1), **kw)
        s = r.stats
        rows.append(dict(task=t.id, drafter=drafter, tokens=s.completion_tokens, passes=s.target_passes,
                         decode_s=round(s.decode_s, 3), out=hashlib.md5(str(r.token_ids).encode()).hexdigest()[:8]))
        print(json.dumps(rows[-1]), flush=True)
