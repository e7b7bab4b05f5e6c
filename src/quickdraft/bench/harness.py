"""The benchmark run loop: every (workload, task, method, repeat), interleaved, into a JSONL file.

    for repeat in 1..R:
        for workload, task:
            for method (rotated per task and repeat; a runner's plain method first while its
                        reference output for the task is not known yet):
                run every turn of the task, timed, with peak memory measured
                compare the output with plain greedy decoding by the same tool (its baseline)
                append one row to runs.jsonl (flushed: a crash loses at most the run in flight)

Interleaving puts the methods of one prompt next to each other in time, so a slow spell of the
machine hits all of them; repeats show the noise (the report gives median and min-max).

Resume: rows already in runs.jsonl (keyed by workload, task, method, repeat) are not run again; a
run that raised is recorded with its error and tried again next time (records.py). The options are
checked by `prepare` before any model loads, and against run.json's when resuming (config.py).

Around the loop: config.py (the options), records.py (runs.jsonl, run.json), machine.py (where it ran,
peak memory), session.py (one method on one task), engines.py (one turn on one engine).
"""

from __future__ import annotations

import dataclasses
import gc
import json
import sys
import time
import zlib
from dataclasses import dataclass, field
from datetime import datetime, timezone
from difflib import SequenceMatcher
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from ..errors import QuickdraftError
from . import engines
from . import scoring
from . import workloads as workloads_mod
from .config import BenchConfig, prepare, resume_view
from .machine import MEMORY_MEASURES, PeakMemory, machine_info, model_identity, versions
from .methods import METHODS, Method, check_baselines
from .records import RUNS_FILE, SCHEMA, end_at_a_line, read_meta, read_runs, row_key, write_meta
from .rows import first_divergence
from .session import COUNTS, Session

RED, RESET = "\033[31m", "\033[0m"
# the run's own names, and those of the modules it runs on that callers read from here (cli.py, scripts, tests)
__all__ = ["BenchConfig", "MEMORY_MEASURES", "RED", "RESET", "RUNS_FILE", "Session", "Summary", "first_divergence", "plan",
           "prediction_overlap", "prepare", "read_meta", "read_runs", "row_key", "run"]


# -- comparisons --------------------------------------------------------------------------------------

def prediction_overlap(prediction: list[int], output: list[int]) -> tuple[float | None, float | None]:
    """(share of the prediction found in the output, share of the output found in the prediction).

    Both count the tokens of difflib's matching blocks (in order, no crossing). Example: prediction
    "abcdef", output "abXdef": 5 tokens match: (5/6, 5/6).
    """
    if not prediction or not output:
        return None, None
    matched = sum(b.size for b in SequenceMatcher(None, prediction, output, autojunk=False).get_matching_blocks())
    return matched / len(prediction), matched / len(output)


# -- the loop -----------------------------------------------------------------------------------------

@dataclass
class Summary:
    ran: int = 0
    resumed: int = 0
    mismatches: list[str] = field(default_factory=list)  # quickdraft's exact methods: a failure
    other_mismatches: list[str] = field(default_factory=list)  # other tools' drafted output != their plain output
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def plan(config: BenchConfig, session: Session, note: Callable[[str], None],
         methods: Sequence[Method] | None = None) -> tuple[list[Method], dict[str, list]]:
    """The methods that can run (notes for those that cannot) and each workload's tasks. methods: Method
    objects to run instead of config.methods' names (an A/B of settings is a list of methods)."""
    runnable: list[Method] = []
    for m in methods if methods is not None else [METHODS[name] for name in config.methods]:
        name = m.name
        why = session.unavailable(m)
        if why:
            note(f"method {name}: skipped: {why}")
        else:
            runnable.append(m)
    tasks = {w: list(workloads_mod.WORKLOADS[w].load(config.data, config.skip + config.limit))[config.skip :]
             for w in config.workloads}
    for w, ts in tasks.items():
        if len(ts) < config.limit:
            note(f"workload {w}: {len(ts)} task(s) after the first {config.skip}, fewer than --limit {config.limit}")
    pred = [m.name for m in runnable if m.uses_prediction]
    no_pred = [w for w in config.workloads if not workloads_mod.WORKLOADS[w].has_prediction]
    if pred and no_pred:
        note(f"method(s) {', '.join(pred)} run only on workloads with a prediction "
             f"(not on {', '.join(no_pred)})")
    return runnable, tasks


