"""Replay the deterministic drafters on outputs a benchmark already produced, with measured pass costs.

When to run: before changing how prompt lookup or predictions draft, or how drafts are sized: it compares
rules on a `quickdraft bench` run's plain outputs in minutes, without the model (docs/drafters.md).

Prompt lookup and Predicted Outputs draft from the context (and the prediction) alone, so what they
would draft at every step, and how much of it plain greedy decoding agrees with, follows from the
prompt and plain decoding's output: comparing draft rules needs no model, only the cost of a target
pass of n tokens on the machine.

    .venv/bin/python scripts/draft_replay.py bench-out/qwen05 --measure-costs
    .venv/bin/python scripts/draft_replay.py bench-out/qwen05 --costs 1:1,2:1.94,3:3.05,4:2.42,8:2.43,16:3.08,33:3.97

For every plain run of the folder (every turn), the prompt ids are rebuilt with the model's tokenizer
and chat template (later turns after plain decoding's own answers, as the benchmark sends them), and
each configuration is replayed by the engine itself (engine.py, with or without the cost-aware cap of
sizing.py, pass costs kept across requests as a Generator keeps them) on a scripted target that writes
plain decoding's output, with a virtual clock (runners/scripted.py TimedScriptedRunner). A pass of n tokens
costs cost(n) single-token passes (linear between the sizes given). Printed per workload: modelled
decode speedup over plain decoding, median over turns [and over all tokens]. Prefill is left out.

--oracle FILE: for every first turn with a prediction, the fewest passes and the least modelled time any drafter
of the prediction could need (bench/oracle.py), beside the prediction configurations' sized replays (as a
Generator runs them) and the bench's own passes; the gap split by where each pass stopped; rows to FILE (JSON).

    .venv/bin/python scripts/draft_replay.py bench-out/qwen05 --costs ... --oracle oracle.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from bisect import bisect_left
from collections import defaultdict
from pathlib import Path
from typing import Callable

from quickdraft.drafters.base import FirstOf
from quickdraft.drafters.build import PredictionOrLookup, build_drafter
from quickdraft.drafters.lookup import LookupConfig, PromptLookupDrafter
from quickdraft.drafters.prediction import PredictionConfig, PredictionDrafter
from quickdraft.engine import Limits, generate
from quickdraft.runners.scripted import TimedScriptedRunner
from quickdraft.sizing import DraftSizer, PassCosts

OLD_LOOKUP = LookupConfig(min_ngram=1, single_match_tokens=2)  # the rule before this script's first use
WIDE_LOOKUP = LookupConfig(min_ngram=2, max_ngram=5, num_tokens=32)  # about vLLM's n-gram proposer's rule


class Longest(FirstOf):
    """Asks every drafter and takes the longest draft (ties: the first): tried on the refactors, where prompt
    lookup sometimes follows a rewritten file better than the prediction's one alignment; not adopted
    (docs/runtime.md)."""

    def propose(self, context, budget):
        drafts = [d.propose(context, budget) for d in self.drafters]
        return max(drafts, key=len)  # max keeps the first of equal lengths

# the re-anchoring evidence before 2026-11-27 (docs/results/2026-11-27-reanchor-rules)
EVIDENCE_4_64 = PredictionConfig(strong_ngram=4, window=64)

# name -> (needs a prediction, drafter factory(prediction ids))
CONFIGS: dict[str, tuple[bool, Callable]] = {
    "lookup 1-gram+": (False, lambda p: PromptLookupDrafter(OLD_LOOKUP)),
    "lookup 2-gram+": (False, lambda p: PromptLookupDrafter(LookupConfig(min_ngram=2))),
    "lookup 3-gram": (False, lambda p: PromptLookupDrafter(LookupConfig(min_ngram=3))),
    "prediction": (True, lambda p: PredictionDrafter(p, PredictionConfig())),
    "prediction-openai": (True, lambda p: PredictionDrafter(p, PredictionConfig.for_policy("openai"))),
    # issue 44's rules one at a time (docs/results/2026-11-27-prediction-drafting)
    "prediction growth 1": (True, lambda p: PredictionDrafter(p, PredictionConfig(growth=1))),
    "prediction max_draft 64": (True, lambda p: PredictionDrafter(p, PredictionConfig(max_draft=64))),
    "prediction no replacement": (True, lambda p: PredictionDrafter(p, PredictionConfig(replace_after=1 << 30))),
    "prediction no substitution": (True, lambda p: PredictionDrafter(p, PredictionConfig(substitute=False))),
    "prediction+lookup 3-gram": (True, lambda p: FirstOf([PredictionDrafter(p, PredictionConfig()),
                                                          PromptLookupDrafter(LookupConfig(min_ngram=3))])),
    "prediction+lookup": (True, lambda p: build_drafter("prediction+lookup", p)),  # as the engine builds it
    "prediction evidence 4/64": (True, lambda p: PredictionDrafter(p, EVIDENCE_4_64)),
    "prediction+lookup evidence 4/64": (True, lambda p: PredictionOrLookup(PredictionDrafter(p, EVIDENCE_4_64),
                                                                           PromptLookupDrafter())),
    "longest of prediction and lookup 2-5-gram": (True, lambda p: Longest([PredictionDrafter(p, PredictionConfig()),
                                                                       PromptLookupDrafter(WIDE_LOOKUP)])),
}


def cost_of(costs: dict[int, float]) -> Callable[[int], float]:
    sizes = sorted(costs)

    def cost(n: int) -> float:
        i = bisect_left(sizes, n)
        if i < len(sizes) and sizes[i] == n:
            return costs[n]
        if i == 0:
            return costs[sizes[0]]
        if i == len(sizes):
            return costs[sizes[-1]] * n / sizes[-1]
        a, b = sizes[i - 1], sizes[i]
        return costs[a] + (costs[b] - costs[a]) * (n - a) / (b - a)

    return cost


def replay(drafter, prompt: list[int], output: list[int], cost, costs: PassCosts | None,
           steps: list[tuple[int, int]] | None = None) -> float:
    """Decode cost of `output` in single-token passes, drafted by `drafter`, through the engine itself (a
    scripted target that writes `output`, on a virtual clock where a pass of n tokens takes cost(n));
    costs: size drafts with a DraftSizer over these (shared) pass costs, as a Generator does; None: no cap.
    steps: if given, gets (drafted, accepted) of every pass (bench/oracle.py classifies them)."""
    vocab = max([*prompt, *output]) + 2  # room for an EOS that no token of the text uses
    runner = TimedScriptedRunner(output, vocab, vocab - 1, cost)
    sizer = DraftSizer(costs=costs) if costs is not None else None
    for step in generate(runner, prompt, Limits(len(output)), drafter, sizer=sizer, clock=runner.clock):
        if steps is not None:
            steps.append((len(step.verdict.draft), step.verdict.accepted))
    return runner.now


def plain_turns(out: Path, tok, chosen: set[str] | None = None, limit: int | None = None):
    """(plain run row, its task, turn, prompt ids, output ids) for every turn of the folder's plain runs (of the
    chosen workloads, the first `limit` tasks of each), the prompts rebuilt as the benchmark sent them:
    later turns after plain decoding's own answers."""
    from quickdraft.bench import harness, workloads

    meta = harness.read_meta(out)
    data = Path(meta["config"].get("data") or workloads.data_dir())
    rows = [r for r in harness.read_runs(out) if r["method"] == "plain" and not r.get("error")
            and (chosen is None or r["workload"] in chosen)]
    tasks = {}
    for w in {r["workload"] for r in rows}:
        for t in workloads.WORKLOADS[w].load(data, None):
            tasks[w, t.id] = t
    seen: dict[str, int] = defaultdict(int)
    for r in sorted(rows, key=lambda r: r["time"]):
        if limit is not None and seen[r["workload"]] >= limit:
            continue
        seen[r["workload"]] += 1
        task = tasks[r["workload"], r["task"]]
        messages = list(task.messages)
        for turn, output in enumerate(r["output_tokens"]):
            if turn:
                messages = messages + [{"role": "user", "content": task.followups[turn - 1]}]
            yield r, task, turn, tok.encode_chat(messages), output
            messages = messages + [{"role": "assistant", "content": tok.decode(output)}]


