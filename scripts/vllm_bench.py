"""vLLM with and without quickdraft, at 1, 4 and 16 concurrent clients, beside quickdraft's own engine.

When to run: to compare with vLLM, after a change to the vLLM plugin or proposer, or on a new machine
(docs/vllm.md; the held-out comparison in docs/benchmarks.md).

    .venv/bin/python scripts/vllm_bench.py --model qwen2.5-coder-0.5b --out docs/results/DATE-vllm

Servers (one at a time, each started, measured and stopped; same vLLM options, bf16, prefix caching off
unless --prefix-caching, so that no method finds its prompts prefilled by the one before it):
    vllm-plain        vLLM without speculation: the reference output and speed
    vllm-ngram        vLLM's own n-gram drafting ("ngram", prompt_lookup 2..5, --ngram-k tokens)
    vllm-quickdraft   `quickdraft serve --engine vllm`: methods vllm+qd-prediction (the edit tasks, the original
                      file as prediction) and vllm+qd-lookup (every task, quickdraft's prompt lookup)
    vllm-quickdraft-unsized   the same with --draft-sizing off (methods .../off): drafts as the drafters make them
then quickdraft's own engine in this process, one client: qd-prediction (edits), qd-lookup (every task).

Tasks: the first --limit tasks (after --skip) of refactor, edit_eval and summarization (../shared/data), greedy,
--max-new-tokens each. At concurrency c, c clients send --rounds requests each, a new one as soon as their last
one is answered (task i % tasks for request i; with --rounds 1, c requests sent at once), so each request's
latency and the server's throughput (all tokens over the wall time from the first request to the last answer)
are measured under that load. With one round the slowest request sets the wall time, which counts against
speculation: a request whose drafts are mostly wrong takes many more steps than the rest, which by then have
finished, and runs nearly alone; more rounds keep c requests in flight for most of the run; --mixes says which tasks
the concurrent batches draw from: "all" (every workload; not for predictions, which need an edit) and
"edits" (the edit tasks only, every method: the like-for-like comparison for predictions). Every vLLM output is
compared with vllm-plain's single-client output of the same task (identical, token for token of text).

Every vLLM server gets what `quickdraft serve --engine vllm` gives vLLM (serve.cpu_settings: on a machine of up to
4 CPUs, VLLM_CPU_NUM_OF_RESERVED_CPU=0, since 2026-11-25), then --vllm-env; `--vllm-env
VLLM_CPU_NUM_OF_RESERVED_CPU=1` gives vLLM's own default, with which every run before that date was made.

Writes OUT/runs.jsonl (one row per request), OUT/report.md (tables) and OUT/plots/*.png. Timings depend
on the machine: the report names the CPU and its flags.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import openai

from quickdraft import models
from quickdraft.bench import workloads as W
from quickdraft.cpu import describe
from quickdraft.vllm.serve import cpu_settings, launched, vllm_python, wait_ready

PORT = 8391
EDITS = ("refactor", "edit_eval", "apply_edit_eval", "apply_refactor")  # workloads with a prediction


def tasks(limit: int, names: list[str], skip: int = 0) -> list[tuple[str, W.Task]]:
    data = W.data_dir()
    return [(name, t) for name in names for t in list(W.WORKLOADS[name].load(data, skip + limit))[skip:]]


def request(url: str, name: str, task: W.Task, method: str, max_tokens: int) -> dict:
    """One chat request; its text, latency and what usage / vLLM's metrics say about drafting."""
    body: dict = {}
    kind = method.split("/")[0]  # vllm+qd-prediction/off: the unsized server's
    if kind in ("vllm+qd-prediction", "vllm+qd-prediction+lookup"):  # named: the server's "auto" is the latter
        body["prediction"] = {"type": "content", "content": task.prediction}
        body["vllm_xargs"] = {"qd_drafter": kind.removeprefix("vllm+qd-")}
    elif kind == "vllm+qd-lookup":
        body["vllm_xargs"] = {"qd_drafter": "lookup"}
    client = openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=3600)
    t0 = time.perf_counter()
    r = client.chat.completions.create(model="m", messages=task.messages, max_tokens=max_tokens, temperature=0,
                                       extra_body=body)
    seconds = time.perf_counter() - t0
    spec = ((r.model_extra or {}).get("metrics") or {}).get("speculative_decoding") or {}
    d = r.usage.completion_tokens_details
    return {"text": r.choices[0].message.content, "seconds": round(seconds, 3), "tokens": r.usage.completion_tokens,
            "prompt_tokens": r.usage.prompt_tokens,
            "accepted": getattr(d, "accepted_prediction_tokens", None) if d else None,
            "rejected": getattr(d, "rejected_prediction_tokens", None) if d else None,
            "spec_steps": spec.get("num_spec_steps"), "vllm_accepted": spec.get("num_accepted_draft_tokens"),
            "vllm_drafted": spec.get("num_draft_tokens")}