def run(config: BenchConfig, gen: Any, model_path: Path | None = None, draft_path: Path | None = None,
        log: Callable[[str], None] | None = None, methods: Sequence[Method] | None = None) -> Summary:
    """Run the benchmark of `config` on the loaded Generator `gen`, appending to config.out/runs.jsonl.

    methods: Method objects to run instead of the registered methods config.methods names, e.g. one
    drafter under two settings (docs/results/2026-11-25-draft-stop/ab_draft_sizing.py); each one's baseline must be among them.
    """
    from tqdm import tqdm

    out = config.out
    out.mkdir(parents=True, exist_ok=True)
    session = Session(gen, config, model_path)
    summary = Summary()
    bar = None

    def note(message: str) -> None:
        summary.notes.append(message)
        (bar.write if bar is not None else (log or _stderr))(f"note: {message}")

    runnable, tasks = plan(config, session, note, methods)
    missing = {m.baseline for m in runnable} - {m.name for m in runnable}
    if methods is not None and missing:
        raise QuickdraftError(f"the methods' baselines {', '.join(sorted(missing))} are not among the methods")
    if methods is not None:
        try:
            check_baselines({m.name: m for m in runnable})
        except ValueError as e:
            raise QuickdraftError(str(e)) from None
    if not session.chat:
        note("the model's tokenizer has no chat template: prompts are sent as plain text (the turns joined by blank lines)")

    meta = read_meta(out)
    meta.setdefault("schema", SCHEMA)
    meta["config"] = resume_view(config)
    models = {"target": model_identity(config.model, model_path), "draft": model_identity(config.draft_model, draft_path)}
    for role, ident in (meta.get("models") or {}).items():
        if ident and models.get(role) and ident["sha256"] != models[role]["sha256"]:
            raise QuickdraftError(f"{out} holds runs of another {role} model ({ident['name']}, SHA-256 "
                                  f"{ident['sha256'][:12]}...; now {models[role]['sha256'][:12]}...): use another --out")
    meta["models"] = models
    meta["chat_template"] = session.chat
    meta.setdefault("invocations", []).append({
        "argv": list(config.argv), "started": _now(), "machine": machine_info(), "versions": versions(),
        "workloads": list(config.workloads), "methods": [m.name for m in runnable], "limit": config.limit, "skip": config.skip,
        # the transformers runner's kernels, dtype and whether its invariance answer was kept (runners/hf.HFRunner; a
        # llama.cpp target has none of them); Runner.row_invariant and Runner.row_block every runner declares
        "repeats": config.repeats, "kernels": getattr(gen.runner, "kernels", None),
        "dtype": getattr(gen.runner, "dtype", None), "row_invariant": gen.runner.row_invariant,
        "row_invariance_kept": getattr(gen.runner, "row_invariance_kept", None), "row_block": gen.runner.row_block,
        "notes": summary.notes, "methods_skipped": [m.name for m in (methods or [METHODS[n] for n in config.methods])
                                                    if m.name not in {r.name for r in runnable}],
    })
    meta["methods"] = {m.name: dataclasses.asdict(m) for m in (*METHODS.values(), *(methods or ()))}
    write_meta(out, meta)

    existing = read_runs(out)
    done = {row_key(r) for r in existing if not r.get("error")}
    references: dict[tuple, list[list[int]]] = {}  # _reference_key -> the baseline's output tokens
    for r in existing:
        if not r.get("error") and r["method"] == r["baseline"] and r.get("output_tokens") is not None:
            references.setdefault(_reference_key(r["workload"], r["task"], r["method"], r["repeat"], r.get("sampled")),
                                  r["output_tokens"])

    jobs = list(_jobs(config, runnable, tasks))
    todo = [j for j in jobs if (j[0], j[1].id, j[3].name, j[2]) not in done]
    summary.resumed = len(jobs) - len(todo)
    if summary.resumed:
        note(f"resuming: {summary.resumed} of {len(jobs)} runs are already in {out / RUNS_FILE}")

    _warm_up(session, runnable)
    gc.collect()
    gc.freeze()  # the loaded model and libraries are never garbage: the collection before each run skips them
    bar = tqdm(total=len(todo), desc="bench", unit="run", disable=not config.progress, dynamic_ncols=True)
    try:
        _loop(session, config, todo, references, summary, bar, note)
    finally:
        bar.close()
        gc.unfreeze()
        write_meta(out, meta)  # with the notes made while running
    return summary


