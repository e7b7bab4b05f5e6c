"""The benchmark report: Markdown tables and PNG plots (plots.py), rebuilt from runs.jsonl and run.json alone.

Speedup of a run = its end-to-end tokens/s over the end-to-end tokens/s of its baseline (the same tool's plain
decoding: quickdraft's plain, transformers' hf-plain, llama.cpp's llamacpp-plain) on the same task and repeat (the
task's median baseline when that repeat's baseline is missing). For identical outputs this is baseline time /
method time. Cells of the tables are "median [min-max]" over all runs (tasks x repeats) of a workload (rows.py).
"""
from __future__ import annotations

from pathlib import Path

from .machine import MEMORY_MEASURES
from .methods import METHODS
from .plots import PLOTS_DIR, write_plots
from .records import RUNS_FILE, read_meta, read_runs
from .rows import (group_by, in_method_order, kl_bound, latest_rows, mean_cell, median_of, on_own_baselines, spread_cell,
                   with_speedups, workloads_in)

REPORT_FILE = "report.md"
FAIL = "🔴"


def _identical_cell(rs: list[dict]) -> str:
    known = [r for r in rs if r.get("identical") is not None]
    if not known:  # a sampled method compared for speed only (speculative sampling), or no baseline
        return "n/a (sampled)" if rs[0].get("sampled") else "–"
    same = sum(r["identical"] for r in known)
    if not rs[0]["exact"]:
        return f"{same}/{len(known)} (lossy)"
    return f"{same}/{len(known)}" if same == len(known) else f'{FAIL} **<span style="color:red">{same}/{len(known)}</span>**'


# -- the report ---------------------------------------------------------------------------------------

def build(out: Path) -> Path:
    """Write out/report.md and out/plots/*.png from out/runs.jsonl and out/run.json; return the report path."""
    out = Path(out)
    meta = read_meta(out)
    all_rows = on_own_baselines(latest_rows(read_runs(out)))
    if not all_rows:
        from ..errors import QuickdraftError

        raise QuickdraftError(f"no runs in {out / RUNS_FILE}: run `quickdraft bench run --out {out}` first")
    errors = [r for r in all_rows if r.get("error")]
    rows = with_speedups(all_rows)
    plots = write_plots(out, rows)
    lines: list[str] = ["# quickdraft benchmark", ""]
    lines += _failures(rows, errors)
    lines += _setup(meta, rows)
    lines += _summary_table(rows)
    lines += _head_to_head(rows, meta)
    lines += _slower_than_plain(rows)
    lines += _workload_tables(rows)
    lines += _quality_table(rows)
    lines += _prediction_table(rows)
    lines += ["## Plots", ""] + [f"![{p.stem}]({PLOTS_DIR}/{p.name})" for p in plots] + [""]
    lines += _details(rows)
    lines += _legend()
    path = out / REPORT_FILE
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _failures(rows: list[dict], errors: list[dict]) -> list[str]:
    bad = [r for r in rows if r["exact"] and r.get("identical") is False]
    ours = [r for r in bad if r.get("engine", "quickdraft") == "quickdraft"]
    theirs = [r for r in bad if r not in ours]
    lines: list[str] = []
    for group, title, why in (
            (ours, "quickdraft methods differ from plain decoding",
             "An exact method must reproduce plain decoding token for token (greedy, or sampled with the same seed "
             "for lookup-sampled and prediction-sampled); these did not."),
            (theirs, "other tools' exact methods differ from their own plain greedy decoding",
             "Not a quickdraft result: the tool itself drafts and verifies, and on this machine its drafted "
             "output is not its own plain output (transformers' against hf-plain, llama.cpp's against "
             "llamacpp-plain; for llama.cpp: kernels that round differently for batches, docs/llamacpp.md). Its "
             "speed is shown but is not a like-for-like figure.")):
        if not group:
            continue
        lines += [f'## {FAIL} <span style="color:red">FAILED: {len(group)} run(s) of {title}</span>', "", why, "",
                  "| workload | task | method | repeat | first differing token | output tokens |",
                  "|---|---|---|---|---|---|"]
        for r in group:
            lines.append(f"| {r['workload']} | {r['task']} | {r['method']} | {r['repeat']} | {r['first_divergence']} "
                         f"| {r['completion_tokens']} |")
        lines.append("")
    if errors:
        lines += [f'## {FAIL} <span style="color:red">{len(errors)} run(s) raised an error</span>', "",
                  "| workload | task | method | repeat | error |", "|---|---|---|---|---|"]
        for r in errors:
            lines.append(f"| {r['workload']} | {r['task']} | {r['method']} | {r['repeat']} | {str(r['error'])[:200]} |")
        lines.append("")
    exact = [r for r in rows if r["exact"] and r.get("identical") is not None]
    if exact and not ours:
        n = sum(r.get("engine", "quickdraft") == "quickdraft" for r in exact)
        lines += [f"**Exactness: {n}/{n} runs of quickdraft's exact methods identical to plain decoding of the "
                  "same runner (greedy, or sampled with the same seed).**", ""]
    return lines


