"""Is speculative sampling exact on a real model? A probe with far more power than task scores.

Speculative sampling emits each token x_t distributed as the target's processed distribution p_t
given the tokens before it. So for any function f of the token, f(x_t) - E_{p_t}[f] has mean 0 given
the past, and over a few thousand positions their sum divided by the square root of the summed
variances (a z-score) is near N(0, 1). This script runs the draft-model method (speculative sampling,
the engine's defaults: adaptive length, early stops, sizer) on benchmark prompts, records every
verify pass (the target's processed rows p and the draft model's rows q), and then re-computes the
target's distribution at every emitted position the way plain sampling does, one token per pass with
the cache built one token at a time (p'). It reports, per statistic, the z-score:

- draft pull, f = q_t: does the output lean towards the draft model's choices? (positions with a draft row)
- sharpness, f = p'_t: does it prefer the target's likely tokens (or unlikely ones)?
- surprise, f = log p'_t: the per-token log-likelihood that quality scores follow.
- EOS, f = 1[x is an end token]: does it stop early or late?

Each z comes with the mean shift per token that would have given |z| = 3: the smallest bias the run could show.

each against the engine's own rows p (does the acceptance rule do what it says?) and against p'
(does the verify pass compute the same distribution as plain decoding's one-token passes?), and how
far p is from p' (total variation, KL) on average.

Example:
    .venv/bin/python docs/results/2026-11-25-exactness-probe/exactness_probe.py --workload summarization --limit 20 --temperature 0.7 \\
        --out bench-out/exactness-probe
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import torch

import quickdraft
import quickdraft.acceptance as acceptance_mod
from quickdraft.bench import workloads as W
from quickdraft.bench.harness import _seed
from quickdraft.options import DecodeOptions
from quickdraft.sampling import SamplingParams, probs_from_logits

STATS = ("pull", "sharp", "surprise", "eos")


def record_passes(passes: list):
    """Wrap verify_sampling so that every call is kept as (draft tokens, q rows or None, p rows, verdict tokens)."""
    inner = acceptance_mod.verify_sampling

    def wrapped(draft, target_probs, generator):
        verdict = inner(draft, target_probs, generator)
        passes.append((draft.tokens, draft.probs, target_probs.clone(), verdict.tokens))
        return verdict

    acceptance_mod.verify_sampling = wrapped
    return lambda: setattr(acceptance_mod, "verify_sampling", inner)


def one_token_rows(gen, prompt_ids: list[int], seq: list[int], sampling: SamplingParams):
    """p'_t for t = 0..len(seq)-1: the target's processed rows, one token per pass as plain decoding runs."""
    runner = gen.runner
    runner.reset()
    runner.prefill(prompt_ids[:-1])
    token = prompt_ids[-1]
    for x in seq:
        yield probs_from_logits(runner.forward([token])[-1:], sampling)[0]  # [V]
        token = x


def moments(p: torch.Tensor, f: torch.Tensor) -> tuple[float, float]:
    """(E_p[f], Var_p[f]) for a distribution p [V] and values f [V]."""
    m = float((p * f).sum())
    return m, max(0.0, float((p * f * f).sum()) - m * m)


def position_stats(x: int, p: torch.Tensor, q: torch.Tensor | None, eos: torch.Tensor) -> dict[str, tuple[float, float]]:
    """{stat: (f(x) - E_p f, Var_p f)} for one emitted token x with reference distribution p [V]."""
    out = {}
    if q is not None:
        m, v = moments(p, q)
        out["pull"] = (float(q[x]) - m, v)
    m, v = moments(p, p)
    out["sharp"] = (float(p[x]) - m, v)
    logp = torch.log(p.clamp_min(1e-30))
    m, v = moments(p, logp)
    out["surprise"] = (float(logp[x]) - m, v)
    m, v = moments(p, eos)
    out["eos"] = (float(eos[x]) - m, v)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--draft-model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--workload", default="summarization")
    ap.add_argument("--limit", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=0, help="which benchmark repeat's seeds to use")
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--max-new-tokens", type=int, default=256)
    ap.add_argument("--out", type=Path, help="folder for positions.jsonl (resumable: tasks in it are skipped)")
    ap.add_argument("--summary", type=Path, help="print the summary of a positions.jsonl and stop (runs nothing)")
    ap.add_argument("--outputs", type=Path, help="instead of generating, score the outputs of a bench runs.jsonl "
                    "(--method's rows) against one-token passes: the same statistics, for any method")
    ap.add_argument("--method", default="plain-sampled", help="with --outputs: whose rows")
    ap.add_argument("--repeats", default="", help="with --outputs: which repeats (e.g. 0,1; default all)")
    ap.add_argument("--first-tokens", type=int, default=0, metavar="N",
                    help="instead: N short runs per task (seeds 0..N-1, the prompt's cache reused), the first token's "
                         "histogram against the target's distribution (chi-square), for plain sampling and the draft model")
    ap.add_argument("--tasks", default="", help="with --first-tokens: task ids (comma-separated; default: --limit's)")
    args = ap.parse_args()
    if args.summary:
        print(summary(args.summary))
        return

    if args.out is None:
        ap.error("--out is required unless --summary is given")
    args.out.mkdir(parents=True, exist_ok=True)
    rows_path = args.out / "positions.jsonl"
    done = set()
    if rows_path.exists():
        done = {json.loads(line)["task"] for line in rows_path.open()}
    gen = quickdraft.load(args.model, draft_model=args.draft_model)
    workload = W.WORKLOADS[args.workload]
    tasks = list(workload.load(W.data_dir(), args.limit))
    if args.outputs:
        score_outputs(gen, args, tasks, rows_path)
        print(summary(rows_path))
        return
    if args.first_tokens:
        chosen = [t for t in tasks if not args.tasks or t.id in args.tasks.split(",")]
        first_tokens(gen, args, chosen, args.out / "first_tokens.jsonl")
        return
    for task in tasks:
        if task.id in done:
            continue
        t0 = time.perf_counter()
        seed = _seed(args.workload, task.id, args.repeat)
        sampling = SamplingParams(temperature=args.temperature, seed=seed)
        prompt_ids = gen.encode_prompt(task.messages)
        passes: list = []
        restore = record_passes(passes)
        try:
            res = gen.generate(task.messages, DecodeOptions(drafter="draft-model", sampling=sampling,
                                                            max_new_tokens=args.max_new_tokens))
        finally:
            restore()
        seq = [x for *_, tokens in passes for x in tokens]  # every token a pass emitted, in order
        assert seq[: len(res.token_ids)] == list(res.token_ids), "the recorded passes do not spell the output"
        eos = torch.zeros(passes[0][2].shape[-1])
        eos[list(gen.tokenizer.eos_token_ids)] = 1.0
        plain = one_token_rows(gen, prompt_ids, seq, sampling)
        with rows_path.open("a") as fh:
            t = 0
            for draft_tokens, q_rows, p_rows, tokens in passes:
                for j, x in enumerate(tokens):
                    p, p1 = p_rows[j], next(plain)
                    q = q_rows[j].float() if q_rows is not None and j < len(draft_tokens) else None
                    row = {"task": task.id, "t": t, "drafted": q is not None, "from_draft": j < len(tokens) - 1,
                           "tv": 0.5 * float((p - p1).abs().sum()),
                           "kl": float((p1 * (torch.log(p1.clamp_min(1e-30)) - torch.log(p.clamp_min(1e-30)))).sum()),
                           "engine": position_stats(x, p, q, eos), "plain": position_stats(x, p1, q, eos)}
                    fh.write(json.dumps(row) + "\n")
                    t += 1
        print(f"{task.id}: {len(res.token_ids)} tokens, {len(seq)} positions, {len(passes)} passes, "
              f"{time.perf_counter() - t0:.0f} s", flush=True)
    print(summary(rows_path))


def score_outputs(gen, args, tasks, rows_path: Path) -> None:
    """positions.jsonl rows for the outputs a bench run recorded (runs.jsonl: output_tokens, finish_reason),
    against one-token passes. An answer that ended at an end token has that position too, for the EOS
    statistic only (the run did not record which end token it was)."""
    by_id = {t.id: t for t in tasks}
    runs = [json.loads(line) for line in args.outputs.open()]
    runs = [r for r in runs if r["method"] == args.method and r["task"] in by_id and r["workload"] == args.workload
            and (not args.repeats or str(r["repeat"]) in args.repeats.split(","))]
    done = {json.loads(line)["task"] for line in rows_path.open()} if rows_path.exists() else set()
    for run in runs:
        key = f"{run['task']}/r{run['repeat']}"
        if key in done:
            continue
        t0 = time.perf_counter()
        task = by_id[run["task"]]
        sampling = SamplingParams(temperature=args.temperature, seed=0)
        prompt_ids = gen.encode_prompt(task.messages)
        seq = list(run["output_tokens"][0])
        ended = run["finish_reason"][0] == "stop"
        plain = one_token_rows(gen, prompt_ids, seq + ([None] if ended else []), sampling)
        eos = None
        with rows_path.open("a") as fh:
            for t, p1 in enumerate(plain):
                if eos is None:
                    eos = torch.zeros(p1.shape[-1])
                    eos[list(gen.tokenizer.eos_token_ids)] = 1.0
                if t < len(seq):
                    stats = position_stats(seq[t], p1, None, eos)
                else:  # the end token: which one is not known, so only its indicator
                    m, v = moments(p1, eos)
                    stats = {"eos": (1.0 - m, v)}
                fh.write(json.dumps({"task": key, "t": t, "drafted": False, "plain": stats}) + "\n")
        print(f"{key}: {len(seq)} tokens, {time.perf_counter() - t0:.0f} s", flush=True)


def reuse_prefix(runner) -> None:
    """Make a runner's reset + prefill of the same tokens as last time a rollback to them: many short runs
    from one prompt without its prefill each time. Bit for bit what a fresh prefill gives (the same tensors)."""
    real_reset, real_prefill, last = runner.reset, runner.prefill, {"tokens": None}

    def prefill(tokens):
        if last["tokens"] == list(tokens) and runner.length >= len(tokens):
            runner.rollback(len(tokens))
            return
        real_reset()
        real_prefill(tokens)
        last["tokens"] = list(tokens)

    runner.reset = lambda: None
    runner.prefill = prefill


def chi2_sf(x: float, df: int) -> float:
    """P(chi-square with df degrees of freedom > x)."""
    return float(torch.special.gammaincc(torch.tensor(df / 2, dtype=torch.float64), torch.tensor(x / 2, dtype=torch.float64)))


def first_tokens(gen, args, tasks, path: Path) -> None:
    """N runs per task and method (plain sampling: 1 token; the draft model: 8, so that it drafts up to 7 as it would
    in a longer answer); the first token's histogram against p_0 (tokens of p_0 >= 0.01
    apart, the rest pooled), chi-square. Under exactness each method's statistic follows chi-square(df)."""
    reuse_prefix(gen.runner)
    reuse_prefix(gen.draft_runner)
    for task in tasks:
        prompt_ids = gen.encode_prompt(task.messages)
        sampling = SamplingParams(temperature=args.temperature, seed=0)
        p0 = next(one_token_rows(gen, prompt_ids, [None], sampling))  # [V]
        big = [int(i) for i in torch.nonzero(p0 >= 0.01).flatten()]
        expected = [float(p0[i]) for i in big] + [1.0 - float(p0[big].sum())]
        for drafter in ("none", "draft-model"):
            counts = [0] * len(expected)
            t0 = time.perf_counter()
            for seed in range(args.first_tokens):
                res = gen.generate(task.messages, DecodeOptions(drafter=drafter, max_new_tokens=1 if drafter == "none" else 8,
                                   sampling=SamplingParams(temperature=args.temperature, seed=seed)))
                x = res.token_ids[0] if res.token_ids else -1
                counts[big.index(x) if x in big else -1] += 1
            n = args.first_tokens
            stat = sum((c - n * e) ** 2 / (n * e) for c, e in zip(counts, expected) if e > 0)
            df = len(expected) - 1
            row = {"task": task.id, "drafter": drafter, "n": n, "tokens": [gen.tokenizer.decode([i]) for i in big] + ["(rest)"],
                   "expected": [round(e, 4) for e in expected], "counts": counts, "chi2": round(stat, 2), "df": df,
                   "p_value": chi2_sf(stat, df), "seconds": round(time.perf_counter() - t0, 1)}
            with path.open("a") as fh:
                fh.write(json.dumps(row) + "\n")
            print(f"{task.id} {drafter}: chi2 {stat:.1f} (df {df}, p {row['p_value']:.3g}); rest {counts[-1]}/{n} "
                  f"against {expected[-1]:.4f}; " + ", ".join(f"{t!r} {c}/{e:.3f}" for t, c, e in
                                                              zip(row["tokens"], counts, expected)), flush=True)


