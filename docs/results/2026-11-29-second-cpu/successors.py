"""Could single-token branches fill EditEval's empty passes? For every pass of the prediction+lookup replay (the engine,
sized at this CPU's costs, costs26.json) that kept no draft token, whether the token it wrote is among the k most
recent distinct tokens that followed the previous token in the prompt and output so far: a tree of k one-token
branches (a k+1-row pass) would have drafted it. Also how many tokens that branch's lookup continuation would have
kept (at most 8).

    .venv/bin/python docs/results/2026-11-29-second-cpu/successors.py docs/results/2026-11-26-heldout-again/quickdraft-bench edit_eval 8
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, "scripts")
import draft_replay as R  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402

from quickdraft import models  # noqa: E402
from quickdraft.sizing import PassCosts  # noqa: E402
from quickdraft.tokenizer import HFTokenizer  # noqa: E402

out, workload, limit = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
costs = json.loads((Path(__file__).parent / "costs26.json").read_text())["3000" if workload == "refactor" else "500"]
cost = R.cost_of({int(k): v for k, v in costs.items()})
tok = HFTokenizer(AutoTokenizer.from_pretrained(models.resolve("qwen2.5-coder-0.5b", progress=False)))
K = (1, 2, 4, 8)
passes = empty = 0
hits, kept = dict.fromkeys(K, 0), dict.fromkeys(K, 0)
shared = PassCosts()
for r, task, turn, prompt, output in R.plain_turns(out, tok, {workload}, limit):
    if turn or task.prediction is None:
        continue
    steps = []
    R.replay(R.CONFIGS["prediction+lookup"][1](tok.encode(task.prediction, add_special_tokens=False)), prompt, output,
             cost, shared, steps)
    pos = 0
    for _, accepted in steps:
        passes += 1
        if accepted == 0:
            empty += 1
            seq = prompt + output[:pos]
            followers, seen = [], set()  # positions of the tokens that followed seq[-1], most recent first, distinct
            for j in range(len(seq) - 2, -1, -1):
                if seq[j] == seq[-1] and seq[j + 1] not in seen:
                    seen.add(seq[j + 1])
                    followers.append(j + 1)
                    if len(followers) == max(K):
                        break
            for k in K:
                j = next((j for j in followers[:k] if seq[j] == output[pos]), None)
                if j is not None:
                    g = 1
                    while g < 8 and pos + g < len(output) and j + g < len(seq) and seq[j + g] == output[pos + g]:
                        g += 1
                    hits[k] += 1
                    kept[k] += g
        pos += accepted + 1
print(f"{workload}: {passes} passes, {empty} kept no draft token; of those, the written token among the k most recent "
      f"followers: {hits} (k: count), tokens such a branch would keep: {kept}")