def _each(invocations: list[dict], key: str) -> str:
    """An invocation setting as the run's invocations gave it: '8', or '4, then 8' where a resume changed it."""
    return ", then ".join(str(v) for v in dict.fromkeys(i.get(key) for i in invocations)) or "None"


def _skipped(invocations: list[dict]) -> str:
    """' after the first N' where the run left out each workload's first N tasks (bench --skip)."""
    return f" after the first {_each(invocations, 'skip')}" if any(i.get("skip") for i in invocations) else ""


def _kernels(invocation: dict) -> str:
    """The transformers runner's Linear kernels as the run recorded them (runs before they were
    recorded used torch's; a llama.cpp target records none)."""
    kernels = invocation.get("kernels", "torch")
    dtype = invocation.get("dtype", "fp32" if kernels else None)  # runs before the dtype option were float32
    invariant = {True: "row-invariant passes (checked at load), ", False: "passes not row-invariant, "}.get(
        invocation.get("row_invariant"), "")
    blocks = f"passes in {invocation['row_block']}-row blocks, " if invocation.get("row_block") else ""  # AMX
    return (f"Linear kernels {kernels}, " if kernels else "") + (f"dtype {dtype}, " if dtype else "") + invariant + blocks


def _draft_precision(config: dict) -> str:
    """A transformers draft model's precision as the run chose it (None: the default, int8); nothing without a
    draft model or with a llama.cpp draft model, which runs its GGUF as it is."""
    if not config.get("draft_model") or (config.get("draft_runner") or config.get("runner")) == "llama.cpp":
        return ""
    return f"draft precision {config.get('draft_precision') or 'int8'}, "


def _setup(meta: dict, rows: list[dict]) -> list[str]:
    inv = meta.get("invocations", [])
    last = inv[-1] if inv else {}
    cfg = meta.get("config", {})
    lines = ["## Setup", ""]
    if inv:
        lines += ["Command line(s), oldest first:", "", "```"] + [" ".join(i.get("argv") or ["(library call)"]) for i in inv] + ["```", ""]
    m = last.get("machine", {})
    if m:
        flags = m.get("cpu_flags")
        lines.append(f"- Machine: {m.get('cpu')}" + (f" [{' '.join(flags)}]" if flags else " [CPU flags not recorded]")
                     + f", {m.get('cores')} cores, {m.get('memory_gib')} GiB memory, "
                     f"{m.get('platform')}, torch threads {m.get('torch_threads')}" + (f", GPU {m['gpu']}" if m.get("gpu") else ""))
        if m.get("llamacpp_stock_repack") is False and any(r.get("engine") == "llama.cpp" for r in rows):
            lines.append("- llama.cpp baselines ran **without repacked weights (no repack)**: this build has llama.cpp's "
                         "AMX kernels, whose repacked buffers crash during decoding here, so they were loaded with "
                         "`use_extra_bufts = False` (docs/llamacpp.md, \"Stock baselines on CPUs with AMX\").")
    v = last.get("versions", {})
    if v:
        lines.append("- Versions: " + ", ".join(f"{k} {val}" for k, val in v.items() if val))
    for role, ident in (meta.get("models") or {}).items():
        if ident:
            lines.append(f"- {role.capitalize()} model: `{ident['name']}`, SHA-256 `{ident['sha256']}` ({ident['hash_of']})")
    if cfg:
        mode = "greedy"
        if any(r.get("sampled") for r in rows):
            mode += f" (sampled methods: temperature {cfg.get('temperature')})"
        lines.append(f"- Settings: {mode}, max_new_tokens {cfg.get('max_new_tokens')}, "
                     f"{_draft_precision(cfg)}{_kernels(last)}limit {_each(inv, 'limit')} tasks per workload"
                     f"{_skipped(inv)}, repeats {_each(inv, 'repeats')}, chat template {'applied' if meta.get('chat_template') else 'none (plain text)'}, "
                     f"data `{cfg.get('data')}`")
    kinds = {r.get("memory_measure") for r in rows if r.get("memory_measure")}
    for k in sorted(kinds):
        lines.append(f"- Peak memory: {MEMORY_MEASURES.get(k, k)}")
    lines.append("- Runs were interleaved (the methods of one task run back to back, their order rotated per task "
                 "and repeat) and repeated; cells are median [min–max] over tasks × repeats.")
    notes = [n for i in inv for n in i.get("notes", [])]
    if notes:
        lines += ["", "Notes (skipped methods and tasks):", ""] + [f"- {n}" for n in dict.fromkeys(notes)]
    return lines + [""]