def run_server(config: str, argv: list[str], methods: list[str], work: list, args, sink, reference: dict) -> None:
    log = Path(args.out) / f"{config}.log"
    env = {"VLLM_CPU_KVCACHE_SPACE": str(args.kv_cache_gib), **dict(kv.split("=", 1) for kv in args.vllm_env.split())}
    with launched(argv, log, env) as proc:
        t0 = time.perf_counter()
        url = wait_ready(proc, PORT, log, timeout=900)
        print(f"{config}: ready in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
        request(url, *work[0], "vllm-plain", 8)  # the first request after loading is slow (issue 19): not timed
        for method in methods:
            predicts = method.startswith("vllm+qd-prediction")  # +lookup too: needs an edit task
            for c, mix in [(c, mix) for c in args.clients for mix in (["all"] if c == 1 else args.mixes)]:
                chosen = [(n, t) for n, t in work if n in EDITS or (mix == "all" and not predicts)]
                if not chosen or (mix == "all" and predicts and c > 1):
                    continue
                batch = [chosen[i % len(chosen)] for i in range(len(chosen) if c == 1 else c * args.rounds)]
                t0 = time.perf_counter()
                if c == 1:
                    rows = [request(url, n, t, method, args.max_new_tokens) for n, t in batch]
                else:
                    with ThreadPoolExecutor(c) as pool:
                        rows = list(pool.map(lambda nt: request(url, *nt, method, args.max_new_tokens), batch))
                wall = time.perf_counter() - t0
                for (name, task), row in zip(batch, rows):
                    key = (name, task.id)
                    if method == "vllm-plain" and c == 1:
                        reference[key] = row["text"]
                    out = {"engine": "vllm", "server": config, "vllm_env": args.vllm_env, "method": method, "clients": c, "rounds": 1 if c == 1 else args.rounds, "mix": mix, "workload": name,
                           "task": task.id, "batch_wall_s": round(wall, 3), "cpu": describe(),
                           "identical": row["text"] == reference[key] if key in reference else None, **row}
                    out.pop("text")
                    sink.write(json.dumps(out) + "\n")
                sink.flush()
                tok = sum(r["tokens"] for r in rows)
                same = [r["text"] == reference[(n, t.id)] for (n, t), r in zip(batch, rows) if (n, t.id) in reference]
                print(f"{method} x{c} {mix}: {tok} tokens in {wall:.1f} s ({tok / wall:.1f} tok/s)"
                      + (f", identical {sum(same)}/{len(same)}" if same else ""), file=sys.stderr, flush=True)


ENGINE_METHODS = {  # the "quickdraft" server's methods: quickdraft's own engine in this process
    "qd-prediction": lambda task: {"prediction": task.prediction, "drafter": "prediction"},  # named: auto adds lookup
    "qd-prediction+lookup": lambda task: {"prediction": task.prediction, "drafter": "prediction+lookup"},
    "qd-lookup": lambda task: {"drafter": "lookup"},
}


def run_engine(work: list, args, sink) -> None:
    import quickdraft

    gen = quickdraft.load(args.model, progress=False)
    gen.runner.reuse_prefix = args.prefix_caching  # as vLLM's prefix caching: off unless --prefix-caching
    gen.generate(work[0][1].messages, drafter="none", max_new_tokens=8)  # warm up
    for method in args.engine_methods.split(","):
        for name, task in work:
            if method.startswith("qd-prediction") and name not in EDITS:
                continue
            options = ENGINE_METHODS[method](task)
            t0 = time.perf_counter()
            res = gen.generate(task.messages, max_new_tokens=args.max_new_tokens, **options)
            seconds = time.perf_counter() - t0
            s = res.stats
            sink.write(json.dumps({"engine": "quickdraft", "server": "quickdraft", "method": method, "clients": 1,
                                   "workload": name, "task": task.id, "cpu": describe(), "seconds": round(seconds, 3),
                                   "tokens": s.completion_tokens, "prompt_tokens": s.prompt_tokens,
                                   "accepted": s.accepted_prediction_tokens, "rejected": s.rejected_prediction_tokens,
                                   "spec_steps": s.target_passes, "batch_wall_s": round(seconds, 3),
                                   "identical": None}) + "\n")
            sink.flush()
            print(f"{method} {name}/{task.id}: {s.completion_tokens} tokens, {seconds:.1f} s", file=sys.stderr)


def report(out: Path) -> None:
    rows = [json.loads(line) for line in (out / "runs.jsonl").read_text().splitlines()]

    def cells(rs: list[dict], seconds: float) -> str:
        steps = sum(r["spec_steps"] or 0 for r in rs if r.get("accepted") is not None)
        acc = sum(r["accepted"] or 0 for r in rs if r.get("accepted") is not None)
        ident = [r["identical"] for r in rs if r["identical"] is not None]
        return (f"{len(rs)} | {statistics.median(r['seconds'] for r in rs):.2f} | {sum(r['tokens'] for r in rs) / seconds:.1f}"
                f" | {f'{acc / steps:.2f}' if steps else ''} | {f'{sum(ident)}/{len(ident)}' if ident else ''} |")

    lines = ["# vLLM with and without quickdraft", "", f"CPU: {rows[0]['cpu']}. Rows: runs.jsonl; command: "
             "scripts/vllm_bench.py (docs/vllm.md).", "",
             "vLLM's environment: " + (", ".join(sorted({r["vllm_env"] for r in rows if r.get("vllm_env")})) or
                                       "vLLM's defaults") + ".", "", "## One client, per workload", "",
             "Latency: seconds per request, end to end (prefill included). Throughput: tokens / summed latency. "
             "Accepted per step: accepted draft tokens per verify step (vLLM: steps with a draft; quickdraft: "
             "target passes). Identical: text equal to vllm-plain's.", "",
             "| method | workload | requests | median latency s | tokens/s | accepted per step | identical |",
             "|---|---|---|---|---|---|---|"]
    one = [r for r in rows if r["clients"] == 1]
    for workload in sorted({r["workload"] for r in one}):
        for method in sorted({r["method"] for r in one if r["workload"] == workload}):
            rs = [r for r in one if (r["workload"], r["method"]) == (workload, method)]
            lines.append(f"| {method} | {workload} | " + cells(rs, sum(r["seconds"] for r in rs)))
    rounds = sorted({r.get("rounds", 1) for r in rows if r["clients"] > 1})
    lines += ["", "## Concurrent clients", "", f"c clients, {'/'.join(map(str, rounds)) or 1} request(s) each, sent back "
              "to back (one round: c requests sent at once), the tasks in turn; mix all: every workload "
              "(edits and summaries), edits: the edit tasks only (every method, predictions too). Throughput: all "
              "tokens / the wall time from the first request to the last answer.", "",
              "| method | clients | mix | requests | median latency s | tokens/s | accepted per step | identical |",
              "|---|---|---|---|---|---|---|---|"]
    for c in sorted({r["clients"] for r in rows} - {1}):
        for mix in ("all", "edits"):
            for method in sorted({r["method"] for r in rows if r["clients"] == c and r.get("mix", "all") == mix}):
                rs = [r for r in rows if (r["clients"], r["method"], r.get("mix", "all")) == (c, method, mix)]
                lines.append(f"| {method} | {c} | {mix} | " + cells(rs, max(r["batch_wall_s"] for r in rs)))
    (out / "report.md").write_text("\n".join(lines) + "\n")
    plot(rows, out / "plots")
    print(f"wrote {out / 'report.md'} and {out / 'plots'}", file=sys.stderr)


def plot(rows: list[dict], folder: Path) -> None:
    """Throughput by concurrent clients, one line per method (one client: tokens / summed latency)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(exist_ok=True)
    fig, ax = plt.subplots(figsize=(6, 4))
    for method in sorted({r["method"] for r in rows}):
        points = []
        for c in sorted({r["clients"] for r in rows if r["method"] == method}):
            rs = [r for r in rows if (r["method"], r["clients"]) == (method, c) and r.get("mix", "all") == "all"]
            rs = rs or [r for r in rows if (r["method"], r["clients"]) == (method, c)]
            wall = sum(r["seconds"] for r in rs) if c == 1 else max(r["batch_wall_s"] for r in rs)
            points.append((c, sum(r["tokens"] for r in rs) / wall))
        ax.plot(*zip(*points), marker="o", label=method)
    ax.set(xlabel="concurrent clients", ylabel="tokens / s", xscale="log", title=rows[0]["cpu"][:60])
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(folder / "throughput.png", dpi=110)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="qwen2.5-coder-0.5b")
    p.add_argument("--out", required=True)
    p.add_argument("--limit", type=int, default=3, help="tasks per workload (default 3)")
    p.add_argument("--skip", type=int, default=0, help="tasks left out at the start of each workload (held-out runs)")
    p.add_argument("--workloads", default="refactor,edit_eval,summarization")
    p.add_argument("--max-new-tokens", type=int, default=512)
    p.add_argument("--clients", default="1,4,16", help="concurrency levels (default 1,4,16)")
    p.add_argument("--rounds", type=int, default=1,
                   help="requests per client at each concurrency above 1, sent back to back (default 1: one batch)")
    p.add_argument("--mixes", default="all,edits", help="tasks of the concurrent batches: all, edits (default both)")
    p.add_argument("--k", type=int, default=32, help="num_speculative_tokens of the quickdraft server (default 32)")
    p.add_argument("--ngram-k", type=int, default=16, help="num_speculative_tokens of vLLM's n-gram (default 16)")
    p.add_argument("--kv-cache-gib", type=int, default=4)
    p.add_argument("--servers", default="vllm-plain,vllm-ngram,vllm-quickdraft,quickdraft")
    p.add_argument("--quickdraft-methods", default="vllm+qd-prediction,vllm+qd-lookup",
                   help="methods on the quickdraft servers (also vllm+qd-prediction+lookup)")
    p.add_argument("--engine-methods", default="qd-prediction,qd-lookup",
                   help="methods of the quickdraft server (its own engine): " + ", ".join(ENGINE_METHODS))
    p.add_argument("--prefix-caching", action="store_true", help="leave vLLM's prefix caching on (default: off)")
    p.add_argument("--vllm-env", default="", help="KEY=VALUE ... set for every vLLM server (e.g. VLLM_CPU_NUM_OF_RESERVED_CPU=0, "
                   "LD_PRELOAD=...: docs/vllm.md, 'vLLM's own CPU settings')")
    p.add_argument("--report-only", action="store_true")
    args = p.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.report_only:
        return report(out)
    # every server gets what `quickdraft serve --engine vllm` gives vLLM (cpu_settings: all cores on a small machine),
    # then --vllm-env; the rows record the result
    args.vllm_env = " ".join([f"{k}={v}" for k, v in cpu_settings().items()] + args.vllm_env.split())
    args.clients = [int(c) for c in args.clients.split(",")]
    args.mixes = args.mixes.split(",")
    folder = str(models.resolve(args.model, progress=False))
    work = tasks(args.limit, args.workloads.split(","), args.skip)
    python = vllm_python()
    # Without prefix caching: every request pays its own prefill, whichever method ran its prompt before (with it,
    # a server's second method on the same tasks skipped most of its prefills).
    vllm_args = "--dtype bfloat16 --max-model-len 8192 --max-num-seqs 16" + (" --no-enable-prefix-caching" if
                                                                           not args.prefix_caching else "")
    common = ["--model", folder, "--served-model-name", "m", "--port", str(PORT), *vllm_args.split(),
              "--per-request-spec-decode-metrics", "summary"]
    api = [python, "-m", "vllm.entrypoints.openai.api_server"]
    ngram = {"method": "ngram", "num_speculative_tokens": args.ngram_k, "prompt_lookup_min": 2, "prompt_lookup_max": 5}
    servers = {
        "vllm-plain": (api + common[:-2], ["vllm-plain"]),
        "vllm-ngram": (api + common + ["--speculative-config", json.dumps(ngram)], ["vllm-ngram"]),
        "vllm-quickdraft": ([sys.executable, "-m", "quickdraft", "serve", "--engine", "vllm", "--model", folder,
                             "--model-name", "m", "--port", str(PORT), "--num-speculative-tokens", str(args.k),
                             "--vllm-args", vllm_args],
                            args.quickdraft_methods.split(",")),
    }
    argv, _ = servers["vllm-quickdraft"]
    servers["vllm-quickdraft-unsized"] = (argv + ["--draft-sizing", "off"],
                                          [m + "/off" for m in args.quickdraft_methods.split(",")])
    reference: dict = {}
    with open(out / "runs.jsonl", "a") as sink:
        for config in args.servers.split(","):
            if config == "quickdraft":
                run_engine(work, args, sink)
            else:
                argv, methods = servers[config]
                run_server(config, argv, methods, work, args, sink, reference)
    report(out)


if __name__ == "__main__":
    main()
