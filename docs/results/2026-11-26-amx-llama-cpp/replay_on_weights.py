"""The engine end to end with the real model's output and another model's pass costs: the README's edit on a machine
the real weights cannot reach (issue 20's targets are for a CPU with AMX; the device machine that has one takes
64 MiB a call).

record (here, with the real model): plain greedy decoding of the README's edit request (the `quickdraft generate
--edit` example: rename parse_line in examples/inventory.py), saved as the script: prompt ids, output ids. Every job
is also run on the real model and timed, and its output compared with plain decoding's.

replay (anywhere, with --model a folder of the same shapes, e.g. docs/results/2026-11-26-amx-llama-cpp/random_weights.py's): the model's runner
is wrapped in a ShadowScriptedRunner. Every pass runs on the model (so it costs what the model's shapes, dtype,
kernels and row blocks cost on that machine) and returns the script's logits. Because the methods are exact, the
engine, its drafters and its sizer (which reads the passes' measured costs) then draft, verify and accept what they
would with the real model there: the time is the real model's on that machine, up to what the weights' values change
(not a matmul's work; on the project's AMD EPYC a replay on random weights took 41.0 s of plain decoding where the real
model took 41.9: docs/results/2026-11-26-amx-e2e).

Each run is a fresh Generator, as one `quickdraft generate` command is; prefix reuse off.

    .venv/bin/python docs/results/2026-11-26-amx-llama-cpp/replay_on_weights.py record --out /tmp/edit-script.json
    .venv/bin/python docs/results/2026-11-26-amx-llama-cpp/random_weights.py ~/.cache/quickdraft/qwen2.5-coder-0.5b/hf /tmp/rq05
    .venv/bin/python docs/results/2026-11-26-amx-llama-cpp/replay_on_weights.py replay /tmp/edit-script.json --model /tmp/rq05
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import torch

import quickdraft
from quickdraft.api import Generator
from quickdraft.cpu import describe
from quickdraft.prompts import edit_request
from quickdraft.bench.device_check import ShadowScriptedRunner  # the device check's: one copy

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").exists())
INSTRUCTION = "Rename the function parse_line to parse_record and update its caller."  # the README's example
JOBS = {"plain": {"drafter": "none"}, "prediction": {}, "lookup": {"drafter": "lookup"}}


def request() -> tuple[list[dict], str]:
    """The README's edit request, as `quickdraft generate --edit` sends it, and the file as its prediction."""
    source = (ROOT / "examples" / "inventory.py").read_text()
    edit, fenced = edit_request(INSTRUCTION, source, "inventory.py")  # as `quickdraft generate --edit` asks
    return [{"role": "user", "content": edit}], fenced


def run(g: Generator, job: str, messages, prediction: str, max_new_tokens: int) -> tuple:
    """One command's request -> (result, seconds inside the model's decoding passes, or None on the real runner)."""
    extra = dict(JOBS[job])
    if job == "prediction":
        extra["prediction"] = prediction
    fresh = Generator(g.runner, g.tokenizer, name=g.name)  # one command's Generator: no pass costs yet
    shadow = isinstance(g.runner, ShadowScriptedRunner)
    if shadow:
        g.runner.model_s = 0.0
    result = fresh.generate(messages, max_new_tokens=max_new_tokens, prefix_reuse=False, **extra)
    return result, g.runner.model_s if shadow else None