def _summary_table(rows: list[dict]) -> list[str]:
    methods = [m for m in in_method_order(r["method"] for r in rows)]
    by = group_by(rows, "workload", "method")
    lines = ["## End-to-end speedup over plain decoding (median)", "",
             "Each tool's methods against its own plain decoding: quickdraft's against plain, transformers' against "
             "hf-plain, llama.cpp's against llamacpp-plain. The tools against each other: the head-to-head table.", "",
             "| workload | " + " | ".join(methods) + " |", "|---|" + "---|" * len(methods)]
    for w in workloads_in(rows):
        cells = []
        for m in methods:
            rs = by.get((w, m), [])
            med = median_of(r.get("speedup") for r in rs)
            cell = "–" if med is None else f"{med:.2f}x"
            if rs and rs[0]["exact"] and any(r.get("identical") is False for r in rs):
                cell = f"{FAIL} {cell}"
            cells.append(cell)
        lines.append(f"| {w} | " + " | ".join(cells) + " |")
    return lines + [""]


def _head_to_head(rows: list[dict], meta: dict) -> list[str]:
    """Each quickdraft method against the other tools' nearest methods (Method.rivals), task by task, and whether the
    two wrote the same tokens (each tool's exactness is against its own plain decoding; this is across tools)."""
    by_key = {(r["workload"], r["task"], r["method"], r["repeat"]): r for r in rows}
    table = []
    for w in workloads_in(rows):
        for m in in_method_order(r["method"] for r in rows if r["workload"] == w):
            for rival in METHODS[m].rivals if m in METHODS else ():
                pairs = [(r, by_key.get((w, k[1], rival, k[3]))) for k, r in by_key.items() if k[0] == w and k[2] == m]
                pairs = [(a, b) for a, b in pairs if b is not None and a.get("tokens_per_s") and b.get("tokens_per_s")]
                if pairs:
                    ratios = [a["tokens_per_s"] / b["tokens_per_s"] for a, b in pairs]
                    same = [a["output_tokens"] == b["output_tokens"] for a, b in pairs
                            if a.get("output_tokens") is not None and b.get("output_tokens") is not None]
                    table.append(f"| {w} | {m} | {rival} | {spread_cell(ratios, suffix='x')} | "
                                 f"{sum(x > 1 for x in ratios)}/{len(ratios)} | "
                                 f"{median_of(a['tokens_per_s'] for a, _ in pairs):.2f} | "
                                 f"{median_of(b['tokens_per_s'] for _, b in pairs):.2f} | "
                                 f"{f'{sum(same)}/{len(same)}' if same else '–'} |")
    if not table:
        return []
    runner = meta.get("config", {}).get("runner", "transformers")
    return ["## Head to head with the tools people use today", "",
            f"End-to-end tokens/s of a quickdraft method (on the {runner} runner) over the other tool's nearest "
            "method, on the same task and repeat: above 1.00x quickdraft is faster. transformers runs on the same "
            "loaded weights; llama.cpp on the model's GGUF (quantised: on the transformers runner, a speed "
            "comparison of the two tools, not of the same arithmetic). same output: runs where both wrote the same "
            "tokens; the two tools' plain decodings may differ (other kernels sum in another order), which is not a "
            "failure of either: each one's drafted methods are checked against its own plain decoding.", "",
            "| workload | quickdraft | against | ratio median [min–max] | quickdraft ahead | quickdraft tok/s | "
            "theirs tok/s | same output |", "|---|---|---|---|---|---|---|---|", *table, ""]


