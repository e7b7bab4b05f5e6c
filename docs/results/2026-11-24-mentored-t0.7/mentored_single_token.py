"""The single-token picture of mentored decoding (issue 21): for real target/draft distribution pairs taken
from a run of scripts/mentored_trade.py, the probability that a drafted token is accepted against the KL
it costs, at each bound D.

    .venv/bin/python docs/results/2026-11-24-mentored-t0.7/mentored_single_token.py --run bench-out/mentored-t0.7 --tasks 6 --positions 40

For each workload of the run, the first --tasks tasks' plain-sampled answers (the target's own samples, so
the contexts are the ones the target meets) are fed through the target and the draft model as the run
loaded them (same models, dtype, int8 draft, temperature); at --positions positions spread over each
answer, p (target) and q (draft) are the processed distributions there. At each bound D,
acceptance/mentored.mentor gives the emitted distribution pi, its acceptance sum(min(q, pi)) and its
KL(p || pi); D = 0 is speculative sampling (sum(min(p, q))). Writes single_token.json and
plots/single_token.png into the run's folder and prints the medians.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import quickdraft
from quickdraft.acceptance.mentored import kl_divergence, mentor
from quickdraft.bench import harness
from quickdraft.bench import workloads as W
from quickdraft.sampling import SamplingParams, probs_from_logits

BOUNDS = (0.0, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0)  # nats per token


def pairs(gen, prompt: list[int], answer: list[int], positions: int, params: SamplingParams):
    """(p, q) at `positions` positions spread over the answer: the target's and the draft's processed
    distributions for the answer's token there, given the prompt and the answer before it."""
    context = prompt + answer
    logits = {}
    for name, runner in (("p", gen.runner), ("q", gen.draft_runner)):
        runner.reset()
        runner.prefill(prompt[:-1])
        logits[name] = runner.forward(context[len(prompt) - 1 : -1])  # [len(answer), V]: row j predicts answer[j]
        runner.reset()
    step = max(1, len(answer) // positions)
    for j in range(0, len(answer), step)[:positions]:
        yield (probs_from_logits(logits["p"][j : j + 1], params)[0].double(),
               probs_from_logits(logits["q"][j : j + 1], params)[0].double())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", required=True, help="a scripts/mentored_trade.py output folder")
    ap.add_argument("--tasks", type=int, default=6)
    ap.add_argument("--positions", type=int, default=40, help="positions per answer")
    args = ap.parse_args()
    out = Path(args.run)
    meta = harness.read_meta(out)
    config = meta["config"]
    rows = [r for r in harness.read_runs(out) if r["method"] == "plain-sampled" and r["repeat"] == 0]
    params = SamplingParams(temperature=config["temperature"])
    gen = quickdraft.load(config["model"], draft_model=config["draft_model"], dtype=config.get("dtype", "auto"),
                          kernels=config.get("kernels", "auto"), progress=False)
    data = W.data_dir(config.get("data"))
    session = harness.Session(gen, harness.BenchConfig(model=config["model"], workloads=(), methods=(), out=out, data=data))
    result: dict[str, dict] = {}
    for workload in sorted({r["workload"] for r in rows}):
        answers = {r["task"]: r["output_tokens"][0] for r in rows if r["workload"] == workload}
        tasks = [t for t in W.WORKLOADS[workload].load(data, None) if t.id in answers][: args.tasks]
        points = []  # per position: KL(p || q), and per bound: (acceptance, KL used)
        for task in tasks:
            for p, q in pairs(gen, session.prompt_ids(task.messages), answers[task.id], args.positions, params):
                ms = [mentor(p, q, d) for d in BOUNDS]
                points.append({"kl_draft": kl_divergence(p, q), "acceptance": [m.acceptance(p, q) for m in ms],
                               "kl": [m.kl for m in ms]})
        result[workload] = {"tasks": [t.id for t in tasks], "positions": len(points), "points": points}
        print(f"{workload}: {len(tasks)} tasks, {len(points)} positions; median KL(p || q) "
              f"{statistics.median(x['kl_draft'] for x in points):.3f}")
        for i, d in enumerate(BOUNDS):
            acc = [x["acceptance"][i] for x in points]
            print(f"  D = {d:g}: acceptance median {statistics.median(acc):.3f}, mean {statistics.fmean(acc):.3f}; "
                  f"KL used mean {statistics.fmean(x['kl'][i] for x in points):.4f}")
    (out / "single_token.json").write_text(json.dumps({"bounds": BOUNDS, "temperature": params.temperature,
                                                       "workloads": result}))
    plot(result, out / "plots" / "single_token.png")


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8))
    for workload, r in result.items():
        pts = r["points"]
        kl = [statistics.fmean(x["kl"][i] for x in pts) for i in range(len(BOUNDS))]
        acc = [statistics.fmean(x["acceptance"][i] for x in pts) for i in range(len(BOUNDS))]
        axes[0].plot(kl, acc, marker="o", label=f"{workload} ({len(pts)} positions)")
        for d, x, y in zip(BOUNDS, kl, acc):
            axes[0].annotate(f"D={d:g}", (x, y), textcoords="offset points", xytext=(3, -9), fontsize=6)
        axes[1].scatter([x["kl"][BOUNDS.index(0.1)] for x in pts], [x["acceptance"][BOUNDS.index(0.1)] for x in pts],
                        s=8, alpha=0.5, label=workload)
    axes[0].set_xscale("symlog", linthresh=1e-3)
    axes[0].set_xlabel("KL(target || emitted) per token, mean over positions (nats)")
    axes[0].set_ylabel("acceptance probability of a drafted token, mean")
    axes[0].set_title("one token: acceptance against KL, bound D = 0 (exact) to 3")
    axes[1].set_xlabel("KL used at the position (nats), D = 0.1")
    axes[1].set_ylabel("acceptance probability at the position")
    axes[1].set_title("every position at D = 0.1")
    for ax in axes:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
