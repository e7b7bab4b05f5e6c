"""The report's PNG plots: speedups, accepted tokens per pass, prediction survival, speed against quality, and
mentored decoding's KL against its bound; one colour per method in every plot."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from .methods import METHODS
from .rows import group_by, in_method_order, kl_bound, workloads_in

PLOTS_DIR = "plots"


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
    paths += [_pareto(plt, rows, w, folder / f"pareto_{w}.png") for w in workloads_in([r for r in rows if r.get("scores")])]
    if any(kl_bound(r["method"]) is not None for r in rows):
        paths.append(_kl_used(plt, rows, folder / "kl_used.png"))
    return paths


def _pareto(plt: Any, rows: list[dict], workload: str, path: Path) -> Path:
    """Speed against quality, one point per method (issue 21): median end-to-end speedup over plain (bars: the
    middle half of the tasks) against the mean score (bars: 95 % bootstrap interval), one panel per score."""
    from .scoring import bootstrap

    scored = [r for r in rows if r["workload"] == workload and r.get("scores")]
    names = sorted({k for r in scored for k in r["scores"]})
    fig, axes = plt.subplots(1, len(names), figsize=(6.5 * len(names), 5.0), squeeze=False)
    for ax, name in zip(axes[0], names):
        for m in in_method_order(r["method"] for r in scored):
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
    for i, w in enumerate(workloads_in(runs)):
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
    workloads = workloads_in(rows)
    methods = in_method_order(r["method"] for r in rows)
    fig, ax = plt.subplots(figsize=(min(20.0, max(7.0, 1.5 + 0.15 * len(workloads) * max(1, len(methods)))), 4.8))
    if not rows:
        ax.text(0.5, 0.5, "no runs to show", ha="center", va="center", transform=ax.transAxes)
    width = 0.8 / max(1, len(methods))
    by = group_by(rows, "workload", "method")
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
    for m in in_method_order(r["method"] for r in pred):
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