def _slower_than_plain(rows: list[dict]) -> list[str]:
    """Which quickdraft drafting methods were slower than plain decoding, per workload and run by run."""
    drafted = [r for r in rows if r["engine"] == "quickdraft" and r["method"] != r["baseline"]
               and r.get("speedup") is not None]
    if not drafted:
        return []
    by = group_by(drafted, "workload", "method")
    slow_runs = [r for r in drafted if r["speedup"] < 1]
    slow_cells = [(k, rs) for k, rs in by.items() if median_of(r["speedup"] for r in rs) < 1]
    lines = ["## Slower than plain decoding?", ""]
    if not slow_cells:
        lines.append("No quickdraft method has a median end-to-end speedup below 1.00x on any workload.")
    else:
        lines += ["Workloads where a quickdraft method's median end-to-end speedup is below 1.00x:", "",
                  "| workload | method | median speedup | runs below 1.00x |", "|---|---|---|---|"]
        for (w, m), rs in slow_cells:
            lines.append(f"| {w} | {m} | {median_of(r['speedup'] for r in rs):.2f}x | "
                         f"{sum(r['speedup'] < 1 for r in rs)}/{len(rs)} |")
        lines.append("")
    worst = sorted(slow_runs, key=lambda r: r["speedup"])[:10]
    lines.append(f"Single runs below 1.00x: {len(slow_runs)} of {len(drafted)}"
                 + (" (slowest: " + ", ".join(f"{r['workload']}/{r['task']} {r['method']} {r['speedup']:.2f}x"
                                              for r in worst) + ")." if worst else "."))
    return lines + [""]


