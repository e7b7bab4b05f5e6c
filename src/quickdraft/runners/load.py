"""Loading the transformers target exact by construction, and the load's check of it on the real model.

exact_runner loads the model on the runner's own attention (attention.py), puts its Linear layers on the kernels
asked for (kernels.py), makes them row-invariant (invariance.py), and checks the whole model at load: logits of
n-token passes against one-token passes at the same positions, bit for bit (check_row_invariance). The check's
answer is kept for a later load of exactly the same configuration (`checked`).
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Callable

import torch

from . import attention, lean, native
from .hf import HFRunner
from .invariance import make_row_invariant, row_invariance, unpacked
from .kernels import use_kernels
from ..errors import UnsupportedModelError

CHECK_CACHED = (7, 1000)  # cache lengths the load's check runs passes after: a short one, one across VALUE_BLOCK
# on a GPU also one whose rows cross 2,048 keys, where torch's CUDA softmax changes kernel (attention.softmax_rows) and
# its matrix products may too; where the context holds it
DEVICE_CHECK_CACHED = 2000
# pass sizes it checks: where kernels were seen to change path by rows (2: float32; 8: torch's bf16 Linear with AMX;
# 16-17: oneDNN's bf16 products with AMX and AVX512_BF16; 33: past 32 rows), 65, where torch's own bf16 Linear was
# seen to differ where (2, 5, 16, 33) did not look (measured: docs/runtime.md#the-load-check), and 129, the longest
# prediction pass (the last token and a draft of PredictionConfig.max_draft, 128 tokens; a test keeps the two in
# step). Each size adds to every load's time.
CHECK_SIZES = (2, 5, 8, 16, 17, 33, 65, 129)


def check_row_invariance(runner: HFRunner) -> float:
    """The load's check: largest logit difference between rows of n-token passes and one-token decoding, n in
    CHECK_SIZES, after each of CHECK_CACHED cached tokens (on a GPU also DEVICE_CHECK_CACHED; arbitrary, fixed
    tokens). 0.0: invariant there."""
    lengths = CHECK_CACHED
    if runner.device.type != "cpu" and DEVICE_CHECK_CACHED + max(CHECK_SIZES) <= runner.max_context:
        lengths += (DEVICE_CHECK_CACHED,)
    tokens = [(i * 7919 + 11) % runner.vocab_size for i in range(max(lengths) + max(CHECK_SIZES))]
    return max(row_invariance(runner, tokens[: cached + max(CHECK_SIZES)], CHECK_SIZES) for cached in lengths)


def lean_checked(runner: HFRunner) -> HFRunner:
    """The runner, its lean pass dropped where the pass's logits are not the model forward's, bit for bit, on this
    model (lean.agrees: a one-token, a 5-token and a tree pass: a small part of a load's time). On the
    runner's own attention it is tried with padded keys (lean.KeyBuffers) first, then without; where the runner
    set padded rows (lean.LeanPass.pad_rows: on a GPU), with them first, then without."""
    if runner.lean is None or not runner.lean.usable():
        return runner
    same, error = False, None
    ours = runner.model.config._attn_implementation in attention.FUNCTIONS  # padded keys: the runner's attention only
    rows = runner.lean.pad_rows
    # padded keys and rows where they give the same bits, else the cache as is and each Linear padding its own rows
    forms = [(keys, r) for keys in ((True, False) if ours else (False,)) for r in ((rows, None) if rows else (None,))]
    for keys, padded_rows in forms:
        runner.lean.pad_keys, runner.lean.pad_rows = keys, padded_rows
        try:
            same, error = lean.agrees(runner, runner.lean), None
        except Exception as e:  # e.g. a transformers whose layers take other arguments
            same, error = False, e
        if same:
            break
    if error is not None:  # the last form tried raised: the model's forward runs
        warnings.warn(f"quickdraft's lean pass does not run this model here ({type(error).__name__}: {error}); its "
                      "passes go through the model's forward", stacklevel=2)
    if not same:
        runner.lean = None
        runner.reset()
    return runner


def exact_runner(path, dtype: torch.dtype, max_context: int | None = None, kernels: str = "auto",
                 progress: bool = False, device: str = "cpu") -> HFRunner:
    """The transformers target, exact by construction (runners/invariance.py, runners/attention.py): the runner's own
    eager attention, Linear layers on `kernels` (use_kernels: packed for oneDNN by default), those whose shape is not
    row-invariant there padded to the rows they need, and the property checked on this model at load, bit for bit
    (check_row_invariance; its answer is kept for a later load of exactly the same configuration: invariance.checked).

    Attention: in bf16 grouped (all rows of a pass in one product), and one row at a time where the check finds
    grouped not invariant; in float32 one row at a time (attention.rows_attention). A model the check still finds
    not invariant is refused in bf16 with UnsupportedModelError (dtype auto then loads float32); float32, which has
    nothing to fall back to, loads with a warning and row_invariant False. Decoding and verify passes of Qwen2 and
    Llama models skip transformers' plumbing between the layers (lean.py), where the load finds the logits the model
    forward's bit for bit (lean.agrees; else the model's forward), and keep the cache in KeyBuffers where that gives
    the same bits too and the check passes with them (else without). progress: say on stderr when the check
    runs (it takes seconds). device: "cpu" or "cuda" (the same design: on a GPU every Linear runs in fixed-size row
    blocks, invariance.fixed_rows_here, and the check runs there)."""
    from transformers import AutoModelForCausalLM

    from ..models import loading_from

    rows = attention.register(attention.ROWS if dtype == torch.float32 else attention.NAME)
    with loading_from(path):
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, attn_implementation=rows)
    model = model.to(device)
    use_kernels(model, kernels)
    alternative = None if kernels == "onednn" else unpacked  # "onednn" asked: packed only
    make_row_invariant(model, alternative, remember=kept_probe(alternative))
    runner = HFRunner(model, max_context)
    lean_checked(runner)

    def check(runner: HFRunner) -> float:  # the load's check, said on stderr where it runs (it takes seconds)
        if progress:
            print(f"quickdraft: checking that {runner.dtype} verify passes give one-token decoding's bits on this "
                  f"{'GPU' if runner.device.type == 'cuda' else 'CPU'} "
                  "(once per model and machine)...", file=sys.stderr, flush=True)
        return check_row_invariance(runner)

    # the check, or its answer from an earlier load of exactly this configuration (invariance.checked)
    worst, runner.row_invariance_kept = checked(runner, path, check)
    if worst != 0.0 and runner.lean is not None and runner.lean.pad_rows:  # first without padded rows
        runner.lean.pad_rows = None
        worst, runner.row_invariance_kept = checked(runner, path, check)
    if worst != 0.0 and runner.lean is not None and runner.lean.pad_keys:  # then without padded keys
        runner.lean.pad_keys = False
        worst, runner.row_invariance_kept = checked(runner, path, check)
    if worst != 0.0 and rows != attention.ROWS:
        model.set_attn_implementation(attention.register(attention.ROWS))
        worst, runner.row_invariance_kept = checked(runner, path, check)
    runner.row_invariant = worst == 0.0
    if runner.row_invariant:
        return runner
    where = "GPU" if runner.device.type == "cuda" else "CPU"
    message = (f"{type(model).__name__}'s {runner.dtype} passes are not row-invariant on this {where} even with the runner's "
               f"attention and padded layers (a verify pass and one-token decoding differ by up to {worst:g} in a "
               "logit), so drafted output could differ from plain decoding")
    if dtype == torch.float32:
        warnings.warn(f"{message} where two logits nearly tie", stacklevel=2)
        return runner
    raise UnsupportedModelError(f"dtype bf16: {message}; use dtype fp32")


# -- the load's verdict, kept for the same configuration ---------------------------------------------------------
# The load's check (check_row_invariance) is most of a load's time (measured: docs/runtime.md#the-load-check).
# Its answer is a function of what it ran on: the weights, the layers as loaded
# (kernels, padding, attention), this code, torch's and transformers' builds, the threads and the CPU (its model,
# flags and cache sizes, which oneDNN blocks its products by). So the answer is kept under a hash of all of those
# (models.home()/checks/) and a later load with the same hash takes it instead of running the check again; any
# change in any of them runs it again. QUICKDRAFT_CHECK_CACHE=off always runs it (the tests do, to patch it).

# this package's code that makes the logits
CHECKED_SOURCES = ("attention.py", "base.py", "gpu_softmax.py", "hf.py", "invariance.py", "kernels.py", "lean.py",
                   "load.py", "native.py", "softmax.c")


def _hash(what: object) -> str:
    import hashlib
    import json

    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()


def _build(sources: tuple[str, ...]) -> dict:
    """What of this code and this machine a kept answer depends on: the sources named (runners/), torch's build and
    threads, and the CPU (cpu.identity)."""
    from .. import cpu

    here = Path(__file__).parent
    return {"code": {name: _hash((here / name).read_text()) for name in sources},
            "torch": [torch.__version__, torch.version.git_version, torch.get_num_threads()], "cpu": cpu.identity()}


def verdict_key(runner, path: Path | str) -> str:
    """The hash a check's answer is kept under: everything the answer depends on (above)."""
    import transformers

    folder = Path(path).resolve()
    weights = sorted((f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in folder.iterdir()
                     if f.suffix in (".safetensors", ".bin", ".json"))
    return _hash({
        "model": [str(folder), weights],
        "layers": _hash(repr(runner.model)),
        "attention": runner.model.config._attn_implementation, "dtype": runner.dtype, "kernels": runner.kernels,
        "padded keys": bool(runner.lean is not None and runner.lean.pad_keys),  # lean.py's KeyBuffers
        "padded rows": runner.lean.pad_rows if runner.lean is not None else None,  # lean.LeanPass.pad_rows
        "softmax kernel": native.in_use(),  # QUICKDRAFT_NATIVE=0 or a missing compiler: torch's softmax instead
        "attention softmax": attention.softmax_in_use(runner.device),  # on a GPU: the Triton kernel, or folded in torch
        **_build(CHECKED_SOURCES),
        "transformers": transformers.__version__,
        "device": _device_identity(runner.device),
    })


def kept_probe(alternative) -> Callable:
    """invariance.pad_where_needed's `remember`: a Linear shape's probe answer (invariance.plan) kept under a hash of
    what it depends on: the layer's kind, shape and dtype, the alternative tried, the code that probes and runs it,
    torch's build and threads, and the CPU or GPU (models.home()/checks/probes/). Probing the output layer alone runs
    129 one-row products of it (seconds); the model's check at load still tests the layers chosen."""
    build = {**_build(("invariance.py", "kernels.py")), "alternative": getattr(alternative, "__name__", None)}

    def remember(layer: torch.nn.Module, probe: Callable):
        w = layer.weight
        what = {**build, "layer": type(layer).__name__, "shape": list(w.shape), "dtype": str(w.dtype),
                "device": _device_identity(w.device)}
        return _kept_or(_verdict_file(_hash(what), "probes"), probe, "plan",
                        lambda how: None if how is None else (str(how[0]), int(how[1])))[0]

    return remember


def _device_identity(device: torch.device) -> list:
    """The GPU the passes ran on (its name, compute capability, CUDA build, SM count, and whether cuBLAS may reduce bf16
    products in bf16), or "cpu" (cpu.identity says which): cuBLAS picks its kernels by all of them."""
    if device.type != "cuda":
        return ["cpu"]
    properties = torch.cuda.get_device_properties(device)  # the SM count: a MIG slice or a smaller card of one name
    return [torch.cuda.get_device_name(device), list(torch.cuda.get_device_capability(device)), torch.version.cuda,
            properties.multi_processor_count, torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction]


def _verdict_file(key: str, folder: str = "") -> Path | None:
    import os

    from ..models import home

    if os.environ.get("QUICKDRAFT_CHECK_CACHE", "on").lower() in ("off", "0", "no", "false"):
        return None
    return home() / "checks" / folder / f"{key}.json"


def _kept_or(file: Path | None, compute: Callable, field: str, parse: Callable) -> tuple[object, bool]:
    """parse(the answer's `field`) kept in `file` by an earlier load, else compute()'s, kept there (atomically; a cache
    that cannot be read is computed again, one that cannot be written is no error); (answer, whether it was kept)."""
    import json
    import time

    if file is not None and file.is_file():
        try:
            return parse(json.loads(file.read_text())[field]), True
        except (OSError, ValueError, KeyError, TypeError, IndexError):
            pass  # unreadable: compute again
    answer = compute()
    if file is not None:
        try:
            file.parent.mkdir(parents=True, exist_ok=True)
            tmp = file.with_suffix(".tmp")
            tmp.write_text(json.dumps({field: answer, "checked": time.strftime("%Y-%m-%dT%H:%M:%S")}))
            tmp.replace(file)
        except OSError:
            pass  # compute at every load, as without a cache
    return answer, False


def checked(runner, path: Path | str, check: Callable[[object], float]) -> tuple[float, bool]:
    """check(runner), or its answer from an earlier load of exactly this configuration; (answer, whether it was
    kept from before)."""
    return _kept_or(_verdict_file(verdict_key(runner, path)), lambda: check(runner), "worst", float)