def table(rows: list[tuple[str, list]]) -> str:
    lines = ["| job | prefill s | decode s | ms a token | of which in the model's passes | tokens | target passes | "
             "accepted draft tokens | same as script |", "|---|---|---|---|---|---|---|---|---|"]
    for job, runs in rows:
        med = lambda f: statistics.median(f(run) for run in runs)  # noqa: E731
        first = runs[0][0].stats
        per_token = lambda s: 1000 * s / max(first.completion_tokens, 1)  # noqa: E731
        inside = "-" if runs[0][1] is None else f"{per_token(med(lambda run: run[1])):.1f}"
        lines.append(f"| {job} | {med(lambda run: run[0].stats.prefill_s):.2f} | "
                     f"{med(lambda run: run[0].stats.decode_s):.2f} | "
                     f"{per_token(med(lambda run: run[0].stats.decode_s)):.1f} | {inside} | {first.completion_tokens} | "
                     f"{first.target_passes} | {first.accepted_prediction_tokens} | "
                     f"{all(same for _, _, same in runs)} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=("record", "replay"))
    ap.add_argument("script", nargs="?", type=Path, help="replay: the JSON record wrote")
    ap.add_argument("--out", type=Path, help="record: where to write the script")
    ap.add_argument("--model", default="qwen2.5-coder-0.5b", help="record: the real model; replay: a folder of its "
                    "shapes")
    ap.add_argument("--dtype", default="auto", choices=("auto", "bf16", "fp32"))
    ap.add_argument("--jobs", default="plain,prediction", help=f"of {', '.join(JOBS)}")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--max-new-tokens", type=int, default=None, help="record: 1024; replay: the script's (or fewer)")
    ap.add_argument("--paths", default="as-loaded", help="comma-separated, each job run through each in turn: "
                    "as-loaded, unpadded (the lean pass on the cache as transformers keeps it: no KeyBuffers), forward "
                    "(the model's forward)")
    args = ap.parse_args()
    jobs = args.jobs.split(",")
    if unknown := set(jobs) - set(JOBS):
        raise SystemExit(f"unknown jobs {sorted(unknown)}; choose from {', '.join(JOBS)}")
    if args.mode == "record" and args.out is None or args.mode == "replay" and args.script is None:
        raise SystemExit("record needs --out; replay needs the script's path")

    g = quickdraft.load(args.model, dtype=args.dtype, progress=False)
    print(f"CPU: {describe()}; torch {torch.__version__}, {torch.get_num_threads()} threads; model {args.model} "
          f"{getattr(g.runner, 'dtype', '')}, row block {getattr(g.runner, 'row_block', None)}, lean pass "
          f"{getattr(g.runner, 'lean', None) is not None}, keys padded "
          f"{getattr(getattr(g.runner, 'lean', None), 'pad_keys', None)}\n")
    messages, prediction = request()
    prompt_ids = g.encode_prompt(messages)
    if args.mode == "record":
        plain = g.generate(messages, max_new_tokens=args.max_new_tokens or 1024, prefix_reuse=False, drafter="none")
        script = {"model": args.model, "prompt_ids": prompt_ids, "output_ids": plain.token_ids,
                  "eos": min(g.tokenizer.eos_token_ids), "max_new_tokens": args.max_new_tokens or 1024}
        args.out.write_text(json.dumps(script))
        print(f"script: {len(prompt_ids)} prompt tokens, {len(plain.token_ids)} output tokens -> {args.out}\n")
    else:
        script = json.loads(args.script.read_text())
        if prompt_ids != script["prompt_ids"]:
            raise SystemExit("this model's tokenizer or chat template gives other prompt ids than the script's")
        g.runner = ShadowScriptedRunner(g.runner, script["output_ids"], script["eos"])
    runner = g.runner if args.mode == "record" else g.runner.model
    loaded = (runner.lean, getattr(runner.lean, "pad_keys", None))
    paths = {"as-loaded": loaded, "unpadded": (runner.lean, False), "forward": (None, None)}
    chosen = args.paths.split(",")
    if set(chosen) - set(paths) or loaded[0] is None and "unpadded" in chosen:
        raise SystemExit(f"--paths {args.paths}: choose from {', '.join(paths)} (unpadded needs a lean pass)")
    limit = min(args.max_new_tokens or script["max_new_tokens"], script["max_new_tokens"])
    rows = []
    for job in jobs:
        runs = {path: [] for path in chosen}
        for r in range(args.rounds):
            for path in (chosen if r % 2 == 0 else chosen[::-1]):  # in turn, the order alternating by round
                runner.lean = paths[path][0]
                if runner.lean is not None:
                    runner.lean.pad_keys = paths[path][1]
                result, inside = run(g, job, messages, prediction, limit)
                runs[path].append((result, inside, result.token_ids == script["output_ids"][:limit]))
        rows += [(job if len(chosen) == 1 else f"{job}, {path}", runs[path]) for path in chosen]
    runner.lean = loaded[0]
    if runner.lean is not None:
        runner.lean.pad_keys = loaded[1]
    print(table(rows))


if __name__ == "__main__":
    main()