def _loop(session: Session, config: BenchConfig, todo: list[tuple], references: dict, summary: Summary,
          bar: Any, note: Callable[[str], None]) -> None:
    overlaps: dict[tuple[str, str], tuple[float | None, float | None, int]] = {}
    fits: dict[tuple[str, str], bool] = {}  # (workload, task id) -> whether its prompt leaves room for the new tokens
    end_at_a_line(config.out)
    with open(config.out / RUNS_FILE, "a", encoding="utf-8") as sink:
        for workload, task, repeat, method in _ordered(todo, references):
            key = (workload, task.id)
            if key not in fits:
                fits[key] = _fits(session, config, workload, task, note)
            if not fits[key]:
                bar.update(1)
                continue
            bar.set_postfix_str(f"{workload} {task.id[:24]} {method.name} r{repeat}", refresh=False)
            row = _run_one(session, config, workload, task, repeat, method, references, overlaps)
            sink.write(json.dumps(row) + "\n")
            sink.flush()
            summary.ran += 1
            if row.get("error"):
                summary.errors.append(f"{workload}/{task.id} {method.name} r{repeat}: {row['error']}")
                bar.write(f"{RED}ERROR{RESET} {workload}/{task.id} {method.name} repeat {repeat}: {row['error']}")
            elif row["exact"] and row["identical"] is False:
                (summary.mismatches if method.engine == "quickdraft" else summary.other_mismatches).append(
                    f"{workload}/{task.id} {method.name} r{repeat}")
                bar.write(f"{RED}MISMATCH{RESET} {workload}/{task.id} {method.name} repeat {repeat}: output differs "
                          f"from {method.baseline} at token {row['first_divergence']}")
            bar.update(1)


def _fits(session: Session, config: BenchConfig, workload: str, task: Any, note: Callable[[str], None]) -> bool:
    """Whether the task's prompt leaves room for max_new_tokens in the model's context; a note says why not."""
    max_context = session.gen.runner.max_context
    try:
        n_prompt = len(session.prompt_ids(task.messages))
    except QuickdraftError as e:  # a prompt the model refuses (longer than its context)
        note(f"{workload}/{task.id}: skipped: {e}")
        return False
    if max_context - n_prompt < config.max_new_tokens:
        note(f"{workload}/{task.id}: skipped: the prompt has {n_prompt} tokens and the model's context {max_context}, "
             f"leaving no room for {config.max_new_tokens} new tokens")
        return False
    return True


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _jobs(config: BenchConfig, runnable: list[Method], tasks: dict[str, list]) -> Iterator[tuple]:
    """(workload, task, repeat, method) in run order: repeats outermost, methods rotated per task."""
    for repeat in range(config.repeats):
        for workload in config.workloads:
            has_pred = workloads_mod.WORKLOADS[workload].has_prediction
            for i, task in enumerate(tasks[workload]):
                ms = [m for m in runnable if has_pred or not m.uses_prediction]
                if not ms:
                    continue
                shift = (i + repeat) % len(ms)
                for m in ms[shift:] + ms[:shift]:
                    yield workload, task, repeat, m


def _ordered(todo: list[tuple], references: dict) -> Iterator[tuple]:
    """Jobs in order, except that each tool's plain method runs first in its (task, repeat) block while no
    reference output for the task exists yet (so every row can say whether it is identical), quickdraft's own
    first of them (the prediction's overlap with the output is measured on its output)."""
    i = 0
    while i < len(todo):
        j = i
        while j < len(todo) and todo[j][:3] == todo[i][:3]:
            j += 1
        block = todo[i:j]
        workload, task = block[0][0], block[0][1]
        first = sorted((b for b in block if b[3].name == b[3].baseline
                        and _reference_key(workload, task.id, b[3].name, b[2], b[3].sampled) not in references),
                       key=lambda b: b[3].name != "plain")
        yield from first + [b for b in block if b not in first]
        i = j


def _warm_up(session: Session, runnable: list[Method]) -> None:
    """One short generation per engine before anything is timed (lazy inits, allocator, kernels)."""
    gen = session.gen
    messages = [{"role": "user", "content": "warm up"}]
    gen.generate(session.prompt(messages), drafter="none", max_new_tokens=4)
    if gen.draft_runner is not None and any("draft-model" in m.needs for m in runnable):
        gen.generate(session.prompt(messages), drafter="draft-model", max_new_tokens=4)
    for m in runnable:
        if m.engine == "transformers":
            engines.run_transformers(session, m, messages, None, 0, max_new_tokens=4)


