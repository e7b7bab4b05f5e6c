"""The Predicted Outputs study: the published reverse-engineering experiments of OpenAI's hosted
Predicted Outputs, replayed on a scripted target for the `openai` and `default` policies.

The target is a ScriptedRunner: its greedy output is a fixed script, so which draft tokens it agrees
with is known exactly and nothing but the policy decides the counts. Tokens are distinct symbols
(the published experiments used runs of letters; distinct ids keep every match unambiguous, as in
tests/test_accounting.py, whose hand-worked cases this reuses as reference points).

Experiments (the script is s = 1..n):
  bifurcation   the prediction is right up to position b, then wrong to the end (tokens the output
                never contains); b from 0 to n.
  insertion     the output inserts L tokens the prediction does not have at position p; the
                prediction is the script without them. Varied p at fixed L, and varied L at fixed p.

Measured per run: accepted and rejected draft tokens (OpenAI's meaning), target passes, the rejected
tokens of each departure (a pass whose draft was cut), and for insertions how many output tokens
agreeing with the prediction again came after the insertion before drafting resumed.

Published shape (docs/predicted-outputs.md): at most 16 tokens verified per pass, so never more than
16 rejected per departure; after a departure no drafting until about 32 tokens of the prediction have
been confirmed again.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Sequence

from ..core import Stats
from ..drafters.prediction import POLICIES as PREDICTION_POLICIES, PredictionConfig, PredictionDrafter
from ..engine import Limits, generate
from ..runners.scripted import ScriptedRunner

POLICIES = ("openai", *(p for p in PREDICTION_POLICIES if p != "openai"))  # every policy, the service's own first
EOS, PROMPT = 0, (1,)
WRONG = 1_000  # ids from here on never appear in a script (n < WRONG): wrong prediction / inserted material


@dataclass
class Trace:
    """Counts of one scripted generation."""

    policy: str
    accepted: int
    rejected: int
    passes: int
    completion: int
    departures: list[tuple[int, int]] = field(default_factory=list)  # (output index of the miss, rejected)
    drafts: list[int] = field(default_factory=list)  # draft length per pass
    resume_after: int | None = None  # insertions: agreeing tokens after the insertion before drafting resumed


def simulate(script: Sequence[int], prediction: Sequence[int], policy: str, resume_from: int | None = None) -> Trace:
    """Generate `script` with a prediction drafter; `resume_from`: output index where the output
    starts agreeing with the prediction again (the end of an insertion), to measure recovery."""
    script = list(script)
    vocab = max([*script, *prediction, *PROMPT, EOS]) + 1  # small: the target builds [n, vocab] logits per pass
    runner = ScriptedRunner(script, vocab, EOS)
    stats = Stats()
    drafter = PredictionDrafter(list(prediction), PredictionConfig.for_policy(policy))
    limits = Limits(len(script) + 1, frozenset({EOS}))
    trace = Trace(policy, 0, 0, 0, 0)
    emitted = 0
    departed = False
    for step in generate(runner, [*PROMPT], limits, drafter, None, stats):
        drafted, accepted = len(step.verdict.draft), step.verdict.accepted
        trace.drafts.append(drafted)
        if (resume_from is not None and departed and trace.resume_after is None and drafted
                and emitted >= resume_from):
            trace.resume_after = emitted - resume_from
        if drafted and accepted < drafted:
            trace.departures.append((emitted + accepted, drafted - accepted))
            departed = True
        emitted += len(step.tokens)
    assert emitted == len(script), "the scripted target must reproduce its script"
    trace.accepted, trace.rejected = stats.accepted_prediction_tokens, stats.rejected_prediction_tokens
    trace.passes, trace.completion = stats.target_passes, stats.completion_tokens
    return trace


def bifurcation(n: int, b: int, policy: str) -> Trace:
    """Prediction right up to position b, then wrong to the end."""
    script = list(range(1, n + 1))
    return simulate(script, script[:b] + list(range(WRONG, WRONG + n - b)), policy)


def insertion(n: int, p: int, length: int, policy: str) -> Trace:
    """The output inserts `length` new tokens at position p; the prediction is the text without them."""
    base = list(range(1, n + 1))
    script = base[:p] + list(range(WRONG, WRONG + length)) + base[p:]
    return simulate(script, base, policy, resume_from=p + length)


# The hand-worked 58-token cases of tests/test_accounting.py next to what was published for the service.
REFERENCE_POINTS = (
    # (case, prediction edit, published accepted / rejected)
    ("right prediction (58 tokens)", None, "55 / 0 (3 generated)"),
    ("prediction: 5 tokens replaced at token 23", ("replace", 22, 5), "about 21 / 11"),
    ("prediction: 3 tokens added at token 23", ("insert", 22, 3), "about 21 / 11"),
    ("prediction: 1 token replaced at token 30", ("replace", 29, 1), "about 21 / 11"),
)


def _edited(seq: list[int], kind: str, at: int, size: int) -> list[int]:
    junk = list(range(WRONG, WRONG + size))
    return seq[:at] + junk + (seq[at:] if kind == "insert" else seq[at + size:])


@dataclass
class StudyResult:
    rows: list[dict]
    summary: dict[str, dict]
    files: list[Path]


def run_study(out: str | Path, n: int = 200, insert_length: int = 8, insert_position: int = 40,
              position_step: int = 1) -> StudyResult:
    """Run every experiment for both policies; write study.jsonl, study.md and plots/study_*.png under out."""
    if not 0 < n < WRONG or insert_length < 1 or not 0 <= insert_position <= n or position_step < 1:
        raise ValueError(f"study sizes out of range: need 0 < n < {WRONG}, 0 <= insert_position <= n, "
                         "insert_length >= 1, position_step >= 1")
    import torch

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tensors of a few hundred numbers: threads only add overhead
    try:
        rows, reference = _experiments(n, insert_length, insert_position, position_step)
    finally:
        torch.set_num_threads(threads)
    summary = summarize(rows, n)
    with open(out / "study.jsonl", "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    plots = _plots(out, rows, n, insert_length, insert_position)
    md = out / "study.md"
    md.write_text(_markdown(summary, reference, plots, n, insert_length, insert_position), encoding="utf-8")
    return StudyResult(rows, summary, [out / "study.jsonl", md, *plots])


def _experiments(n: int, insert_length: int, insert_position: int, position_step: int) -> tuple[list[dict], list[dict]]:
    rows: list[dict] = []

    def add(experiment: str, x_name: str, x: int, t: Trace, **extra: int) -> None:
        row = {"experiment": experiment, x_name: x, **extra, **asdict(t)}
        row["max_rejected_per_departure"] = max((r for _, r in t.departures), default=0)
        rows.append(row)

    for policy in POLICIES:
        for b in range(0, n + 1, position_step):
            add("bifurcation", "position", b, bifurcation(n, b, policy))
        for p in range(0, n + 1, position_step):
            add("insertion_position", "position", p, insertion(n, p, insert_length, policy), length=insert_length)
        for length in range(1, 65, position_step):
            add("insertion_length", "length", length, insertion(n, insert_position, length, policy), position=insert_position)
    reference = []
    s58 = list(range(1, 59))
    for case, edit, published in REFERENCE_POINTS:
        pred = s58 if edit is None else _edited(s58, *edit)
        got = {pol: simulate(s58, pred, pol) for pol in POLICIES}
        reference.append({"case": case, "published": published,
                          **{pol: f"{t.accepted} / {t.rejected} ({t.passes} passes)" for pol, t in got.items()}})
    return rows, reference


def summarize(rows: list[dict], n: int) -> dict[str, dict]:
    """Per policy: the largest rejection of one departure, the recovery after insertions, totals."""
    out: dict[str, dict] = {}
    for pol in POLICIES:
        mine = [r for r in rows if r["policy"] == pol]
        ins = [r for r in mine if r["experiment"].startswith("insertion")]
        resumed = [r["resume_after"] for r in ins if r["resume_after"] is not None]
        out[pol] = {
            "max_rejected_per_departure": max(r["max_rejected_per_departure"] for r in mine),
            "resume_after_min": min(resumed, default=None),
            "resume_after_max": max(resumed, default=None),
            "insertions_never_resumed": sum(1 for r in ins if r["resume_after"] is None and r["departures"]),
            **{f"{e}_{k}": sum(r[k] for r in mine if r["experiment"] == e)
               for e in ("bifurcation", "insertion_position", "insertion_length")
               for k in ("accepted", "rejected", "passes")},
        }
    return out


def _plots(out: Path, rows: list[dict], n: int, insert_length: int, insert_position: int) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder = out / "plots"
    folder.mkdir(parents=True, exist_ok=True)
    style = {"openai": dict(color="tab:red"), "default": dict(color="tab:blue")}
    specs = [
        ("bifurcation", "position", f"prediction right up to the bifurcation position, then wrong ({n}-token output)",
         "bifurcation position (tokens)", ("accepted", "rejected", "passes")),
        ("insertion_position", "position", f"the output inserts {insert_length} new tokens at a position ({n}-token prediction)",
         "insertion position (tokens)", ("accepted", "rejected", "resume_after")),
        ("insertion_length", "length", f"the output inserts new tokens at position {insert_position}, varied length",
         "inserted tokens", ("accepted", "rejected", "resume_after")),
    ]
    labels = {"accepted": "accepted draft tokens", "rejected": "rejected draft tokens", "passes": "target passes",
              "resume_after": "agreeing tokens before drafting resumes"}
    paths = []
    for experiment, x_name, title, xlabel, panels in specs:
        fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 3.8))
        for ax, y in zip(axes, panels):
            for pol in POLICIES:
                rs = [r for r in rows if r["experiment"] == experiment and r["policy"] == pol]
                pts = [(r[x_name], r[y]) for r in rs if r[y] is not None]
                ax.plot([p[0] for p in pts], [p[1] for p in pts], label=f"{pol} policy", linewidth=1.2, **style[pol])
            if y == "rejected":
                ax.axhline(16, color="gray", linestyle=":", linewidth=0.8)
            if y == "resume_after":
                ax.axhline(32, color="gray", linestyle=":", linewidth=0.8)
            ax.set_xlabel(xlabel)
            ax.set_ylabel(labels[y])
            ax.legend(fontsize=8)
        fig.suptitle(title, fontsize=10)
        fig.tight_layout()
        path = folder / f"study_{experiment}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths


def _markdown(summary: dict, reference: list[dict], plots: list[Path], n: int, insert_length: int,
              insert_position: int) -> str:
    o, d = summary["openai"], summary["default"]
    lines = [
        "# Predicted Outputs study (scripted target)", "",
        "Reproduces the published reverse-engineering experiments of OpenAI's hosted Predicted Outputs on a scripted "
        "target (quickdraft.runners.ScriptedRunner: its greedy output is a fixed script of distinct tokens), for "
        "quickdraft's `openai` policy and its `default` policy. Greedy, one token per symbol. "
        "Rebuild: `quickdraft bench predicted-outputs-study --out DIR`.", "",
        "## What the curves show", "",
        "| | `openai` policy | `default` policy |", "|---|---|---|",
        f"| most rejected tokens for one departure | {o['max_rejected_per_departure']} | {d['max_rejected_per_departure']} |",
        f"| agreeing tokens after an insertion before drafting resumes | {_range(o)} | {_range(d)} |",
        f"| insertions after which drafting never resumed (too few tokens left) | {o['insertions_never_resumed']} | "
        f"{d['insertions_never_resumed']} |",
    ]
    for e, label in (("bifurcation", f"bifurcation, b = 0..{n}"), ("insertion_position", f"insertion of {insert_length}, every position"),
                     ("insertion_length", f"insertion at {insert_position}, lengths 1..64")):
        lines.append(f"| {label}: accepted / rejected / passes, summed | {o[e + '_accepted']} / {o[e + '_rejected']} / "
                     f"{o[e + '_passes']} | {d[e + '_accepted']} / {d[e + '_rejected']} / {d[e + '_passes']} |")
    window = PredictionConfig().window
    lines += [
        "", "- `openai`: never more than 16 rejected per departure (it verifies 16 per pass), and after a departure it "
        "drafts again only once 32 output tokens agree with the prediction: the published shape.",
        f"- `default`: re-anchors after one agreeing token within {window} tokens of where the output would be after "
        "a same-length replacement, after two anywhere (at once, after a run, where such a replacement leaves it: "
        f"here an insertion longer than {window} tokens waits for two) and sizes drafts by the run of agreement "
        "(16, 50, 128 from the start; 8, 20, 62, 128 after a re-anchor), so it accepts more and needs far fewer "
        "passes; a departure inside one of its longer drafts costs up to that draft (at most 128) in rejected tokens, "
        "so its rejected totals are not lower than `openai`'s.", "",
        "## Reference points (58-token script; hand-worked in tests/test_accounting.py)", "",
        "| case | published (OpenAI) accepted / rejected | `openai` policy | `default` policy |", "|---|---|---|---|",
    ]
    lines += [f"| {r['case']} | {r['published']} | {r['openai']} | {r['default']} |" for r in reference]
    lines += ["", "## Plots", ""] + [f"![{p.stem}](plots/{p.name})" for p in plots] + [""]
    return "\n".join(lines)


def _range(s: dict) -> str:
    lo, hi = s["resume_after_min"], s["resume_after_max"]
    return "never" if lo is None else str(lo) if lo == hi else f"{lo}–{hi}"
