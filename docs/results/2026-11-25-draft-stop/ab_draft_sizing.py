"""A/B of the draft model's length rules, side by side with plain decoding, interleaved per task in
one process on the same loaded weights, through the benchmark's own loop (so multi-turn tasks run
as in `quickdraft bench run`). Greedy outputs must all be identical.

--compare sizing: draft-model (draft_sizing="off": its own adaptive length and confidence stop only)
  against draft-model-capped (draft_sizing="cost": also capped at the length that pays given the
  measured pass costs, acceptance and seconds per draft token).
--compare confidence: the confidence stop at 0.3 (the default) against 0.4 (transformers' default).
--compare trim: the draft model before drafts were trimmed by its confidences (draft_sizing="off",
  min_joint=0) against the default now (trimmed, paused after a draft worth nothing, min_joint=0.5),
  and transformers' assisted generation with the same draft model.
--compare yield: the draft model without the measured-yield skip (DraftSizer.min_yield_evidence = inf:
  its drafting is never skipped for passes that yielded less than plain ones) against the default;
  with --temperature T both sample (speculative sampling beside plain sampling, one seed per task).
--compare stop: sampled drafts drafted on past the token where the sizer's causal trim cuts them (a DraftSizer
  whose keeps() always says yes) against the default, which stops drafting there; use with --temperature T.

Each comparison is a list of methods run by the benchmark's own loop (harness.run: interleaved and
rotated per task, outputs checked against plain decoding, runs.jsonl and report.md in --out).

Usage: .venv/bin/python docs/results/2026-11-25-draft-stop/ab_draft_sizing.py --workloads mt_bench,humaneval --limit 3
         [--compare sizing|confidence|trim|yield|stop] [--temperature T] [--model qwen2.5-coder-1.5b]
         [--draft-model qwen2.5-coder-0.5b] [--max-new-tokens 128] [--out bench-out/ab-draft-sizing]
"""

from __future__ import annotations

import argparse
import math
from dataclasses import replace
from functools import partial
from pathlib import Path
from unittest import mock

import quickdraft
import quickdraft.api
from quickdraft.bench import engines, harness, report
from quickdraft.bench import workloads as W
from quickdraft.bench.methods import METHODS, Method
from quickdraft.drafters.draft_model import DraftModelConfig
from quickdraft.sizing import DraftSizer

NO_YIELD = "draft-model-no-yield"  # run with the measured-yield skip off (below)
NO_STOP = "draft-model-no-stop"  # run with sampled drafts drafted on past where the trim cuts (below)


class TrimOnly(DraftSizer):
    """The sizer as before DraftSizer.keeps: sampled drafts are trimmed, the drafter is never told where."""

    def keeps(self, rates) -> bool:
        return True


SIZERS = {NO_YIELD: partial(DraftSizer, min_yield_evidence=math.inf), NO_STOP: TrimOnly}

COMPARE = {
    "sizing": [
        Method("draft-model", "quickdraft", "draft model, own length rule",
               options=(("drafter", "draft-model"), ("draft_sizing", "off"))),
        Method("draft-model-capped", "quickdraft", "draft model, also capped by measured costs",
               options=(("drafter", "draft-model"), ("draft_sizing", "cost"))),
    ],
    "confidence": [
        Method(f"draft-model-conf{c}", "quickdraft", f"draft model, confidence stop below {c}",
               options=(("drafter", "draft-model"), ("draft", DraftModelConfig(min_confidence=c))))
        for c in (0.3, 0.4)
    ],
    "trim": [
        Method("draft-model-untrimmed", "quickdraft", "draft model as before confidence trimming",
               options=(("drafter", "draft-model"), ("draft_sizing", "off"), ("draft", DraftModelConfig(min_joint=0)))),
        Method("draft-model", "quickdraft", "draft model, defaults", options=(("drafter", "draft-model"),)),
        METHODS["hf-assisted"],
    ],
    "stop": [
        Method(NO_STOP, "quickdraft", "draft model, drafting on past where the trim cuts (before keeps)",
               options=(("drafter", "draft-model"),)),
        Method("draft-model", "quickdraft", "draft model, defaults", options=(("drafter", "draft-model"),)),
    ],
    "yield": [
        Method(NO_YIELD, "quickdraft", "draft model, never skipped for its measured yield",
               options=(("drafter", "draft-model"),)),
        Method("draft-model", "quickdraft", "draft model, defaults", options=(("drafter", "draft-model"),)),
    ],
}


def _run_quickdraft(session, method: Method, messages, prediction, seed: int):
    """The benchmark's quickdraft engine; for NO_YIELD and NO_STOP methods with their SIZERS."""
    sizer = next((make for prefix, make in SIZERS.items() if method.name.startswith(prefix)), None)
    if sizer is None:
        return RUN_QUICKDRAFT(session, method, messages, prediction, seed)
    with mock.patch.object(quickdraft.api, "DraftSizer", sizer):
        return RUN_QUICKDRAFT(session, method, messages, prediction, seed)


RUN_QUICKDRAFT = engines.ENGINES["quickdraft"]


def sampled(method: Method) -> Method:
    return replace(method, name=f"{method.name}-sampled", baseline="plain-sampled", sampled=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--draft-model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--workloads", default="mt_bench,humaneval")
    ap.add_argument("--limit", type=int, default=3)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--out", default="bench-out/ab-draft-sizing")
    ap.add_argument("--compare", choices=sorted(COMPARE), default="sizing")
    ap.add_argument("--temperature", type=float, default=None, help="sample at this temperature (default greedy)")
    args = ap.parse_args()
    if args.temperature is None:
        methods = [METHODS["plain"], *COMPARE[args.compare]]
    else:
        methods = [METHODS["plain-sampled"], *(sampled(m) for m in COMPARE[args.compare] if m.engine == "quickdraft")]
    engines.ENGINES["quickdraft"] = _run_quickdraft
    config = harness.BenchConfig(model=args.model, workloads=tuple(W.select(args.workloads)),
                                 methods=tuple(m.name for m in methods), out=Path(args.out), data=W.data_dir(),
                                 draft_model=args.draft_model, limit=args.limit, max_new_tokens=args.max_new_tokens,
                                 repeats=1, temperature=args.temperature or 0.7,
                                 argv=("docs/results/2026-11-25-draft-stop/ab_draft_sizing.py", "--compare", args.compare))
    gen = quickdraft.load(args.model, draft_model=args.draft_model)
    summary = harness.run(config, gen, methods=methods)
    print(report.build(config.out))
    if summary.mismatches:
        raise SystemExit(f"outputs differ from plain decoding: {summary.mismatches}")


if __name__ == "__main__":
    main()