def _quality_table(rows: list[dict]) -> list[str]:
    """Task quality per workload and method (bench/scoring.py): mean over tasks and repeats, with a 95 %
    bootstrap interval, beside the median end-to-end speedup: what a lossy method's speed costs. Beside it,
    each method's difference from its baseline paired by task and repeat (same prompt, same seed): the task's
    own difficulty cancels, so that interval is the one that says whether a method changed the answers. Its
    interval resamples tasks, not pairs: repeats of one task are not independent (on 20 summaries x 4 seeds
    the pairs gave [-4.5 to -0.8] where the tasks give [-5.4 to -0.3])."""
    scored = [r for r in rows if r.get("scores")]
    if not scored:
        return []
    from .scoring import bootstrap

    # each baseline's scores by (workload, task, baseline, repeat): several baselines score the same task (plain,
    # plain-sampled, each other tool's plain decoding), and a method is paired with its own
    base = {(r["workload"], r["task"], r["method"], r["repeat"]): r["scores"] for r in scored
            if r["method"] == r["baseline"]}
    lines = ["## Quality of the answers", "",
             "Mean score over the runs of each workload (95 % bootstrap interval over runs), scored against the "
             "task's reference: HumanEval pass@1 by its own tests, math_reasoning accuracy of the final number, "
             "translation chrF and BLEU, summarization and rag ROUGE-L (0-100). \"difference\": the method's score "
             "minus its baseline's on the same task and repeat, mean over those pairs with a 95 % bootstrap interval "
             "that resamples tasks (with repeats, each task's mean difference over them) "
             "(paired: an interval that excludes 0 is a difference these tasks show; its half-width is about the "
             "smallest difference this many tasks can show). Exact methods must match their baseline: their "
             "difference interval should hold 0.", "",
             "| workload | method | runs | score | mean [95 % interval] | difference [95 % interval], pairs | "
             "median speedup |", "|---|---|---|---|---|---|---|"]
    for (w, m), rs in group_by(scored, "workload", "method").items():
        for name in sorted({k for r in rs for k in r["scores"]}):
            values = [r["scores"][name] for r in rs if name in r["scores"]]
            mean, lo, hi = bootstrap(values)
            by_task: dict[str, list[float]] = {}  # task -> its differences, one per repeat
            for r in rs:
                b = base.get((w, r["task"], r["baseline"], r["repeat"]), {})
                if r["method"] != r["baseline"] and name in r["scores"] and name in b:
                    by_task.setdefault(r["task"], []).append(r["scores"][name] - b[name])
            paired = ""
            if by_task:
                # repeats of one task share its prompt, so they are not independent pairs: the interval
                # resamples tasks, each its mean over repeats (a cluster bootstrap; one repeat: the pairs)
                task_means = [sum(ds) / len(ds) for ds in by_task.values()]
                _, dlo, dhi = bootstrap(task_means)
                diffs = [x for ds in by_task.values() for x in ds]
                paired = f"{sum(diffs) / len(diffs):+.1f} [{dlo:+.1f} to {dhi:+.1f}], {len(diffs)}"
                if len(diffs) > len(by_task):
                    paired += f" ({len(by_task)} tasks)"
            speed = median_of(r.get("speedup") for r in rs)
            lines.append(f"| {w} | {m} | {len(values)} | {name} | {mean:.1f} [{lo:.1f}-{hi:.1f}] | {paired} | "
                         f"{'' if speed is None else f'{speed:.2f}x'} |")
    return lines + [""]


def _workload_tables(rows: list[dict]) -> list[str]:
    lines = ["## Results per workload", ""]
    by = group_by(rows, "workload", "method")
    for w in workloads_in(rows):
        tasks = {r["task"] for r in rows if r["workload"] == w}
        repeats = {r["repeat"] for r in rows if r["workload"] == w}
        lossy = any(r.get("kl_per_token") is not None for r in rows if r["workload"] == w)
        lines += [f"### {w} ({len(tasks)} tasks, {len(repeats)} repeat(s))", "",
                  "| method | runs | identical | tok/s end to end | tok/s decode | speedup | speedup decode | "
                  "accepted/pass | accepted | rejected | target passes | draft forwards | output tokens | peak RSS MiB |"
                  + (" KL/token |" if lossy else ""),
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|" + ("---|" if lossy else "")]
        for m in in_method_order(r["method"] for r in rows if r["workload"] == w):
            rs = by[(w, m)]
            # the KL spent is known for a bounded rule only (older rows gave typical / threshold 0)
            kl = [r.get("kl_per_token") for r in rs] if kl_bound(m) is not None else []
            extra = [spread_cell(kl, fmt="{:.4f}")] if lossy else []
            lines.append(" | ".join([
                f"| {m}", str(len(rs)), _identical_cell(rs),
                spread_cell(r.get("tokens_per_s") for r in rs), spread_cell(r.get("decode_tokens_per_s") for r in rs),
                spread_cell((r.get("speedup") for r in rs), suffix="x"), spread_cell((r.get("speedup_decode") for r in rs), suffix="x"),
                spread_cell(r.get("accepted_per_pass") for r in rs),
                mean_cell(r.get("accepted") for r in rs), mean_cell(r.get("rejected") for r in rs),
                mean_cell(r.get("target_passes") for r in rs), mean_cell(r.get("draft_forwards") for r in rs),
                mean_cell(r.get("completion_tokens") for r in rs),
                spread_cell((r.get("peak_rss_mib") for r in rs), fmt="{:.0f}"), *extra,
            ]) + " |")
        lines.append("")
    return lines


def _prediction_table(rows: list[dict]) -> list[str]:
    pred = [r for r in rows if r.get("prediction_tokens") is not None]
    if not pred:
        return []
    methods = in_method_order(r["method"] for r in pred if METHODS.get(r["method"]) and METHODS[r["method"]].uses_prediction)
    lines = ["## Predictions: how much survives, and what it buys", "",
             "Per task: prediction length, share of the prediction found in plain decoding's output, share of "
             "that output found in the prediction (difflib matching blocks, in tokens), and the median "
             "end-to-end speedup of each prediction method.", "",
             "| workload | task | prediction tokens | prediction kept | output from prediction | " + " | ".join(methods) + " |",
             "|---|---|---|---|---|" + "---|" * len(methods)]
    by = group_by(pred, "workload", "task")
    for (w, t), rs in by.items():
        r0 = rs[0]
        cells = [spread_cell((r.get("speedup") for r in rs if r["method"] == m), suffix="x") for m in methods]
        lines.append(f"| {w} | {t} | {r0['prediction_tokens']} | {_pct(r0.get('prediction_kept'))} | "
                     f"{_pct(r0.get('output_from_prediction'))} | " + " | ".join(cells) + " |")
    return lines + [""]


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.0f}%"