def _run_one(session: Session, config: BenchConfig, workload: str, task, repeat: int, method: Method,
             references: dict, overlaps: dict) -> dict:
    row: dict[str, Any] = {"schema": SCHEMA, "workload": workload, "task": task.id, "method": method.name,
                           "repeat": repeat, "engine": method.engine, "baseline": method.baseline,
                           "exact": method.exact, "turns": task.turns, "time": _now()}
    gc.collect()  # not inside the timed run
    try:
        with PeakMemory() as mem:
            t0 = time.perf_counter()
            outcome = session.run(method, task, seed=_seed(workload, task.id, repeat), repeat=repeat)
            seconds = time.perf_counter() - t0
    except Exception as e:  # a failing method is a result to report, not a reason to stop the benchmark
        row["error"] = f"{type(e).__name__}: {e}"
        return row
    n_out = outcome.counts["completion_tokens"] or 0
    times = outcome.times
    decode_tps = n_out / times["decode_s"] if times.get("decode_s") else None
    row.update({
        "prompt_tokens": outcome.prompt_tokens, "completion_tokens": n_out, "finish_reason": outcome.finish,
        "seconds": round(seconds, 4), "tokens_per_s": round(n_out / seconds, 4) if seconds > 0 else None,
        "prefill_s": _r(times["prefill_s"]), "decode_s": _r(times["decode_s"]),
        "decode_tokens_per_s": _r(decode_tps),
        **{k: outcome.counts[k] for k in COUNTS if k != "completion_tokens"},
        "accepted_per_pass": (round(outcome.counts["accepted"] / outcome.counts["target_passes"], 4)
                              if outcome.counts["accepted"] is not None and outcome.counts["target_passes"] else None),
        "by_source": {k: {"accepted": a, "rejected": r} for k, (a, r) in outcome.by_source.items()},
        "peak_rss_mib": _r(mem.peak, 1), "rss_before_mib": _r(mem.before, 1), "memory_measure": mem.kind,
        "kl_per_token": _r(outcome.kl / n_out, 6) if n_out and method.kwargs.get("acceptance") == "mentored" else None,
        "sampled": method.sampled, "output_tokens": outcome.tokens,
    })
    ref_key = _reference_key(workload, task.id, method.baseline, repeat, method.sampled)
    if method.name == method.baseline and ref_key not in references:
        references[ref_key] = outcome.tokens
    # a sampled method that is not exact draw for draw (speculative sampling: exact in distribution) is compared for
    # speed only
    reference = references.get(ref_key) if not method.sampled or method.same_draws else None
    if task.reference is not None and outcome.tokens:  # quality of the first answer (bench/scoring.py)
        row["scores"] = scoring.score(workload, session.gen.tokenizer.decode(outcome.tokens[0]), task.reference)
    row["identical"] = None if reference is None else outcome.tokens == reference
    row["first_divergence"] = None if reference is None else first_divergence(outcome.tokens, reference)
    greedy = references.get((workload, task.id, "plain"))  # what the model writes: plain greedy decoding
    if task.prediction is not None and greedy is not None:
        if (workload, task.id) not in overlaps:
            pred_ids = session.gen.tokenizer.encode(task.prediction, add_special_tokens=False)
            kept, covered = prediction_overlap(pred_ids, greedy[0])
            overlaps[workload, task.id] = (kept, covered, len(pred_ids))
        kept, covered, n_pred = overlaps[workload, task.id]
        row.update({"prediction_tokens": n_pred, "prediction_kept": _r(kept), "output_from_prediction": _r(covered)})
    return row


def _reference_key(workload: str, task_id: str, baseline: str, repeat: int, sampled: bool | None) -> tuple:
    """Where a baseline's output is kept: per task under greedy decoding, per task and repeat under sampling (each
    repeat samples with its own seed: _seed)."""
    return (workload, task_id, baseline, repeat) if sampled else (workload, task_id, baseline)


def _seed(workload: str, task_id: str, repeat: int) -> int:
    """The sampling seed of one (task, repeat), the same for every sampled method."""
    return zlib.crc32(f"{workload}/{task_id}/{repeat}".encode())


def _r(x: float | None, digits: int = 4) -> float | None:
    return None if x is None else round(x, digits)
