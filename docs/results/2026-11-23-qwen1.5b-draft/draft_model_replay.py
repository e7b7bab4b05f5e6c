"""Replay the draft-model drafter on outputs a benchmark already produced: where its drafts go wrong.

Under greedy decoding the target's output is known from a plain run, so a draft's fate needs only the
draft model: accepted = the longest prefix equal to the output. This script runs the real
DraftModelDrafter (the draft model loaded as the benchmark loads it, int8) through the engine itself
(engine.py) against the plain outputs of a `quickdraft bench run` folder: the target is a scripted runner
that writes plain decoding's output (then its EOS, where the run stopped), on a virtual clock where a target
pass of n tokens costs cost(n) single-token passes and a draft forward `--draft-cost` of one
(runners/scripted.py TimedScriptedRunner). Drafts are sized as the engine sizes them (DraftSizer: cap before a
draft, trim by the draft's confidences after it), over the cost table as if measured. Printed per workload:
what the drafts were made of (tokens per pass, accepted, rejected, rejected after an EOS it drafted, draft
forwards) and the modelled decode speedup. Prefill is left out.

    C=1:1,2:2.07,3:3.19,4:2.9,5:2.7,6:2.94,8:2.53,11:3.98,17:3.22,25:4.32,33:4.95  # qwen 1.5B, AMD, 2 cores
    .venv/bin/python docs/results/2026-11-23-qwen1.5b-draft/draft_model_replay.py docs/results/2026-11-23-qwen1.5b-draft \
        --workloads translation,qa,rag,humaneval --limit 5 --costs $C --draft-cost 0.117 [--sizing off --min-joint 0]

It also prints the calibration of the draft's confidence (its probability of its own greedy token)
against acceptance, in bins, over every token drafted after accepted ones.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Sequence

import torch

from quickdraft.core import Draft, Stats, Verdict
from quickdraft.drafters.draft_model import DraftModelConfig, DraftModelDrafter
from quickdraft.engine import Limits, generate
from quickdraft.runners.scripted import TimedScriptedRunner
from quickdraft.sizing import DraftSizer, PassCosts

sys.path.insert(0, str(next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").exists()) / "scripts"))
from draft_replay import cost_of, plain_turns  # noqa: E402  (scripts/draft_replay.py)


class Observed:
    """The drafter as the engine sees it, with its draft forwards charged to the virtual clock, the confidence
    of every draft it made binned against the output (calibration: bin -> [rejected, accepted]) and the draft
    tokens verified after an EOS it drafted counted."""

    def __init__(self, drafter: DraftModelDrafter, runner: TimedScriptedRunner, draft_cost: float, full: list[int],
                 eos: set[int], calibration: dict[int, list[int]]):
        self.drafter, self.runner, self.draft_cost, self.full = drafter, runner, draft_cost, full
        self.eos, self.calibration, self.prompt_len, self.after_eos = eos, calibration, 0, 0

    def begin(self, prompt: Sequence[int]) -> None:
        self.prompt_len = len(prompt)
        self.drafter.begin(prompt)

    def propose(self, context: Sequence[int], budget: int) -> Draft:
        made = self.drafter.propose(context, budget)
        self.runner.now += self.draft_cost * made.forwards  # the engine's clock reads it after propose
        i, right = len(context) - self.prompt_len, 0
        while right < len(made) and i + right < len(self.full) and made.tokens[right] == self.full[i + right]:
            right += 1
        for j, c in enumerate((made.confidence or ())[: right + 1]):
            self.calibration[min(int(c * 10), 9)][j < right] += 1
        return made

    def observe(self, context: Sequence[int], verdict: Verdict) -> None:
        drafted, a = verdict.draft.tokens, verdict.accepted
        self.after_eos += next((len(drafted) - j - 1 for j, t in enumerate(drafted[: a + 1]) if t in self.eos), 0)
        self.drafter.observe(context, verdict)


def replay(drafter: Observed, prompt: list[int], max_new: int, eos: set[int], sizer: DraftSizer | None,
           stats: Stats) -> float:
    """Modelled decode seconds (in single-token passes) of the scripted output, drafted by `drafter`."""
    runner = drafter.runner
    limits = Limits(max_new, frozenset(eos))
    for _ in generate(runner, prompt, limits, drafter, stats=stats, sizer=sizer, clock=runner.clock):
        pass
    return runner.now


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
    tok, draft_runner = gen.tokenizer, gen.draft_runner
    eos = set(tok.eos_token_ids)
    cost = cost_of({int(k): float(v) for k, v in (kv.split(":") for kv in args.costs.split(","))})
    drafter = DraftModelDrafter(draft_runner, draft_runner.vocab_size,
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
            target = TimedScriptedRunner(output, draft_runner.vocab_size, min(eos), cost)  # then EOS, if it stopped
            observed = Observed(drafter, target, args.draft_cost, output + [min(eos)], eos, calibration)
            sizer = DraftSizer(costs=costs) if args.sizing == "cost" else None  # one per request, as the engine's
            stats = Stats()
            c = replay(observed, prompt, max_new if stopped else len(output), eos, sizer, stats)
            speedups[r["workload"]].append(len(output) / c if c else 1.0)
            k = counts[r["workload"]]
            for name, value in (("passes", stats.target_passes), ("drafted", stats.draft_tokens),
                                ("accepted", stats.accepted_prediction_tokens), ("after_eos", observed.after_eos),
                                ("rejected", stats.rejected_prediction_tokens), ("forwards", stats.draft_forwards)):
                k[name] += value
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
