"""A benchmark's options: checked by `prepare` before any model loads, and compared with run.json's on a resume.

Everything the user can get wrong (names, numbers, data files, options that differ from the runs already in the
output folder) fails here, before a model is loaded. The options that change what a row means (model, draft model,
precision, max_new_tokens, data set) are kept in run.json and must match when resuming.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from ..errors import QuickdraftError
from ..options import LoadOptions
from . import methods as methods_mod
from . import workloads as workloads_mod
from .methods import METHODS
from .records import read_meta, read_runs

# Options that decide what a row measures: a resumed run must use the same ones.
RESUME_KEYS = ("model", "runner", "draft_model", "draft_runner", "draft_precision", "kernels", "dtype", "device", "max_new_tokens",
               "temperature", "data")
RESUME_DEFAULTS = {"dtype": "auto", "draft_runner": None, "device": "auto"}  # options added later: what runs recorded before them ran with


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
    kernels: str = "auto"  # a transformers model's Linear layers (runners.kernels.use_kernels)
    dtype: str = "auto"  # the transformers target's precision (options.LoadOptions)
    device: str = "auto"  # where transformers models run (options.LoadOptions)
    limit: int = 5
    skip: int = 0  # tasks left out at the start of each workload (held-out tasks: skip 20, limit 20 runs tasks 21-40)
    max_new_tokens: int = 256
    repeats: int = 3
    temperature: float = 0.7  # sampled methods only (*-sampled, mentored-*)
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
                    draft_precision=self.draft_precision, kernels=self.kernels, dtype=self.dtype, device=self.device)


def prepare(model: str, workloads: str, methods: str, out: str | Path, *, data: str | None = None,
            draft_model: str | None = None, draft_precision: str | None = None, runner: str = "transformers", kernels: str = "auto",
            dtype: str = "auto", draft_runner: str | None = None, device: str = "auto",
            limit: int = 5, skip: int = 0, max_new_tokens: int = 256, repeats: int = 3, temperature: float = 0.7, progress: bool = True,
            argv: Sequence[str] = ()) -> BenchConfig:
    """Check every option (names, numbers, data files, resume compatibility) without loading a model."""
    config = BenchConfig(model=model, workloads=tuple(workloads_mod.select(workloads)),
                         methods=tuple(methods_mod.select(methods)), out=Path(out),
                         data=workloads_mod.data_dir(data), draft_model=draft_model,
                         draft_precision=draft_precision, runner=runner, draft_runner=draft_runner, kernels=kernels,
                         dtype=dtype, device=device, limit=limit,
                         skip=skip, max_new_tokens=max_new_tokens,
                         repeats=repeats, temperature=temperature, progress=progress, argv=tuple(argv))
    workloads_mod.check_files(config.data, list(config.workloads))
    for w in config.workloads:  # read now, so that a broken file or an empty selection fails before any model loads
        try:
            tasks = list(workloads_mod.WORKLOADS[w].load(config.data, config.skip + config.limit))
        except (ValueError, KeyError, TypeError) as e:  # JSONDecodeError, UnicodeDecodeError, a task missing a field
            raise QuickdraftError(f"workload {w!r}: cannot read its tasks in {config.data} ({type(e).__name__}: "
                                  f"{e})") from None
        if len(tasks) <= config.skip:
            raise QuickdraftError(f"--skip {config.skip} leaves no tasks of workload {w!r} (it has {len(tasks)})")
    # Methods asked for by name or group need their draft model; under "all" they are skipped with a note.
    named = {m.strip() for m in methods.split(",")} if isinstance(methods, str) else set(methods)
    wants_draft = [n for n in config.methods if "draft-model" in METHODS[n].needs and "all" not in named]
    if wants_draft and draft_model is None:
        raise QuickdraftError(f"method(s) {', '.join(wants_draft)} need a draft model: pass --draft-model ALIAS|PATH")
    if config.out.exists() and not config.out.is_dir():
        raise QuickdraftError(f"--out {str(config.out)!r} exists and is not a folder")
    old = read_meta(config.out).get("config")
    if old:
        new = resume_view(config)
        old = {**RESUME_DEFAULTS, **old}

        def same(key: str) -> bool:
            if key in ("model", "draft_model"):  # a path however written (relative, a trailing /); an alias as is
                return _model_key(old.get(key)) == _model_key(new[key])
            if key == "temperature":  # only sampled runs depend on it: a run holding none, or adding none, takes any
                return old.get(key) == new[key] or not any(METHODS[m].sampled for m in config.methods) or \
                    not any(r.get("sampled") for r in read_runs(config.out))
            return old.get(key) == new[key]

        diff = [k for k in RESUME_KEYS if not same(k)]
        if diff:
            detail = "; ".join(f"{k}: {old.get(k)!r} there, {new[k]!r} now" for k in diff)
            raise QuickdraftError(f"{config.out} holds runs made with other options ({detail}): "
                                  "use another --out, or the same options to resume")
    return config


def _model_key(name: str | None) -> str | None:
    """A model name as resumes compare it: an existing path resolved, anything else (an alias) as given."""
    if name is None or not Path(name).expanduser().exists():
        return name
    return str(Path(name).expanduser().resolve())


def resume_view(config: BenchConfig) -> dict[str, Any]:
    return {"model": config.model, "runner": config.runner, "draft_model": config.draft_model,
            "draft_runner": config.draft_runner, "draft_precision": config.draft_precision, "kernels": config.kernels,
            "dtype": config.dtype, "device": config.device, "max_new_tokens": config.max_new_tokens, "temperature": config.temperature,
            "data": str(config.data.resolve())}
