"""The benchmark report: Markdown tables and PNG plots, rebuilt from runs.jsonl and run.json alone.

Speedup of a run = its end-to-end tokens/s over the end-to-end tokens/s of its baseline (plain
decoding of the same runner) on the same task and repeat (the task's median baseline when that
repeat's baseline is missing). For identical outputs this is baseline time / method time.
Cells of the tables are "median [min-max]" over all runs (tasks x repeats) of a workload.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable

from .harness import MEMORY_MEASURES, RUNS_FILE, read_meta, read_runs, row_key
from .methods import METHODS

REPORT_FILE, PLOTS_DIR = "report.md", "plots"
FAIL = "🔴"


def latest_rows(rows: Iterable[dict]) -> list[dict]:
    """One row per (workload, task, method, repeat): the last one written (a retried error is replaced)."""
    by: dict[tuple, dict] = {}
    for r in rows:
        by[row_key(r)] = r
    return list(by.values())


def with_speedups(rows: list[dict]) -> list[dict]:
    """Rows (without errors) with `speedup` and `speedup_decode` against their baseline."""
    ok = [r for r in rows if not r.get("error")]
    base: dict[tuple, dict] = {}
    base_med: dict[tuple, dict[str, float | None]] = {}
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in ok:
        if r["method"] == r["baseline"]:
            base[r["workload"], r["task"], r["method"], r["repeat"]] = r
            groups[r["workload"], r["task"], r["method"]].append(r)
    for k, rs in groups.items():
        base_med[k] = {f: _median([x.get(f) for x in rs]) for f in ("tokens_per_s", "decode_tokens_per_s")}
    out = []
    for r in ok:
        b = base.get((r["workload"], r["task"], r["baseline"], r["repeat"]))
        ref = {f: b.get(f) for f in ("tokens_per_s", "decode_tokens_per_s")} if b else \
            base_med.get((r["workload"], r["task"], r["baseline"]), {})
        r = dict(r)
        r["speedup"] = _ratio(r.get("tokens_per_s"), ref.get("tokens_per_s"))
        r["speedup_decode"] = _ratio(r.get("decode_tokens_per_s"), ref.get("decode_tokens_per_s"))
        out.append(r)
    return out


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _median(xs: Iterable[float | None]) -> float | None:
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def _spread(xs: Iterable[float | None], fmt: str = "{:.2f}", suffix: str = "") -> str:
    xs = [x for x in xs if x is not None]
    if not xs:
        return "–"
    med = fmt.format(statistics.median(xs)) + suffix
    if len(xs) == 1 or min(xs) == max(xs):
        return med
    return f"{med} [{fmt.format(min(xs))}–{fmt.format(max(xs))}]"


def _mean(xs: Iterable[float | None], fmt: str = "{:.1f}") -> str:
    xs = [x for x in xs if x is not None]
    return fmt.format(statistics.mean(xs)) if xs else "–"


def _order(names: Iterable[str]) -> list[str]:
    rank = {n: i for i, n in enumerate(METHODS)}
    return sorted(set(names), key=lambda n: rank.get(n, len(rank)))


def _identical_cell(rs: list[dict]) -> str:
    if rs[0].get("sampled"):
        return "n/a (sampled)"
    known = [r for r in rs if r.get("identical") is not None]
    same = sum(r["identical"] for r in known)
    if not known:
        return "–"
    if not rs[0]["exact"]:
        return f"{same}/{len(known)} (lossy)"
    return f"{same}/{len(known)}" if same == len(known) else f'{FAIL} **<span style="color:red">{same}/{len(known)}</span>**'


# -- the report ---------------------------------------------------------------------------------------

def build(out: Path) -> Path:
    """Write out/report.md and out/plots/*.png from out/runs.jsonl and out/run.json; return the report path."""
    out = Path(out)
    meta = read_meta(out)
    all_rows = latest_rows(read_runs(out))
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
            (ours, "quickdraft methods differ from plain greedy decoding",
             "An exact method must reproduce plain greedy decoding token for token; these did not."),
            (theirs, "other tools' exact methods differ from their own plain greedy decoding",
             "Not a quickdraft result: the tool itself drafts and verifies, and on this machine its drafted "
             "output is not its plain output (for llama.cpp: kernels that round differently for batches, "
             "docs/llamacpp.md). Its speed is shown but is not a like-for-like figure.")):
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
        lines += [f"**Exactness: {n}/{n} runs of quickdraft's exact methods identical to plain greedy decoding "
                  "of the same runner.**", ""]
    return lines


def _skipped(invocation: dict) -> str:
    """' after the first N' where the run left out each workload's first N tasks (bench --skip)."""
    return f" after the first {invocation['skip']}" if invocation.get("skip") else ""


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
                     f"{_draft_precision(cfg)}{_kernels(last)}limit {last.get('limit')} tasks per workload{_skipped(last)}, repeats "
                     f"{last.get('repeats')}, chat template {'applied' if meta.get('chat_template') else 'none (plain text)'}, "
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


def _by(rows: list[dict], *keys: str) -> dict[tuple, list[dict]]:
    out: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        out[tuple(r[k] for k in keys)].append(r)
    return out


def _workloads(rows: list[dict]) -> list[str]:
    return list(dict.fromkeys(r["workload"] for r in rows))


def _summary_table(rows: list[dict]) -> list[str]:
    methods = [m for m in _order(r["method"] for r in rows)]
    by = _by(rows, "workload", "method")
    lines = ["## End-to-end speedup over plain decoding (median)", "",
             "| workload | " + " | ".join(methods) + " |", "|---|" + "---|" * len(methods)]
    for w in _workloads(rows):
        cells = []
        for m in methods:
            rs = by.get((w, m), [])
            med = _median(r.get("speedup") for r in rs)
            cell = "–" if med is None else f"{med:.2f}x"
            if rs and rs[0]["exact"] and any(r.get("identical") is False for r in rs):
                cell = f"{FAIL} {cell}"
            cells.append(cell)
        lines.append(f"| {w} | " + " | ".join(cells) + " |")
    return lines + [""]


def _head_to_head(rows: list[dict], meta: dict) -> list[str]:
    """Each quickdraft method against the other tools' nearest methods (Method.rivals), task by task."""
    tps = {(r["workload"], r["task"], r["method"], r["repeat"]): r.get("tokens_per_s") for r in rows}
    table = []
    for w in _workloads(rows):
        for m in _order(r["method"] for r in rows if r["workload"] == w):
            for rival in METHODS[m].rivals if m in METHODS else ():
                pairs = [(tps[k], tps.get((w, k[1], rival, k[3]))) for k in tps if k[0] == w and k[2] == m]
                pairs = [(a, b) for a, b in pairs if a and b]
                if pairs:
                    ratios = [a / b for a, b in pairs]
                    table.append(f"| {w} | {m} | {rival} | {_spread(ratios, suffix='x')} | "
                                 f"{sum(x > 1 for x in ratios)}/{len(ratios)} | {_median(a for a, _ in pairs):.2f} | "
                                 f"{_median(b for _, b in pairs):.2f} |")
    if not table:
        return []
    runner = meta.get("config", {}).get("runner", "transformers")
    return ["## Head to head with the tools people use today", "",
            f"End-to-end tokens/s of a quickdraft method (on the {runner} runner) over the other tool's nearest "
            "method, on the same task and repeat: above 1.00x quickdraft is faster. transformers runs on the same "
            "loaded weights; llama.cpp on the model's GGUF (quantised: on the transformers runner, a speed "
            "comparison of the two tools, not of the same arithmetic).", "",
            "| workload | quickdraft | against | ratio median [min–max] | quickdraft ahead | quickdraft tok/s | "
            "theirs tok/s |", "|---|---|---|---|---|---|---|", *table, ""]


def _slower_than_plain(rows: list[dict]) -> list[str]:
    """Which quickdraft drafting methods were slower than plain decoding, per workload and run by run."""
    drafted = [r for r in rows if r["engine"] == "quickdraft" and r["method"] != r["baseline"]
               and r.get("speedup") is not None]
    if not drafted:
        return []
    by = _by(drafted, "workload", "method")
    slow_runs = [r for r in drafted if r["speedup"] < 1]
    slow_cells = [(k, rs) for k, rs in by.items() if _median(r["speedup"] for r in rs) < 1]
    lines = ["## Slower than plain decoding?", ""]
    if not slow_cells:
        lines.append("No quickdraft method has a median end-to-end speedup below 1.00x on any workload.")
    else:
        lines += ["Workloads where a quickdraft method's median end-to-end speedup is below 1.00x:", "",
                  "| workload | method | median speedup | runs below 1.00x |", "|---|---|---|---|"]
        for (w, m), rs in slow_cells:
            lines.append(f"| {w} | {m} | {_median(r['speedup'] for r in rs):.2f}x | "
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

    base = {(r["workload"], r["task"], r["repeat"]): r["scores"] for r in scored if r["method"] == r["baseline"]}
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
    for (w, m), rs in _by(scored, "workload", "method").items():
        for name in sorted({k for r in rs for k in r["scores"]}):
            values = [r["scores"][name] for r in rs if name in r["scores"]]
            mean, lo, hi = bootstrap(values)
            by_task: dict[str, list[float]] = {}  # task -> its differences, one per repeat
            for r in rs:
                b = base.get((w, r["task"], r["repeat"]), {})
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
            speed = _median(r.get("speedup") for r in rs)
            lines.append(f"| {w} | {m} | {len(values)} | {name} | {mean:.1f} [{lo:.1f}-{hi:.1f}] | {paired} | "
                         f"{'' if speed is None else f'{speed:.2f}x'} |")
    return lines + [""]


def _workload_tables(rows: list[dict]) -> list[str]:
    lines = ["## Results per workload", ""]
    by = _by(rows, "workload", "method")
    for w in _workloads(rows):
        tasks = {r["task"] for r in rows if r["workload"] == w}
        repeats = {r["repeat"] for r in rows if r["workload"] == w}
        lossy = any(r.get("kl_per_token") is not None for r in rows if r["workload"] == w)
        lines += [f"### {w} ({len(tasks)} tasks, {len(repeats)} repeat(s))", "",
                  "| method | runs | identical | tok/s end to end | tok/s decode | speedup | speedup decode | "
                  "accepted/pass | accepted | rejected | target passes | draft forwards | output tokens | peak RSS MiB |"
                  + (" KL/token |" if lossy else ""),
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|" + ("---|" if lossy else "")]
        for m in _order(r["method"] for r in rows if r["workload"] == w):
            rs = by[(w, m)]
            # the KL spent is known for a bounded rule only (rows before 2026-11-25 gave typical / threshold 0)
            kl = [r.get("kl_per_token") for r in rs] if kl_bound(m) is not None else []
            extra = [_spread(kl, fmt="{:.4f}")] if lossy else []
            lines.append(" | ".join([
                f"| {m}", str(len(rs)), _identical_cell(rs),
                _spread(r.get("tokens_per_s") for r in rs), _spread(r.get("decode_tokens_per_s") for r in rs),
                _spread((r.get("speedup") for r in rs), suffix="x"), _spread((r.get("speedup_decode") for r in rs), suffix="x"),
                _spread(r.get("accepted_per_pass") for r in rs),
                _mean(r.get("accepted") for r in rs), _mean(r.get("rejected") for r in rs),
                _mean(r.get("target_passes") for r in rs), _mean(r.get("draft_forwards") for r in rs),
                _mean(r.get("completion_tokens") for r in rs),
                _spread((r.get("peak_rss_mib") for r in rs), fmt="{:.0f}"), *extra,
            ]) + " |")
        lines.append("")
    return lines


def _prediction_table(rows: list[dict]) -> list[str]:
    pred = [r for r in rows if r.get("prediction_tokens") is not None]
    if not pred:
        return []
    methods = _order(r["method"] for r in pred if METHODS.get(r["method"]) and METHODS[r["method"]].uses_prediction)
    lines = ["## Predictions: how much survives, and what it buys", "",
             "Per task: prediction length, share of the prediction found in plain decoding's output, share of "
             "that output found in the prediction (difflib matching blocks, in tokens), and the median "
             "end-to-end speedup of each prediction method.", "",
             "| workload | task | prediction tokens | prediction kept | output from prediction | " + " | ".join(methods) + " |",
             "|---|---|---|---|---|" + "---|" * len(methods)]
    by = _by(pred, "workload", "task")
    for (w, t), rs in by.items():
        r0 = rs[0]
        cells = [_spread((r.get("speedup") for r in rs if r["method"] == m), suffix="x") for m in methods]
        lines.append(f"| {w} | {t} | {r0['prediction_tokens']} | {_pct(r0.get('prediction_kept'))} | "
                     f"{_pct(r0.get('output_from_prediction'))} | " + " | ".join(cells) + " |")
    return lines + [""]


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.0f}%"


def _details(rows: list[dict]) -> list[str]:
    lines = ["<details><summary>Per task (median over repeats [min–max])</summary>", "",
             "| workload | task | method | runs | identical | seconds | tok/s | speedup | accepted | rejected | passes |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    by = _by(rows, "workload", "task", "method")
    for (w, t, m), rs in sorted(by.items(), key=lambda kv: (_workloads(rows).index(kv[0][0]), kv[0][1],
                                                             list(METHODS).index(kv[0][2]) if kv[0][2] in METHODS else 99)):
        lines.append(f"| {w} | {t} | {m} | {len(rs)} | {_identical_cell(rs)} | {_spread(r.get('seconds') for r in rs)} | "
                     f"{_spread(r.get('tokens_per_s') for r in rs)} | {_spread((r.get('speedup') for r in rs), suffix='x')} | "
                     f"{_mean(r.get('accepted') for r in rs)} | {_mean(r.get('rejected') for r in rs)} | "
                     f"{_mean(r.get('target_passes') for r in rs)} |")
    return lines + ["", "</details>", ""]


def _legend() -> list[str]:
    return ["## Columns", "",
            "- identical: runs whose output equals plain greedy decoding of the same runner, token for token "
            "(all turns). Exact methods must be identical; a difference is marked " + FAIL + ". Lossy methods "
            "(mentored) are shown for information.",
            "- tok/s end to end: output tokens / wall time of the whole generation (tokenising the prompt, "
            "prefill, decoding; all turns). tok/s decode: output tokens / decode time (after the prefill; for "
            "transformers and llama.cpp, after the first forward call).",
            "- speedup: end-to-end tok/s over the baseline's (plain of the same runner) on the same task and repeat; "
            "speedup decode: the same with decode tok/s.",
            "- accepted/pass: accepted draft tokens per target forward pass. accepted / rejected: draft tokens kept "
            "/ verified and not kept (OpenAI's meaning), mean per run. For transformers they are derived from "
            "the forward calls (each call emits its accepted tokens + 1); for llama.cpp they are not available.",
            "- target passes: forward passes of the target after the prefill (transformers: all forward calls, "
            "the first one with the prompt). draft forwards: forward passes of the draft model.",
            "- peak RSS: see Setup for how it was measured.",
            "- sampled methods (plain-sampled, draft-model-sampled, mentored-*) sample at the run's temperature with "
            "one seed per task and repeat; their baseline is plain-sampled and they are compared for speed only "
            "(speculative sampling is exact in distribution, not draw for draw). KL/token: mean KL(target || "
            "output) per output token that mentored acceptance reports (nats).", ""]


# -- plots --------------------------------------------------------------------------------------------

def write_plots(out: Path, rows: list[dict]) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder = Path(out) / PLOTS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    drafting = [r for r in rows if r["method"] != r["baseline"]]
    paths.append(_bars(plt, drafting, "speedup", "end-to-end speedup over plain decoding (median, min–max)",
                       folder / "speedup.png", ref_line=1.0))
    paths.append(_bars(plt, [r for r in drafting if r.get("accepted_per_pass") is not None], "accepted_per_pass",
                       "accepted draft tokens per target pass (median, min–max)", folder / "accepted_per_pass.png"))
    paths.append(_survival(plt, rows, folder / "prediction_survival.png"))
    paths += [_pareto(plt, rows, w, folder / f"pareto_{w}.png") for w in _workloads([r for r in rows if r.get("scores")])]
    if any(kl_bound(r["method"]) is not None for r in rows):
        paths.append(_kl_used(plt, rows, folder / "kl_used.png"))
    return paths


def kl_bound(method: str) -> float | None:
    """The KL bound D of a mentored method ("mentored-kl0.1" -> 0.1; methods.mentored_method names them), else None."""
    prefix = "mentored-kl"
    return float(method[len(prefix):]) if method.startswith(prefix) else None


def _pareto(plt: Any, rows: list[dict], workload: str, path: Path) -> Path:
    """Speed against quality, one point per method (issue 21): median end-to-end speedup over plain (bars: the
    middle half of the tasks) against the mean score (bars: 95 % bootstrap interval), one panel per score."""
    from .scoring import bootstrap

    scored = [r for r in rows if r["workload"] == workload and r.get("scores")]
    names = sorted({k for r in scored for k in r["scores"]})
    fig, axes = plt.subplots(1, len(names), figsize=(6.5 * len(names), 5.0), squeeze=False)
    for ax, name in zip(axes[0], names):
        for m in _order(r["method"] for r in scored):
            rs = [r for r in scored if r["method"] == m and name in r["scores"]]
            speeds = sorted(r["speedup"] for r in rs if r.get("speedup") is not None)
            if not rs or not speeds:
                continue
            mean, lo, hi = bootstrap([r["scores"][name] for r in rs])
            x = statistics.median(speeds)
            q1, q3 = speeds[(len(speeds) - 1) // 4], speeds[(3 * (len(speeds) - 1) + 3) // 4]
            exact = rs[0].get("exact") in (True, "True")
            ax.errorbar([x], [mean], xerr=[[x - q1], [q3 - x]], yerr=[[mean - lo], [hi - mean]], fmt="o" if exact else "^",
                        color=_color(plt, m), capsize=3, label=m + ("" if exact else " (lossy)"))
            ax.annotate(m.replace("-sampled", ""), (x, mean), textcoords="offset points", xytext=(4, 4), fontsize=7)
        ax.set_xlabel("end-to-end speedup over plain (median; bars: middle half of the tasks)")
        ax.set_ylabel(f"{name} (mean; bars: 95 % bootstrap interval)")
        ax.set_title(f"{workload}: speed against {name}")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _kl_used(plt: Any, rows: list[dict], path: Path) -> Path:
    """Mean KL(target || emitted) per output token each run of a mentored method reported, against its bound D."""
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    runs = [r for r in rows if kl_bound(r["method"]) is not None and r.get("kl_per_token") is not None]
    bounds = sorted({kl_bound(r["method"]) for r in runs})
    floor = 1e-5  # a run that used no KL at all is drawn here on the log scale
    for i, w in enumerate(_workloads(runs)):
        xs = [kl_bound(r["method"]) * 1.06 ** i for r in runs if r["workload"] == w]  # side by side per workload
        ax.scatter(xs, [max(floor, r["kl_per_token"]) for r in runs if r["workload"] == w], s=12, alpha=0.6, label=w)
    if bounds:
        ax.plot(bounds, bounds, color="black", linewidth=0.8, linestyle="--", label="the bound D")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.legend(fontsize=8)
    else:
        ax.text(0.5, 0.5, "no mentored runs with KL reported", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("KL bound D (nats per token)")
    ax.set_ylabel("KL used per output token, one point per run")
    ax.set_title("mentored decoding: KL used against the bound")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _bars(plt: Any, rows: list[dict], field: str, title: str, path: Path, ref_line: float | None = None) -> Path:
    workloads = _workloads(rows)
    methods = _order(r["method"] for r in rows)
    fig, ax = plt.subplots(figsize=(min(20.0, max(7.0, 1.5 + 0.15 * len(workloads) * max(1, len(methods)))), 4.8))
    if not rows:
        ax.text(0.5, 0.5, "no runs to show", ha="center", va="center", transform=ax.transAxes)
    width = 0.8 / max(1, len(methods))
    by = _by(rows, "workload", "method")
    for j, m in enumerate(methods):
        xs, meds, lo, hi = [], [], [], []
        for i, w in enumerate(workloads):
            vals = [r.get(field) for r in by.get((w, m), []) if r.get(field) is not None]
            if not vals:
                continue
            med = statistics.median(vals)
            xs.append(i - 0.4 + width * (j + 0.5))
            meds.append(med)
            lo.append(med - min(vals))
            hi.append(max(vals) - med)
        if xs:
            bad = any(r["exact"] and r.get("identical") is False for w in workloads for r in by.get((w, m), []))
            ax.bar(xs, meds, width, yerr=[lo, hi], capsize=2, label=m + (" (NOT IDENTICAL)" if bad else ""),
                   color=_color(plt, m), edgecolor="red" if bad else None, linewidth=2 if bad else 0)
    if ref_line is not None:
        ax.axhline(ref_line, color="black", linewidth=0.8, linestyle="--")
    ax.set_xticks(range(len(workloads)))
    ax.set_xticklabels(workloads, rotation=20, ha="right")
    ax.set_title(title)
    if methods:
        ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _color(plt: Any, method: str) -> Any:
    """One colour per method, the same in every plot (mentored bounds: along one colour map, by log D)."""
    import math

    bound = kl_bound(method)
    if bound is not None and bound > 0:
        return plt.get_cmap("viridis")(min(0.9, max(0.0, (math.log10(bound) + 2.5) / 3.0)))
    names = list(METHODS)
    return plt.get_cmap("tab20")(names.index(method) % 20 if method in names else 19)


def _survival(plt: Any, rows: list[dict], path: Path) -> Path:
    pred = [r for r in rows if r.get("output_from_prediction") is not None and METHODS.get(r["method"])
            and METHODS[r["method"]].uses_prediction and r.get("speedup") is not None]
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    if not pred:
        ax.text(0.5, 0.5, "no prediction runs (workloads edit_eval, refactor)", ha="center", va="center",
                transform=ax.transAxes)
    for m in _order(r["method"] for r in pred):
        rs = [r for r in pred if r["method"] == m]
        ax.scatter([100 * r["output_from_prediction"] for r in rs], [r["speedup"] for r in rs], label=m, s=18, alpha=0.7,
                   color=_color(plt, m))
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    ax.set_xlabel("share of plain decoding's output found in the prediction (%)")
    ax.set_ylabel("end-to-end speedup over plain")
    ax.set_title("predictions: speedup against how much of the prediction survives")
    if pred:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
