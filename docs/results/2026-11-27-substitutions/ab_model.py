"""On the model: the prediction drafter with and without substitutions, task by task, alternating which runs first
(qwen2.5-coder-0.5b, bf16, greedy, 512 new tokens, prefix reuse off so that each run prefills the whole prompt):

    .venv/bin/python docs/results/2026-11-27-substitutions/ab_model.py 3 12 > ab_model.txt
"""
import sys

import quickdraft
from quickdraft.bench import workloads
from quickdraft.drafters.prediction import PredictionConfig, PredictionDrafter

lo, hi = int(sys.argv[1]), int(sys.argv[2])
tasks = list(workloads.WORKLOADS["refactor"].load(workloads.data_dir(), None))[lo:hi]
gen = quickdraft.load("qwen2.5-coder-0.5b")
gen.runner.reuse_prefix = False
print("| task | tokens | passes: off / on | decode s: off / on | end to end s: off / on | same output |")
print("|---|---|---|---|---|---|")
tot = {True: [0, 0.0, 0.0], False: [0, 0.0, 0.0]}
for n, t in enumerate(tasks):
    ids = gen.tokenizer.encode(t.prediction, add_special_tokens=False)
    res = {}
    for on in ((True, False) if n % 2 else (False, True)):
        r = gen.generate(t.messages, drafter=PredictionDrafter(ids, PredictionConfig(substitute=on)), max_new_tokens=512)
        res[on] = r
        s = r.stats
        tot[on][0] += s.target_passes
        tot[on][1] += s.decode_s
        tot[on][2] += s.prefill_s + s.decode_s
    a, b = res[False].stats, res[True].stats
    print(f"| {t.id[:32]} | {b.completion_tokens} | {a.target_passes} / {b.target_passes} | {a.decode_s:.2f} / "
          f"{b.decode_s:.2f} | {a.prefill_s + a.decode_s:.2f} / {b.prefill_s + b.decode_s:.2f} | "
          f"{res[False].token_ids == res[True].token_ids} |", flush=True)
print(f"| all | | {tot[False][0]} / {tot[True][0]} | {tot[False][1]:.2f} / {tot[True][1]:.2f} | "
      f"{tot[False][2]:.2f} / {tot[True][2]:.2f} | |")
