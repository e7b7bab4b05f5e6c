"""`quickdraft bench`: the command line's bench commands (run, report, predicted-outputs-study)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Callable


def earlier_mismatches(out: Path) -> list[str]:
    """The runs in out of quickdraft's exact methods that differ from plain decoding, as the report finds them (a
    resumed run's rows from earlier invocations too)."""
    from .records import read_runs
    from .rows import latest_rows, on_own_baselines

    return [f"{r['workload']}/{r['task']} {r['method']} r{r['repeat']}"
            for r in on_own_baselines(latest_rows(read_runs(out)))
            if r.get("exact") and r.get("identical") is False and r.get("engine", "quickdraft") == "quickdraft"]


def cmd_bench(args: argparse.Namespace, load: Callable[[argparse.Namespace], Any]) -> int:
    """`quickdraft bench run | report | predicted-outputs-study`; load: the CLI's model loader (cli._load)."""
    if args.bench_command == "predicted-outputs-study":
        from .study import run_study

        result = run_study(args.out)
        o, d = result.summary["openai"], result.summary["default"]
        print(f"openai policy: at most {o['max_rejected_per_departure']} rejected per departure, drafting resumes "
              f"after {o['resume_after_min']}-{o['resume_after_max']} agreeing tokens; default policy: at most "
              f"{d['max_rejected_per_departure']}, resumes after {d['resume_after_min']}-{d['resume_after_max']}")
        print(f"wrote {', '.join(str(p) for p in result.files)}")
        return 0
    from . import report

    if args.bench_command == "report":
        print(f"wrote {report.build(Path(args.dir))}")
        return 0

    from . import harness
    from ..models import gguf_file, resolve

    command = ["quickdraft", "bench", "run", "--model", args.model, "--runner", args.runner, "--workloads", args.workloads, "--methods",
               args.methods, "--limit", str(args.limit), *(["--skip", str(args.skip)] if args.skip else []), "--max-new-tokens", str(args.max_new_tokens), "--repeats",
               str(args.repeats), "--temperature", str(args.temperature), "--out", args.out]
    command += ["--draft-model", args.draft_model] if args.draft_model else []
    command += ["--draft-runner", args.draft_runner] if args.draft_runner else []
    command += ["--draft-precision", args.draft_precision] if args.draft_precision else []
    command += ["--threads", str(args.threads)] if args.threads else []
    command += ["--kernels", args.kernels] if args.kernels != "auto" else []
    command += ["--dtype", args.dtype] if args.dtype != "auto" else []
    command += ["--device", args.device] if args.device != "auto" else []
    command += ["--data", args.data] if args.data else []
    # Every option is checked here, before any model loads.
    config = harness.prepare(args.model, args.workloads, args.methods, args.out, data=args.data,
                             draft_model=args.draft_model, draft_precision=args.draft_precision, runner=args.runner,
                             draft_runner=args.draft_runner, kernels=args.kernels, dtype=args.dtype, device=args.device,
                             limit=args.limit,
                             skip=args.skip, max_new_tokens=args.max_new_tokens, repeats=args.repeats, temperature=args.temperature,
                             progress=not args.no_progress, argv=command)
    gen = load(args)
    def weights(name: str, kind: str):  # the files that ran: the GGUF itself on llama.cpp, no conversion
        return gguf_file(name, progress=False) if kind == "llama.cpp" else resolve(name, progress=False)

    summary = harness.run(config, gen, model_path=weights(args.model, args.runner),
                          draft_path=weights(args.draft_model, args.draft_runner or args.runner) if args.draft_model else None)
    path = report.build(config.out)
    print(f"{summary.ran} run(s) done, {summary.resumed} already there; report: {path}", file=sys.stderr)
    if summary.other_mismatches:
        print(f"{harness.RED}NOT EXACT{harness.RESET} (another tool, not quickdraft): {len(summary.other_mismatches)} "
              f"run(s) differ from that tool's plain greedy decoding: {', '.join(summary.other_mismatches[:5])}",
              file=sys.stderr)
    mismatches = summary.mismatches + [m for m in earlier_mismatches(config.out) if m not in summary.mismatches]
    if mismatches:
        print(f"{harness.RED}FAILED{harness.RESET}: {len(mismatches)} run(s) of quickdraft's exact methods "
              f"differ from plain greedy decoding: {', '.join(mismatches[:5])}", file=sys.stderr)
        return 3
    if summary.errors:
        print(f"{len(summary.errors)} run(s) raised an error (see the report): {summary.errors[0]}", file=sys.stderr)
        return 1
    return 0
