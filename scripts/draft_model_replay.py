"""Replay the draft-model drafter on outputs a benchmark already produced: where its drafts go wrong.

Under greedy decoding the target's output is known from a plain run, so a draft's fate needs only the
draft model: accepted = the longest prefix equal to the output. This script runs the real
DraftModelDrafter (the draft model loaded as the benchmark loads it, int8) pass by pass against the
plain outputs of a `quickdraft bench run` folder, sized by the engine's DraftSizer (cap before a draft,
trim by the draft's confidences after it) with a cost table in place of measured pass costs, and
prints per workload what the drafts were made of (tokens per pass, accepted, rejected, rejected after
an EOS it drafted, draft forwards) and a modelled decode speedup: a target pass of n tokens costs
cost(n) single-token passes, a draft forward `--draft-cost` of one. Prefill is left out.

    C=1:1,2:2.07,3:3.19,4:2.9,5:2.7,6:2.94,8:2.53,11:3.98,17:3.22,25:4.32,33:4.95  # qwen 1.5B, AMD, 2 cores
    PYTHONPATH=scripts .venv/bin/python scripts/draft_model_replay.py docs/results/2026-11-23-qwen1.5b-draft \
        --workloads translation,qa,rag,humaneval --limit 5 --costs $C --draft-cost 0.117 [--sizing off --min-joint 0]

It also prints the calibration of the draft's confidence (its probability of its own greedy token)
against acceptance, in bins, over every token drafted after accepted ones.
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict
from pathlib import Path

import torch

from quickdraft.core import EMPTY_DRAFT, Verdict
from quickdraft.drafters.draft_model import DraftModelConfig, DraftModelDrafter
from quickdraft.sizing import DraftSizer, PassCosts

from draft_replay import cost_of, plain_turns


def replay(drafter: DraftModelDrafter, prompt: list[int], output: list[int], eos: set[int], max_new: int, cost,
           draft_cost: float, sizer: DraftSizer | None, calibration: dict[int, list[int]],
           counts: dict[str, float]) -> float:
    """Decode cost of `output` in single-token passes, drafted by `drafter` and sized by `sizer` (or not)
    as the engine does it (engine.py): cap before the draft, trim a rated draft after it."""
    drafter.begin(prompt)
    context, i, total, source = list(prompt), 0, 0.0, ""
    full = output + [min(eos)] if eos else output  # a stopped answer ends with the EOS plain decoding met
    while i < len(output):
        budget = max_new - i - 1  # as the engine sets it: it does not know where the answer ends
        if sizer is not None:
            budget = sizer.cap(source, budget)
        made = drafter.propose(context, budget) if budget > 0 else EMPTY_DRAFT
        draft = sizer.trim(made) if sizer is not None and len(made) else made
        source = draft.source or source
        right = 0  # of the draft as made
        while right < len(made) and i + right < len(full) and made.tokens[right] == full[i + right]:
            right += 1
        for j, c in enumerate((made.confidence or ())[: right + 1]):
            calibration[min(int(c * 10), 9)][j < right] += 1
        a = min(right, len(draft))
        counts["passes"] += 1
        counts["drafted"] += len(draft)
        counts["accepted"] += a
        counts["rejected"] += len(draft) - a
        counts["after_eos"] += next((len(draft) - j - 1 for j, t in enumerate(draft.tokens[: a + 1]) if t in eos), 0)
        counts["forwards"] += made.forwards
        seconds = cost(len(draft) + 1)
        total += seconds + draft_cost * made.forwards
        if sizer is not None:
            sizer.record(draft.source, len(draft), a, len(draft) + 1, seconds, draft_cost * made.forwards)
        context += full[i : i + a + 1]
        i += a + 1
        drafter.observe(context, Verdict(draft, a, tuple(full[i - a - 1 : i])))
    return total


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out", help="a `quickdraft bench run` folder with plain runs")
    p.add_argument("--draft", default="qwen2.5-coder-0.5b")
    p.add_argument("--workloads", default=None)
    p.add_argument("--limit", type=int, default=None, help="plain runs per workload")
    p.add_argument("--costs", required=True, help="n:cost,... relative to one token")
    p.add_argument("--draft-cost", type=float, required=True, help="a draft forward, relative to a 1-token target pass")
    p.add_argument("--sizing", choices=["off", "cost"], default="cost",
                   help="cost: size drafts as the engine does (draft_sizing='cost'), with the cost table as measured costs")
    p.add_argument("--min-confidence", type=float, default=DraftModelConfig.min_confidence)
    p.add_argument("--min-joint", type=float, default=DraftModelConfig.min_joint)
    args = p.parse_args()

    from quickdraft import load
    from quickdraft.bench import harness

    out = Path(args.out)
    max_new = harness.read_meta(out)["config"]["max_new_tokens"]
    gen = load(args.draft, draft_model=args.draft)  # the draft model, and its int8 drafting runner
    tok, runner = gen.tokenizer, gen.draft_runner
    eos = set(tok.eos_token_ids)
    cost = cost_of({int(k): float(v) for k, v in (kv.split(":") for kv in args.costs.split(","))})
    drafter = DraftModelDrafter(runner, runner.vocab_size,
                                config=DraftModelConfig(min_confidence=args.min_confidence, min_joint=args.min_joint))
    costs = PassCosts(decay=1.0)  # the table, as if measured (the engine's own costs decay; these need not)
    for n in range(1, max_new + 1):
        costs.record(n, cost(n))
    calibration: dict[int, list[int]] = defaultdict(lambda: [0, 0])  # bin -> [rejected, accepted]
    speedups: dict[str, list[float]] = defaultdict(list)
    counts: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    chosen = set(args.workloads.split(",")) if args.workloads else None
    with torch.inference_mode():
        for r, _, turn, prompt, output in plain_turns(out, tok, chosen, args.limit):
            stopped = r["finish_reason"][turn] == "stop"
            sizer = DraftSizer(costs=costs) if args.sizing == "cost" else None  # one per request, as the engine's
            c = replay(drafter, prompt, output, eos if stopped else set(), max_new, cost, args.draft_cost, sizer,
                       calibration, counts[r["workload"]])
            speedups[r["workload"]].append(len(output) / c if c else 1.0)
    print(f"cost {args.costs}, draft forward {args.draft_cost}, sizing {args.sizing}, "
          f"min_confidence {args.min_confidence}, min_joint {args.min_joint}")
    print("| workload | turns | modelled decode speedup (median) | tokens/pass drafted | accepted | rejected | of them after EOS | draft forwards |")
    print("|---|---|---|---|---|---|---|---|")
    for w, s in sorted(speedups.items()):
        k = counts[w]
        print(f"| {w} | {len(s)} | {statistics.median(s):.2f} | {k['drafted'] / k['passes']:.2f} | {k['accepted']:.0f} | "
              f"{k['rejected']:.0f} | {k['after_eos']:.0f} | {k['forwards']:.0f} |")
    print("confidence bin: accepted / drafted (tokens whose earlier draft tokens were all accepted)")
    for b in sorted(calibration):
        rej, acc = calibration[b]
        print(f"  {b / 10:.1f}-{(b + 1) / 10:.1f}: {acc}/{acc + rej} = {acc / (acc + rej):.2f}")


if __name__ == "__main__":
    main()
