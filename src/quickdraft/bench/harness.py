"""The benchmark run loop: every (workload, task, method, repeat), interleaved, into a JSONL file.

    for repeat in 1..R:
        for workload, task:
            for method (rotated per task and repeat; a runner's plain method first while its
                        reference output for the task is not known yet):
                run every turn of the task, timed, with peak memory measured
                compare the output with plain greedy decoding of the same runner
                append one row to runs.jsonl (flushed: a crash loses at most the run in flight)

Interleaving puts the methods of one prompt next to each other in time, so a slow spell of the
machine hits all of them; repeats show the noise (the report gives median and min-max).

Resume: rows already in runs.jsonl (keyed by workload, task, method, repeat) are not run again; a
run that raised is recorded with its error and tried again next time. The options that change
what a row means (model, draft model, precision, max_new_tokens, data set) are kept in run.json
and must match when resuming.

Everything the user can get wrong is checked by `prepare` before any model loads.
"""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import json
import os
import platform
import resource
import sys
import time
import zlib
from dataclasses import dataclass, field
from datetime import datetime, timezone
from difflib import SequenceMatcher
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from ..cpu import cpu_info
from ..errors import QuickdraftError
from ..options import DecodeOptions, LoadOptions
from . import engines
from . import methods as methods_mod
from . import scoring
from . import workloads as workloads_mod
from .llamacpp_stock import repack_allowed
from .methods import METHODS, Method

RED, RESET = "\033[31m", "\033[0m"
RUNS_FILE, META_FILE = "runs.jsonl", "run.json"
SCHEMA = 1
# Options that decide what a row measures: a resumed run must use the same ones.
RESUME_KEYS = ("model", "runner", "draft_model", "draft_runner", "draft_precision", "kernels", "dtype", "max_new_tokens",
               "temperature", "data")
RESUME_DEFAULTS = {"dtype": "auto", "draft_runner": None}  # options added later: what runs recorded before them ran with


