"""End to end with and without the lean pass: plain decoding and the README's edit (the file as prediction), the
same Generator with runner.lean set or None in turn, alternating by round; decode seconds and whether the tokens
are the same. qwen2.5-coder-0.5b, dtype auto, prefix reuse off.

    .venv/bin/python docs/results/2026-11-26-lean-pass/e2e.py --rounds 3 --max-new-tokens 1024
"""

import argparse
import statistics
from pathlib import Path

import quickdraft
from quickdraft.cpu import describe
from quickdraft.prompts import edit_request

ap = argparse.ArgumentParser()
ap.add_argument("--rounds", type=int, default=3)
ap.add_argument("--max-new-tokens", type=int, default=1024)
args = ap.parse_args()
g = quickdraft.load("qwen2.5-coder-0.5b", progress=False)
lean = g.runner.lean
source = (Path(__file__).parents[3] / "examples" / "inventory.py").read_text()
edit, fenced = edit_request("Rename the function parse_line to parse_record and update its caller.", source,
                            "inventory.py")  # as `quickdraft generate --edit` asks
jobs = {"plain": dict(drafter="none"), "edit, prediction": dict(prediction=fenced)}
print(f"CPU: {describe()}; qwen2.5-coder-0.5b {g.runner.dtype}; {args.max_new_tokens} new tokens at most\n")
print("| run | decode s: model forward / lean (median of rounds) | tokens | same tokens |")
print("|---|---|---|---|")
for name, extra in jobs.items():
    seconds, outputs = {None: [], lean: []}, {None: [], lean: []}
    for r in range(args.rounds):
        for path in ((None, lean) if r % 2 == 0 else (lean, None)):
            g.runner.lean = path
            result = g.generate([{"role": "user", "content": edit}], max_new_tokens=args.max_new_tokens,
                                prefix_reuse=False, **extra)
            seconds[path].append(result.stats.decode_s)
            outputs[path].append(result.token_ids)
    same = all(o == outputs[None][0] for o in outputs[None] + outputs[lean])
    a, b = statistics.median(seconds[None]), statistics.median(seconds[lean])
    print(f"| {name} | {a:.2f} / {b:.2f} s ({a / b:.2f}x) | {len(outputs[lean][0])} | {same} |")
g.runner.lean = lean
