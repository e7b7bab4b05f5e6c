"""Replay prompt lookup's growth (GROWTH, MAX_TOKENS in drafters/lookup.py) and prefer "longest" over outputs of
tasks no held-out run uses, through the engine with the draft sizer (scripts/draft_replay.py), at pass costs
measured on the AMD EPYC (those of ../2026-11-27-verify-vs-prefill/replay_prediction_lookup.py). With a
prediction the drafter is prediction+lookup; `lookup` as the second argument replays lookup alone on every task.

    C=docs/results/2026-11-27-verify-vs-prefill/collect_outputs.py T=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4
    for a in "apply_edit_eval 12 60" "edit_eval 12 40" "refactor 12 22" "summarization 10 30" "rag 10 30"; do
      LD_PRELOAD=$T .venv/bin/python $C $a outputs.jsonl; done
    .venv/bin/python docs/results/2026-11-28-lookup-growth/replay_growth.py outputs.jsonl lookup
    .venv/bin/python docs/results/2026-11-28-lookup-growth/replay_growth.py outputs.jsonl
    .venv/bin/python docs/results/2026-11-28-lookup-growth/replay_growth.py outputs.jsonl vllm   # vLLM's step loop, k 32

`vllm`: the vLLM plugin's steps (vllm/replay.py: the first token from prefill, drafts cut to k = 32, no sizer), each
priced at the same curves, before and after.
"""
import sys, json, statistics
sys.path.insert(0, "scripts")
from draft_replay import replay, cost_of
from quickdraft.drafters.prediction import PredictionDrafter
from quickdraft.drafters.lookup import PromptLookupDrafter, LookupConfig
from quickdraft.drafters.build import PredictionOrLookup
from quickdraft.sizing import PassCosts
rows = [json.loads(l) for l in open(sys.argv[1])]
short = cost_of({1: 1, 9: 1.16, 17: 1.6, 26: 2.18, 51: 3.5, 89: 6.0, 129: 8.2})
long = cost_of({1: 1, 9: 1.17, 17: 1.64, 21: 1.9, 63: 4.6, 91: 7.2, 129: 9.2})
F = "first"  # the occurrence lookup continued before prefer "longest" became the default
variants = {"growth 0 (before)": LookupConfig(growth=0, prefer=F), "growth 2, 128": LookupConfig(prefer=F),
            "growth 2, 64": LookupConfig(max_tokens=64, prefer=F), "growth 2, 96": LookupConfig(max_tokens=96, prefer=F),
            "growth 2, 128, longest": LookupConfig()}
only = len(sys.argv) > 2 and sys.argv[2] == "lookup"
if len(sys.argv) > 2 and sys.argv[2] == "vllm":
    from quickdraft.vllm.replay import replay_steps
    for wl in dict.fromkeys(r["workload"] for r in rows):
        rs, t = [r for r in rows if r["workload"] == wl], {}
        cost = long if wl in ("refactor", "summarization", "rag") else short
        for name, cfg in (("before", LookupConfig(growth=0, prefer=F)), ("after", LookupConfig(prefer=F)),
                          ("longest", LookupConfig())):
            t[name] = [0.0, 0]
            for r in rs:
                d = (PredictionOrLookup(PredictionDrafter(r["prediction"]), PromptLookupDrafter(cfg)) if r["prediction"]
                     else PromptLookupDrafter(cfg))
                out = r["output"]
                cut = lambda ctx, i: d.propose(ctx, min(32, len(out) - i - 1)).head(max(0, min(32, len(out) - i - 1)))
                for draft, _, _ in replay_steps(d, r["prompt"], out, cut):
                    t[name][0] += cost(len(draft) + 1); t[name][1] += 1
        (b, n), (a, m), (c, o) = t["before"], t["after"], t["longest"]
        print(f"{wl} {len(rs)} tasks, vLLM steps: {n} -> {m} (longest {o}), modelled time {b:.1f} -> {a:.1f} "
              f"({b / a:.3f}x; longest {b / c:.3f}x)")
    sys.exit()
for wl in dict.fromkeys(r["workload"] for r in rows):
    rs = [r for r in rows if r["workload"] == wl]
    cost = long if wl in ("refactor", "summarization", "rag") else short
    base = None
    print(wl, len(rs), "tasks")
    for name, cfg in variants.items():
        shared = PassCosts(); times = []; passes = 0
        for r in rs:
            steps = []
            d = (PredictionOrLookup(PredictionDrafter(r["prediction"]), PromptLookupDrafter(cfg)) if r["prediction"] and not only
                 else PromptLookupDrafter(cfg))
            times.append(replay(d, r["prompt"], r["output"], cost, shared, steps)); passes += len(steps)
        base = base or times
        ratios = [b / t for b, t in zip(base, times)]
        print(f"  {name:18s} time {sum(times):7.1f} passes {passes:5d}  before/this: median {statistics.median(ratios):.3f} "
              f"[{min(ratios):.2f}-{max(ratios):.2f}] summed {sum(base)/sum(times):.3f}", flush=True)
