"""Outputs of prediction drafting (plain greedy decoding's, by exactness) of tasks no held-out run uses, for replay
(a workload without predictions drafts as `auto` does there; its rows have prediction null):

    .venv/bin/python docs/results/2026-11-27-verify-vs-prefill/collect_outputs.py apply_edit_eval 12 60 outputs.jsonl
"""
import sys, json, time
import quickdraft
from quickdraft.bench import workloads
from quickdraft.drafters import prediction as P
data = workloads.data_dir("/work/shared/data")
wl, lo, hi, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
tasks = list(workloads.WORKLOADS[wl].load(data, hi))[lo:hi]
gen = quickdraft.load("qwen2.5-coder-0.5b")
gen.runner.reuse_prefix = False
seen = []
orig = P.PredictionDrafter.__init__
def init(self, prediction, *a, **k):
    seen.append(list(prediction)); orig(self, prediction, *a, **k)
P.PredictionDrafter.__init__ = init
with open(out, "a") as f:
    for t in tasks:
        seen.clear()
        t0 = time.perf_counter()
        res = gen.generate(t.messages, prediction=t.prediction, max_new_tokens=512)
        s = res.stats
        f.write(json.dumps({"workload": wl, "task": t.id, "prompt": gen.encode_prompt(t.messages), "prediction": seen[0] if seen else None,
                            "output": list(res.token_ids), "passes": s.target_passes, "seconds": time.perf_counter() - t0,
                            "prefill_s": s.prefill_s, "decode_s": s.decode_s}) + "\n")
        f.flush()
        print(t.id, s.completion_tokens, s.target_passes, round(time.perf_counter() - t0, 2), flush=True)