def _details(rows: list[dict]) -> list[str]:
    lines = ["<details><summary>Per task (median over repeats [min–max])</summary>", "",
             "| workload | task | method | runs | identical | seconds | tok/s | speedup | accepted | rejected | passes |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    by = group_by(rows, "workload", "task", "method")
    for (w, t, m), rs in sorted(by.items(), key=lambda kv: (workloads_in(rows).index(kv[0][0]), kv[0][1],
                                                             list(METHODS).index(kv[0][2]) if kv[0][2] in METHODS else 99)):
        lines.append(f"| {w} | {t} | {m} | {len(rs)} | {_identical_cell(rs)} | {spread_cell(r.get('seconds') for r in rs)} | "
                     f"{spread_cell(r.get('tokens_per_s') for r in rs)} | {spread_cell((r.get('speedup') for r in rs), suffix='x')} | "
                     f"{mean_cell(r.get('accepted') for r in rs)} | {mean_cell(r.get('rejected') for r in rs)} | "
                     f"{mean_cell(r.get('target_passes') for r in rs)} |")
    return lines + ["", "</details>", ""]


def _legend() -> list[str]:
    return ["## Columns", "",
            "- identical: runs whose output equals plain greedy decoding by the same tool, token for token (all "
            "turns): quickdraft's on the same runner (plain), transformers' own (hf-plain), llama.cpp's own "
            "(llamacpp-plain); for lookup-sampled and prediction-sampled, plain-sampled's with the same seed. Exact "
            "methods must be identical; a difference is marked " + FAIL + ". Lossy methods (mentored) are shown for "
            "information.",
            "- tok/s end to end: output tokens / wall time of the whole generation (tokenising the prompt, "
            "prefill, decoding; all turns). tok/s decode: output tokens / decode time (after the prefill; for "
            "transformers and llama.cpp, after the first forward call).",
            "- speedup: end-to-end tok/s over the baseline's (the same tool's plain decoding) on the same task and "
            "repeat; "
            "speedup decode: the same with decode tok/s.",
            "- accepted/pass: accepted draft tokens per target forward pass. accepted / rejected: draft tokens kept "
            "/ verified and not kept (OpenAI's meaning), mean per run. For transformers they are derived from "
            "the forward calls (each call emits its accepted tokens + 1); for llama.cpp they are not available.",
            "- target passes: forward passes of the target after the prefill (transformers: all forward calls, "
            "the first one with the prompt). draft forwards: forward passes of the draft model.",
            "- peak RSS: see Setup for how it was measured.",
            "- sampled methods (*-sampled, mentored-*) sample at the run's temperature with one seed per task and "
            "repeat; their baseline is plain-sampled. Prediction and lookup drafts are verified by the target's own "
            "draws, so their output is plain-sampled's; the draft model's (speculative sampling, exact in "
            "distribution, not draw for draw) is compared for speed only. KL/token: mean KL(target || output) per "
            "output token that mentored acceptance reports (nats).", ""]