def oracle_rows(out: Path, tok, names: list[str], cost, max_draft: int, chosen: set[str] | None,
                limit: int | None) -> list[dict]:
    """Per first turn with a prediction: plain decoding's tokens, the oracle's passes and time (fewest passes; least
    time at these costs), drafts of at most max_draft tokens (the largest pass the curve measured, less one), and
    for each prediction configuration, replayed sized as a Generator runs it, its passes, time and gap by cause
    (bench/oracle.py: passes against the fewest, time against the fastest). Time in one-token passes."""
    from quickdraft.bench import harness, oracle

    bench = {(r["workload"], r["task"], r["method"]): r for r in harness.read_runs(out) if not r.get("error")}
    shared = {name: PassCosts() for name in names}
    rows = []
    for r, task, turn, prompt, output in plain_turns(out, tok, chosen, limit):
        if turn or task.prediction is None or not output:
            continue
        pred = tok.encode(task.prediction, add_special_tokens=False)
        runs, src = oracle.longest_runs(output, pred), oracle.diff_sources(output, pred)
        fastest, fewest = oracle.oracle(runs, cost, max_draft), oracle.passes_only(runs, max_draft)
        row = {"workload": r["workload"], "task": r["task"], "tokens": len(output), "prediction_tokens": len(pred),
               "insertions": runs.count(0), "oracle_passes": fewest.passes, "oracle_time": round(fastest.cost, 2),
               "oracle_time_passes": fastest.passes, "configs": {}}
        capped = oracle.oracle(runs, cost, min(max_draft, PredictionConfig().max_draft))  # at today's longest draft
        row["oracle_at_max_draft"] = {"max_draft": PredictionConfig().max_draft, "passes": capped.passes,
                                      "time": round(capped.cost, 2)}
        for name in names:
            steps: list[tuple[int, int]] = []
            t = replay(CONFIGS[name][1](pred), prompt, output, cost, shared[name], steps)
            assert sum(a + 1 for _, a in steps) == len(output)
            by_pass, by_time = oracle.gap(steps, fewest, runs, src, cost), oracle.gap(steps, fastest, runs, src, cost)
            row["configs"][name] = {"passes": len(steps), "time": round(t, 2),
                                    "pass_gap": by_pass.passes_by_cause,
                                    "time_gap": {c: round(v, 2) for c, v in by_time.time_by_cause.items()}}
        if (b := bench.get((r["workload"], r["task"], "prediction"))) is not None:
            row["bench_prediction_passes"] = b["target_passes"]
        rows.append(row)
    return rows