@dataclass(frozen=True)
class BenchConfig:
    model: str
    workloads: tuple[str, ...]
    methods: tuple[str, ...]
    out: Path
    data: Path
    draft_model: str | None = None
    draft_precision: str | None = None  # a transformers draft model's (None: int8)
    runner: str = "transformers"  # the target's runner: "transformers" or "llama.cpp"
    draft_runner: str | None = None  # the draft model's runner (None: the target's)
    kernels: str = "auto"  # a transformers model's Linear layers (runners.hf.use_kernels)
    dtype: str = "auto"  # the transformers target's precision (options.LoadOptions)
    limit: int = 5
    skip: int = 0  # tasks left out at the start of each workload (held-out tasks: skip 20, limit 20 runs tasks 21-40)
    max_new_tokens: int = 256
    repeats: int = 3
    temperature: float = 0.7  # sampled methods only (plain-sampled, draft-model-sampled, mentored-*)
    progress: bool = True
    argv: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("limit", "max_new_tokens", "repeats"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise QuickdraftError(f"{name.replace('_', '-')} must be a positive integer; got {value!r}")
        if isinstance(self.skip, bool) or not isinstance(self.skip, int) or self.skip < 0:
            raise QuickdraftError(f"skip must be an integer >= 0; got {self.skip!r}")
        if isinstance(self.temperature, bool) or not isinstance(self.temperature, (int, float)) \
                or not 0 < self.temperature < float("inf"):
            raise QuickdraftError(f"temperature (of the sampled methods) must be a number > 0; got {self.temperature!r}")
        # the model options, by the rules every front end uses (made again by the CLI's load)
        LoadOptions(runner=self.runner, draft_model=self.draft_model, draft_runner=self.draft_runner,
                    draft_precision=self.draft_precision, kernels=self.kernels, dtype=self.dtype)


def prepare(model: str, workloads: str, methods: str, out: str | Path, *, data: str | None = None,
            draft_model: str | None = None, draft_precision: str | None = None, runner: str = "transformers", kernels: str = "auto",
            dtype: str = "auto", draft_runner: str | None = None,
            limit: int = 5, skip: int = 0, max_new_tokens: int = 256, repeats: int = 3, temperature: float = 0.7, progress: bool = True,
            argv: Sequence[str] = ()) -> BenchConfig:
    """Check every option (names, numbers, data files, resume compatibility) without loading a model."""
    config = BenchConfig(model=model, workloads=tuple(workloads_mod.select(workloads)),
                         methods=tuple(methods_mod.select(methods)), out=Path(out),
                         data=workloads_mod.data_dir(data), draft_model=draft_model,
                         draft_precision=draft_precision, runner=runner, draft_runner=draft_runner, kernels=kernels,
                         dtype=dtype, limit=limit,
                         skip=skip, max_new_tokens=max_new_tokens,
                         repeats=repeats, temperature=temperature, progress=progress, argv=tuple(argv))
    workloads_mod.check_files(config.data, list(config.workloads))
    # Methods asked for by name or group need their draft model; under "all" they are skipped with a note.
    named = {m.strip() for m in methods.split(",")} if isinstance(methods, str) else set(methods)
    wants_draft = [n for n in config.methods if "draft-model" in METHODS[n].needs and "all" not in named]
    if wants_draft and draft_model is None:
        raise QuickdraftError(f"method(s) {', '.join(wants_draft)} need a draft model: pass --draft-model ALIAS|PATH")
    if config.out.exists() and not config.out.is_dir():
        raise QuickdraftError(f"--out {str(config.out)!r} exists and is not a folder")
    old = read_meta(config.out).get("config")
    if old:
        new = _resume_view(config)
        old = {**RESUME_DEFAULTS, **old}
        diff = [k for k in RESUME_KEYS if old.get(k) != new[k]]
        if diff:
            detail = "; ".join(f"{k}: {old.get(k)!r} there, {new[k]!r} now" for k in diff)
            raise QuickdraftError(f"{config.out} holds runs made with other options ({detail}): "
                                  "use another --out, or the same options to resume")
    return config


def _resume_view(config: BenchConfig) -> dict[str, Any]:
    return {"model": config.model, "runner": config.runner, "draft_model": config.draft_model,
            "draft_runner": config.draft_runner, "draft_precision": config.draft_precision, "kernels": config.kernels,
            "dtype": config.dtype, "max_new_tokens": config.max_new_tokens, "temperature": config.temperature,
            "data": str(config.data.resolve())}


# -- files -------------------------------------------------------------------------------------------

def read_meta(out: Path) -> dict:
    path = Path(out) / META_FILE
    if not path.is_file():
        return {}
    return json.loads(path.read_text(encoding="utf-8"))


def write_meta(out: Path, meta: dict) -> None:
    path = Path(out) / META_FILE
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def read_runs(out: Path) -> list[dict]:
    """Rows of runs.jsonl; a last line cut short by a crash is ignored."""
    path = Path(out) / RUNS_FILE
    if not path.is_file():
        return []
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return rows


def row_key(row: dict) -> tuple[str, str, str, int]:
    return row["workload"], row["task"], row["method"], row["repeat"]


# -- machine, versions, models ------------------------------------------------------------------------

def machine_info() -> dict[str, Any]:
    """The machine a run ran on: the CPU's model and the flags that change kernels and ratios (quickdraft.cpu),
    memory, and whether llama.cpp baselines could load stock repacked weights (bench/llamacpp_stock.py)."""
    info_cpu = cpu_info()
    mem = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem = round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    info: dict[str, Any] = {"platform": platform.platform(), "cpu": info_cpu["model"], "cpu_flags": info_cpu["flags"],
                            "cores": os.cpu_count(), "memory_gib": mem, "hostname": platform.node()}
    try:
        info["llamacpp_stock_repack"] = repack_allowed()
    except (ImportError, OSError):  # llama-cpp-python is optional
        pass
    try:
        import torch

        info["torch_threads"] = torch.get_num_threads()
        if torch.cuda.is_available():
            info["gpu"] = torch.cuda.get_device_name(0)
    except ImportError:
        pass
    return info


def versions() -> dict[str, str | None]:
    from importlib import metadata

    out: dict[str, str | None] = {"python": platform.python_version()}
    for pkg in ("quickdraft", "torch", "transformers", "tokenizers", "llama-cpp-python", "matplotlib"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = None
    return out


def model_identity(name: str | None, path: Path | None) -> dict[str, Any] | None:
    """Which weights ran: for a packaged alias the pinned SHA-256 of its GGUF (quickdraft.models,
    checked when it was pulled); for a local .gguf or folder the SHA-256 of its weight files."""
    if name is None:
        return None
    from .. import models

    if name in models.ALIASES:
        m = models.ALIASES[name]
        return {"name": name, "sha256": m.sha256, "hash_of": "packaged GGUF (pinned in quickdraft.models, verified at pull)",
                "description": m.description, "path": str(path) if path else None}
    p = Path(name).expanduser()
    files = [p] if p.is_file() else sorted(x for x in p.glob("*") if x.suffix in (".safetensors", ".bin", ".gguf"))
    digest = hashlib.sha256()
    for f in files:
        digest.update(f.name.encode())
        with open(f, "rb") as src:
            for block in iter(lambda: src.read(1 << 20), b""):
                digest.update(block)
    return {"name": name, "sha256": digest.hexdigest(), "hash_of": "weight files: " + ", ".join(f.name for f in files),
            "path": str(p.resolve())}


# -- memory -------------------------------------------------------------------------------------------

MEMORY_MEASURES = {
    "vmhwm": "peak resident set size of the process during the run (Linux VmHWM, reset before each run "
             "through /proc/self/clear_refs); includes the loaded weights",
    "ru_maxrss": "peak resident set size of the process so far (getrusage ru_maxrss; this kernel does not "
                 "let the peak be reset, so it never goes down between runs); includes the loaded weights",
}


def _vm(field_name: str) -> float | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field_name + ":"):
                return int(line.split()[1]) / 1024  # kB -> MiB
    except OSError:
        return None
    return None


class PeakMemory:
    """Peak RSS of this process over a block, in MiB (`kind` says how it was measured)."""

    def __enter__(self) -> "PeakMemory":
        self.kind = "ru_maxrss"
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")  # resets VmHWM to the current RSS
            if _vm("VmHWM") is not None:
                self.kind = "vmhwm"
        except OSError:
            pass
        self.before = _vm("VmRSS")
        self.peak: float | None = None
        return self

    def __exit__(self, *exc: object) -> None:
        if self.kind == "vmhwm":
            self.peak = _vm("VmHWM")
        else:
            scale = 1 / 2**20 if sys.platform == "darwin" else 1 / 1024
            self.peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


# -- one run -----------------------------------------------------------------------------------------

COUNTS = ("completion_tokens", "accepted", "rejected", "draft_tokens", "target_passes", "draft_forwards")
TIMES = ("prefill_s", "decode_s")


@dataclass
class Outcome:
    """What one method produced for one task, over all its turns."""

    tokens: list[list[int]] = field(default_factory=list)  # per turn
    finish: list[str] = field(default_factory=list)
    prompt_tokens: list[int] = field(default_factory=list)
    counts: dict[str, int | None] = field(default_factory=lambda: {k: 0 for k in COUNTS})
    times: dict[str, float | None] = field(default_factory=lambda: {k: 0.0 for k in TIMES})
    by_source: dict[str, list[int]] = field(default_factory=dict)
    kl: float = 0.0  # lossy acceptance: KL(target || emitted) summed over the decided positions (nats)

    def add(self, counts: dict[str, int | None], times: dict[str, float | None]) -> None:
        for k in COUNTS:
            a, b = self.counts.get(k), counts.get(k)
            self.counts[k] = None if a is None or b is None else a + b
        for k in TIMES:
            a, b = self.times.get(k), times.get(k)
            self.times[k] = None if a is None or b is None else a + b


def render_plain(messages: list[dict[str, str]]) -> str:
    """A conversation as plain text, for a tokenizer without a chat template (tiny test models)."""
    return "\n\n".join(m["content"] for m in messages)


class Session:
    """The loaded model(s) and what runs each engine; one per benchmark invocation."""

    def __init__(self, gen: Any, config: BenchConfig, model_path: Path | None = None):
        self.gen, self.config, self.model_path = gen, config, model_path
        # Every method pays its own prefill: runners that keep earlier requests' prompt chunks (prefix reuse,
        # runners/hf.HFRunner) would otherwise hand the second method on a task the first one's prompt for free.
        for runner in (gen.runner, getattr(gen, "draft_runner", None)):
            if getattr(runner, "reuse_prefix", False):
                runner.reuse_prefix = False
        self.chat = bool(gen.tokenizer.has_chat_template)
        self.llama: dict[str, Any] = {}  # stock llama.cpp models by configuration (engines.run_llama_cpp)
        self.pool_scope = "bench-repeat-0"  # set per run (see run)
        self._options = {f.name for f in dataclasses.fields(DecodeOptions)}  # what a quickdraft method may set

    # which methods can run, and why not -------------------------------------------------------
    def unavailable(self, method: Method) -> str | None:
        if method.planned:
            return method.planned
        for need in method.needs:
            if need.startswith("api:"):
                option = need[4:]
                if option not in self._options:
                    return (f"the API option {option}= is not available yet (DecodeOptions has no "
                            f"{option!r} field): skipped until it lands")
            elif need == "draft-model" and self.gen.draft_runner is None:
                return "no draft model loaded (pass --draft-model)"
            elif need == "transformers-runner" and not hasattr(self.gen.runner, "model"):
                return "the target runs on llama.cpp: transformers' generate() needs --runner transformers"
            elif need == "transformers-runner" and "assistant_model" in method.kwargs \
                    and not hasattr(self.gen.draft_runner, "model"):
                return "the draft model runs on llama.cpp: transformers' assistant_model needs --draft-runner transformers"
            elif need == "llama-cpp":
                try:
                    import llama_cpp  # noqa: F401
                except ImportError:
                    return "llama-cpp-python is not installed (optional: pip install -e '.[llamacpp]')"
            elif need == "gguf" and self.gguf_path() is None:
                return "the model is not a GGUF file or packaged alias: llama.cpp needs a GGUF"
        return None

    def gguf_path(self) -> Path | None:
        from .. import models

        name = self.config.model
        if name in models.ALIASES:
            return models.pull(name, progress=False)  # pulled when the model loaded: returns at once
        p = Path(name).expanduser()
        return p if p.is_file() and p.suffix.lower() == ".gguf" else None

    # prompts --------------------------------------------------------------------------------
    def prompt(self, messages: list[dict[str, str]]) -> Any:
        return messages if self.chat else render_plain(messages)

    def prompt_ids(self, messages: list[dict[str, str]]) -> list[int]:
        return self.gen.encode_prompt(self.prompt(messages))

    # running ---------------------------------------------------------------------------------
    def run(self, method: Method, task: workloads_mod.Task, seed: int = 0, repeat: int = 0) -> Outcome:
        """Every turn of the task with `method`; later turns follow the method's own answers.

        seed: the sampling seed of sampled methods (turn i uses seed + i). repeat: which repeat this
        is; Ouroboros keeps one phrase pool per repeat (warm start across the tasks of a repeat, as a
        server would across requests, but never from an earlier repeat of the same task)."""
        self.pool_scope = f"bench-repeat-{repeat}"
        outcome = Outcome()
        messages = list(task.messages)
        turns = [None, *task.followups]
        for i, followup in enumerate(turns):
            if followup is not None:
                messages = messages + [{"role": "user", "content": followup}]
            prediction = task.prediction if method.uses_prediction and i == 0 else None
            turn = engines.ENGINES[method.engine](self, method, messages, prediction, seed + i)
            outcome.tokens.append(turn.tokens)
            outcome.finish.append(turn.finish)
            outcome.prompt_tokens.append(turn.prompt_tokens)
            outcome.add(turn.counts, turn.times)
            outcome.kl += turn.kl
            for src, (a, r) in turn.by_source.items():
                acc = outcome.by_source.setdefault(src, [0, 0])
                acc[0] += a
                acc[1] += r
            messages = messages + [{"role": "assistant", "content": self.gen.tokenizer.decode(turn.tokens)}]
        return outcome


# -- comparisons --------------------------------------------------------------------------------------

def first_divergence(a: list[list[int]], b: list[list[int]]) -> int | None:
    """Index (in the concatenated turns) of the first token where a and b differ; None if equal.

    >>> first_divergence([[1, 2, 3]], [[1, 2, 4]])
    2
    """
    if a == b:
        return None
    fa, fb = [t for turn in a for t in turn], [t for turn in b for t in turn]
    i = 0
    while i < min(len(fa), len(fb)) and fa[i] == fb[i]:
        i += 1
    return i


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
    drafter under two settings (scripts/ab_draft_sizing.py); each one's baseline must be among them.
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
    if not session.chat:
        note("the model's tokenizer has no chat template: prompts are sent as plain text (the turns joined by blank lines)")

    meta = read_meta(out)
    meta.setdefault("schema", SCHEMA)
    meta["config"] = _resume_view(config)
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
        "repeats": config.repeats, "kernels": getattr(gen.runner, "kernels", None),
        "dtype": getattr(gen.runner, "dtype", None), "row_invariant": getattr(gen.runner, "row_invariant", None),
        "row_invariance_kept": getattr(gen.runner, "row_invariance_kept", None),
        "row_block": getattr(gen.runner, "row_block", None),
        "notes": summary.notes, "methods_skipped": [m.name for m in (methods or [METHODS[n] for n in config.methods])
                                                    if m.name not in {r.name for r in runnable}],
    })
    meta["methods"] = {m.name: dataclasses.asdict(m) for m in (*METHODS.values(), *(methods or ()))}
    write_meta(out, meta)

    existing = read_runs(out)
    done = {row_key(r) for r in existing if not r.get("error")}
    references: dict[tuple[str, str, str], list[list[int]]] = {}
    for r in existing:
        if not r.get("error") and r["method"] == r["baseline"] and not r.get("sampled") and r.get("output_tokens") is not None:
            references.setdefault((r["workload"], r["task"], r["method"]), r["output_tokens"])

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
    prompt_lengths: dict[tuple[str, str], int] = {}
    max_context = session.gen.runner.max_context
    with open(config.out / RUNS_FILE, "a", encoding="utf-8") as sink:
        for workload, task, repeat, method in _ordered(todo, references):
            key = (workload, task.id)
            if key not in prompt_lengths:
                prompt_lengths[key] = n_prompt = len(session.prompt_ids(task.messages))
                if max_context - n_prompt < config.max_new_tokens:
                    note(f"{workload}/{task.id}: skipped: the prompt has {n_prompt} tokens and the model's context "
                         f"{max_context}, leaving no room for {config.max_new_tokens} new tokens")
            if max_context - prompt_lengths[key] < config.max_new_tokens:
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
    """Jobs in order, except that a runner's plain method runs first in its (task, repeat) block
    while no reference output for the task exists yet (so every row can say whether it is identical)."""
    i = 0
    while i < len(todo):
        j = i
        while j < len(todo) and todo[j][:3] == todo[i][:3]:
            j += 1
        block = todo[i:j]
        workload, task = block[0][0], block[0][1]
        first = [b for b in block if b[3].name == b[3].baseline and not b[3].sampled
                 and (workload, task.id, b[3].name) not in references]
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
    ref_key = (workload, task.id, method.baseline)
    if method.sampled:  # compared for speed only: speculative sampling is exact in distribution, not per draw
        reference = None
    else:
        if method.name == method.baseline and ref_key not in references:
            references[ref_key] = outcome.tokens
        reference = references.get(ref_key)
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


def _seed(workload: str, task_id: str, repeat: int) -> int:
    """The sampling seed of one (task, repeat), the same for every sampled method."""
    return zlib.crc32(f"{workload}/{task_id}/{repeat}".encode())


def _r(x: float | None, digits: int = 4) -> float | None:
    return None if x is None else round(x, digits)