def summary(rows_path: Path) -> str:
    rows = [json.loads(line) for line in rows_path.open()]
    lines = [f"{len(rows)} positions over {len({r['task'] for r in rows})} tasks "
             f"({sum(r['drafted'] for r in rows)} with a draft row)"]
    for ref in ("engine", "plain"):
        if not any(ref in r for r in rows):
            continue
        parts = []
        for s in STATS:
            vals = [r[ref][s] for r in rows if ref in r and s in r[ref]]
            total, var = sum(v[0] for v in vals), sum(v[1] for v in vals)
            z = total / math.sqrt(var) if var > 0 else float("nan")
            n = max(1, len(vals))
            parts.append(f"{s} z={z:+.2f} (mean {total / n:+.4f}, |z| = 3 at {3 * math.sqrt(var) / n:.4f}, n {len(vals)})")
        lines.append(f"against p from the {'verify passes' if ref == 'engine' else 'one-token passes'}: " + "; ".join(parts))
    tv = sorted(r["tv"] for r in rows if "tv" in r)
    kl = [r["kl"] for r in rows if "kl" in r]
    if tv:
        lines.append(f"verify rows against one-token rows: TV mean {sum(tv) / len(tv):.4f}, median {tv[len(tv) // 2]:.4f}, "
                     f"max {tv[-1]:.4f}; KL(p'||p) mean {sum(kl) / len(kl):.5f}")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