def print_oracle(rows: list[dict], names: list[str]) -> None:
    from quickdraft.bench.oracle import CAUSES

    causes = [c for c in CAUSES if c != "insertion"]  # every method pays the same insertions
    for name in names:
        print(f"\n{name} (sized) against the oracle; time in one-token passes; pass gap by cause: " + ", ".join(causes))
        print("| workload | task | tokens | insertions | passes: bench / today / fewest / fastest's / at max_draft "
              "| time: today / fastest / at max_draft | " + " | ".join(causes) + " |")
        print("|---|---|---|---|---|---|" + "---|" * len(causes))
        for row in rows:
            c, m = row["configs"][name], row["oracle_at_max_draft"]
            print(f"| {row['workload']} | {row['task']} | {row['tokens']} | {row['insertions']} | "
                  f"{row.get('bench_prediction_passes', '–')} / {c['passes']} / {row['oracle_passes']} / "
                  f"{row['oracle_time_passes']} / {m['passes']} | {c['time']:.1f} / {row['oracle_time']:.1f} / "
                  f"{m['time']:.1f} | " + " | ".join(str(c["pass_gap"][k]) for k in causes) + " |")
        for w in sorted({row["workload"] for row in rows}):
            rs = [row for row in rows if row["workload"] == w]
            cs = [row["configs"][name] for row in rs]

            def total(key: str, among: list[dict] = rs) -> str:
                return f"{sum(x[key] for x in among):.4g}"

            ms = [row["oracle_at_max_draft"] for row in rs]
            bench = sum(row.get("bench_prediction_passes", 0) for row in rs)
            print(f"| {w} | all | {total('tokens')} | {total('insertions')} | {bench} / {total('passes', cs)} / "
                  f"{total('oracle_passes')} / {total('oracle_time_passes')} / {total('passes', ms)} | "
                  f"{total('time', cs)} / {total('oracle_time')} / {total('time', ms)} | "
                  + " | ".join(str(sum(c["pass_gap"][k] for c in cs)) for k in causes) + " |")


