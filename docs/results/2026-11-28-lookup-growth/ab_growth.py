"""Prompt lookup's drafts before (24 tokens after any 3-gram match: growth 0) and after (up to twice the length of the
copy, at most 128: the default), per held-out task in the order A B B A: decode and end-to-end seconds, target passes
(means of two), outputs asserted identical. With a prediction the drafter is prediction+lookup, else lookup.

    LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4 \\
      .venv/bin/python docs/results/2026-11-28-lookup-growth/ab_growth.py apply_edit_eval 4 12

With `prefer` as a fourth argument: lookup alone on every task, before the first occurrence (prefer "first"),
after the one copied longest (the default). With `short`: before without short matches (short_ngram 0), after with
them (the default; ../2026-11-29-second-cpu); `short lookup`: the same with lookup alone on every task.
"""
import sys

import quickdraft
from quickdraft import LookupConfig
from quickdraft.bench import workloads
from quickdraft.cpu import describe
w, skip, limit = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
tasks = list(workloads.WORKLOADS[w].load(workloads.data_dir(), skip + limit))[skip:]
gen = quickdraft.load("qwen2.5-coder-0.5b", progress=False)
gen.runner.reuse_prefix = False
gen.generate(tasks[0].messages, drafter="none", max_new_tokens=8)
print(describe(), w, f"tasks {skip}..{skip + limit - 1}", flush=True)
mode = sys.argv[4:]
prefer, short = mode[:1] == ["prefer"], mode[:1] == ["short"]
alone = prefer or mode == ["short", "lookup"]  # lookup alone on every task
configs = {"before": LookupConfig(prefer="first") if prefer else LookupConfig(short_ngram=0) if short
           else LookupConfig(growth=0), "after": LookupConfig()}
print("task | tokens | before: passes, decode s, end to end s | after: passes, decode s, end to end s | decode after/before")
tot = {k: [0.0, 0.0, 0.0] for k in configs}
for t in tasks:
    drafter = "prediction+lookup" if t.prediction and not alone else "lookup"
    res = {}
    for k in ("before", "after", "after", "before"):
        r = gen.generate(t.messages, prediction=None if alone else t.prediction, drafter=drafter, lookup=configs[k],
                         max_new_tokens=512)
        res.setdefault(k, []).append(r)
    assert all(x.token_ids == res["before"][0].token_ids for x in res["before"] + res["after"]), t.id
    row = []
    for k in configs:
        s = [x.stats for x in res[k]]
        p, d, e = (sum(x.target_passes for x in s) / 2, sum(x.decode_s for x in s) / 2,
                   sum(x.prefill_s + x.decode_s for x in s) / 2)
        tot[k][0] += p; tot[k][1] += d; tot[k][2] += e
        row.append(f"{p:g}, {d:.2f}, {e:.2f}")
    d0, d1 = (sum(x.stats.decode_s for x in res[k]) for k in configs)
    print(f"{t.id} | {res['after'][0].stats.completion_tokens} | {row[0]} | {row[1]} | {d1 / d0:.3f}", flush=True)
b, a = tot["before"], tot["after"]
print(f"all | | {b[0]:g}, {b[1]:.2f}, {b[2]:.2f} | {a[0]:g}, {a[1]:.2f}, {a[2]:.2f} | {a[1] / b[1]:.3f} "
      f"(end to end {a[2] / b[2]:.3f})", flush=True)
