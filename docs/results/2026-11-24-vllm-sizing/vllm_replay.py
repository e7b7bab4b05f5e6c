"""What drafting can gain on vLLM at one client: its step costs fitted from a vllm_bench run, and quickdraft's
drafters (and a rule like vLLM's n-gram) replayed on greedy outputs of the same tasks with those costs.

    .venv/bin/python docs/results/2026-11-24-vllm-sizing/vllm_replay.py --runs docs/results/2026-11-24-vllm-sizing/one-client-cold/runs.jsonl

1. Fit, from the one-client rows of RUNS (prefix caching off, so each request paid its prefill): seconds =
   prefill(task) + A * steps + B * verified tokens, least squares over every method's rows (steps: decode
   steps, completion tokens - 1 - accepted; verified tokens: steps + draft tokens). A is what a step costs
   whatever it verifies, B what each verified token adds, prefill(task) what the drafter cannot change.
2. Replay: the tasks' greedy outputs (quickdraft's engine, --dtype, the prediction drafter: exact, so plain
   decoding's tokens), every drafter proposing up to --k tokens per step, accepting its longest agreeing
   prefix plus one token; with the vLLM proposer's sizing (sizing.DraftRates + batch_lengths, one request,
   the fitted line) and without. Modelled decode seconds = sum over steps of A + B * verified tokens.

The outputs of quickdraft's bf16 engine are not vLLM's bf16 outputs token for token (both run bf16 kernels
that round differently); the replay compares drafters on the same text, not engines.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from quickdraft.cpu import describe
from quickdraft.drafters.base import FirstOf
from quickdraft.drafters.lookup import LookupConfig, PromptLookupDrafter
from quickdraft.drafters.prediction import PredictionConfig, PredictionDrafter
from quickdraft.batch_sizing import batch_lengths
from quickdraft.sizing import DraftRates, draft_gains
from quickdraft.vllm.replay import replay_steps

WIDE = LookupConfig(min_ngram=2, max_ngram=5, num_tokens=32)
ALL_IT_HAS = PredictionConfig(initial_draft=64, min_draft=64)  # drafts up to the budget whatever its evidence
DRAFTERS = {  # name -> drafter factory(prediction ids)
    "prediction (default policy)": lambda p: PredictionDrafter(p, PredictionConfig.for_policy("default")),
    "prediction, all it has": lambda p: PredictionDrafter(p, ALL_IT_HAS),
    "lookup 3-gram, 24 (quickdraft's)": lambda p: PromptLookupDrafter(LookupConfig()),
    "lookup 2-5-gram, 32": lambda p: PromptLookupDrafter(WIDE),
    "like vLLM n-gram: 2-5-gram, 16": lambda p: PromptLookupDrafter(LookupConfig(min_ngram=2, max_ngram=5, num_tokens=16)),
    "prediction, then lookup 2-5": lambda p: FirstOf([DRAFTERS["prediction (default policy)"](p), PromptLookupDrafter(WIDE)]),
    "lookup 2-5, then prediction": lambda p: FirstOf([PromptLookupDrafter(WIDE), DRAFTERS["prediction (default policy)"](p)]),
}


def fit(rows: list[dict]) -> tuple[dict[str, float], float, float]:
    """(prefill seconds per task, A, B) from one-client vLLM rows with vLLM's spec-decode counts."""
    rows = [r for r in rows if r["clients"] == 1 and r.get("vllm_accepted") is not None]
    tasks = sorted({r["task"] for r in rows})
    X, y = [], []
    for r in rows:
        steps = r["tokens"] - 1 - r["vllm_accepted"]
        X.append([float(r["task"] == t) for t in tasks] + [steps, steps + r["vllm_drafted"]])
        y.append(r["seconds"])
    solution = np.linalg.lstsq(np.array(X), np.array(y), rcond=None)[0]
    return dict(zip(tasks, solution[:-2])), float(solution[-2]), float(solution[-1])


def greedy_outputs(args) -> list[dict]:
    cache = Path(args.outputs)
    if cache.exists():
        return json.loads(cache.read_text())
    import quickdraft
    from quickdraft.bench import workloads as W

    gen = quickdraft.load(args.model, dtype=args.dtype, progress=False)
    runs = []
    for name in args.workloads.split(","):
        for task in W.WORKLOADS[name].load(W.data_dir(), args.limit):
            r = gen.generate(task.messages, prediction=task.prediction, max_new_tokens=args.max_new_tokens)
            runs.append({"workload": name, "task": task.id, "prompt_ids": r.prompt_token_ids, "output": r.token_ids,
                         "prediction_ids": gen.tokenizer.encode(task.prediction, add_special_tokens=False)})
    cache.write_text(json.dumps(runs))
    return runs


def replay(make, run: dict, k: int, line: tuple[float, float], sized: bool) -> tuple[int, float]:
    """(decode steps, modelled seconds) of one output with one drafter."""
    a_step, b_token = line
    prompt, out = run["prompt_ids"], run["output"]
    drafter = make(run["prediction_ids"])
    rates, running, steps, seconds = DraftRates(), False, 0, 0.0

    def propose(context: list[int], i: int):
        draft = drafter.propose(context, min(k, len(out) - i)).head(k)
        if sized and len(draft):
            known = rates.rates(running)
            draft = draft.head(batch_lengths([None if known is None else draft_gains(known, len(draft))],
                                             [len(draft)], line)[0])
        return draft

    for draft, accepted, new in replay_steps(drafter, prompt, out, propose):
        if len(draft):
            rates.record(running, len(draft), accepted)
            running = accepted == len(draft)
        steps, seconds = steps + 1, seconds + a_step + b_token * (1 + len(draft))
    return steps, seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", required=True, help="runs.jsonl of a one-client scripts/vllm_bench.py run")
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--workloads", default="refactor,edit_eval")
    ap.add_argument("--limit", type=int, default=3)
    ap.add_argument("--max-new-tokens", type=int, default=512)
    ap.add_argument("--k", type=int, default=32)
    ap.add_argument("--outputs", default="bench-out/vllm-replay-outputs.json", help="greedy outputs (made once)")
    args = ap.parse_args()
    rows = [json.loads(line) for line in Path(args.runs).read_text().splitlines()]
    prefill, a_step, b_token = fit(rows)
    print(f"vLLM run: {rows[0]['cpu']}; replay on: {describe()}\n")
    print(f"fit: a step {a_step * 1e3:.1f} ms + {b_token * 1e3:.2f} ms per verified token; prefill per task: "
          + ", ".join(f"{t} {s:.2f} s" for t, s in prefill.items()) + "\n")
    for method in sorted({r["method"] for r in rows if r["clients"] == 1}):
        rs = [r for r in rows if r["clients"] == 1 and r["method"] == method]
        total = sum(r["seconds"] for r in rs)
        print(f"measured {method}: {total:.1f} s end to end, of which prefill {sum(prefill[r['task']] for r in rs):.1f} s")
    runs = greedy_outputs(args)
    print(f"\nreplay, {len(runs)} outputs, K = {args.k}: decode steps per task, modelled decode seconds\n")
    print("| drafter | steps (unsized) | decode s (unsized) | steps (sized) | decode s (sized) |")
    print("|---|---|---|---|---|")
    for name, make in DRAFTERS.items():
        cells = []
        for sized in (False, True):
            results = [replay(make, run, args.k, (a_step, b_token), sized) for run in runs]
            cells += [" ".join(str(s) for s, _ in results), f"{sum(t for _, t in results):.1f}"]
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