def measure_costs(model: str, sizes: list[int], cached: int = 500, repeats: int = 5) -> dict[int, float]:
    """Median seconds of a target pass of n tokens after `cached` tokens, relative to n = 1. Every size once a
    round, so that load from other processes, coming and going, touches every size alike."""
    import torch

    from quickdraft import load

    runner = load(model).runner
    ids = [(i * 7919) % 30000 + 100 for i in range(cached + max(sizes))]
    ts: dict[int, list[float]] = defaultdict(list)
    with torch.inference_mode():
        runner.reset()
        runner.prefill(ids[:cached])
        for _ in range(repeats + 1):  # the first round warms up
            for n in sizes:
                t0 = time.perf_counter()
                runner.forward(ids[cached : cached + n])
                ts[n].append(time.perf_counter() - t0)
                runner.rollback(cached)
    ms = {n: statistics.median(ts[n][1:]) * 1000 for n in sizes}
    print(f"ms per pass of n tokens after {cached} cached:", {n: round(v, 1) for n, v in ms.items()})
    return {n: ms[n] / ms[1] for n in sizes}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out", help="a `quickdraft bench run` folder with plain runs")
    p.add_argument("--costs", help="n:cost,... relative to one token")
    p.add_argument("--measure-costs", action="store_true", help="measure them on the folder's model instead")
    p.add_argument("--cached", type=int, default=500, help="--measure-costs after this many cached tokens")
    p.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated, from: " + ", ".join(CONFIGS))
    p.add_argument("--workloads", help="comma-separated: only these workloads' runs")
    p.add_argument("--limit", type=int, help="only the first LIMIT tasks of each workload")
    p.add_argument("--oracle", metavar="FILE", help="the oracle and the gap to it (bench/oracle.py), rows to FILE")
    args = p.parse_args()
    from transformers import AutoTokenizer

    from quickdraft import models
    from quickdraft.bench import harness
    from quickdraft.tokenizer import HFTokenizer

    out = Path(args.out)
    meta = harness.read_meta(out)
    model = meta["config"]["model"]
    if args.measure_costs:
        costs = measure_costs(model, [1, 2, 3, 4, 5, 6, 8, 11, 16, 25, 33, 65, 129], args.cached)
    else:
        costs = {int(k): float(v) for k, v in (kv.split(":") for kv in args.costs.split(","))}
    print("cost (single-token passes):", {n: round(c, 2) for n, c in costs.items()})
    cost = cost_of(costs)
    tok = HFTokenizer(AutoTokenizer.from_pretrained(models.resolve(model, progress=False)))
    names = args.configs.split(",")
    chosen = set(args.workloads.split(",")) if args.workloads else None
    if args.oracle:
        names = [n for n in names if CONFIGS[n][0]]  # the prediction's drafters
        rows = oracle_rows(out, tok, names, cost, max(costs) - 1, chosen, args.limit)
        Path(args.oracle).write_text(json.dumps({"costs": costs, "rows": rows}, indent=1) + "\n", encoding="utf-8")
        print_oracle(rows, names)
        return
    result: dict[str, dict[str, list[tuple[float, int]]]] = defaultdict(lambda: defaultdict(list))
    shared: dict[str, PassCosts] = {}
    for r, task, turn, prompt, output in plain_turns(out, tok, chosen, args.limit):
        pred = tok.encode(task.prediction, add_special_tokens=False) if task.prediction is not None and not turn else None
        for name in names:
            needs_prediction, factory = CONFIGS[name]
            if needs_prediction and (pred is None or turn):
                continue
            for sized in (False, True):
                c = replay(factory(pred), prompt, output, cost, shared.setdefault(name, PassCosts()) if sized else None)
                result[name + (" +sizing" if sized else "")][r["workload"]].append((c, len(output)))
    cols = [n for n in result]
    print("modelled decode speedup over plain, median over turns [all tokens]")
    print("| workload | " + " | ".join(cols) + " |")
    print("|---|" + "---|" * len(cols))
    for w in sorted({w for per in result.values() for w in per}):
        cells = []
        for name in cols:
            xs = [x for x in result[name].get(w, []) if x[1]]
            cells.append(f"{statistics.median(n / c for c, n in xs):.2f} [{sum(n for _, n in xs) / sum(c for c, _ in xs):.2f}]"
                         if xs else "–")
        print(f"| {w} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
