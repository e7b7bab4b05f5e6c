"""The runner's one C kernel: softmax over the rows of a bf16 matrix (softmax.c), built on first use.

torch's CPU softmax computes exp with SLEEF's 1-ULP exp; the attention's softmax is then the largest part of a long
prompt's prefill after the Linear products. softmax.c computes exp as a short polynomial, accurate well below bf16's
rounding, and gives torch's bits for nearly every weight (measured, with its gain: docs/runtime.md#softmax-kernel).
Each row is computed alone, in one order whatever the number of rows, so it is row-invariant by construction, as the
verify passes need (runners/attention.py); the load's check tests the whole model on it as on torch's.

softmax(x) runs the kernel where it can: a contiguous bf16 tensor on the CPU, a CPU with AVX512_BF16, AVX512BW and
AVX512VL, and a C compiler ($CC, else cc) that builds it; the build is kept in models.home()/kernels/ under a hash of
the source, the flags and the compiler. Elsewhere, or with QUICKDRAFT_NATIVE=0, it is torch's softmax (float32 inside,
rounded once), and `unavailable()` says why.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path

import torch

SOURCE = Path(__file__).with_name("softmax.c")
NEEDED = ("avx512f", "avx512bw", "avx512vl", "avx512_bf16")  # what softmax.c's instructions need
FLAGS = ("-O3", "-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512bf16", "-mfma", "-fopenmp", "-shared", "-fPIC")
ENV = "QUICKDRAFT_NATIVE"  # 0: torch's softmax everywhere


def softmax(x: torch.Tensor) -> torch.Tensor:
    """softmax(x, dim=-1) for x [..., n]: the kernel's for a contiguous bf16 CPU tensor where it is built, else
    torch's (for bf16, float32 inside and rounded once)."""
    lib = _load()[0]
    if lib is None or x.dtype != torch.bfloat16 or x.device.type != "cpu" or not x.is_contiguous() or x.numel() == 0:
        return torch.softmax(x, dim=-1)
    y = torch.empty_like(x)
    n = x.shape[-1]
    if lib.qd_softmax_bf16(x.data_ptr(), y.data_ptr(), x.numel() // n, n, n):
        raise MemoryError(f"softmax kernel: no scratch for rows of {n} keys")
    return y


def unavailable() -> str | None:
    """Why softmax() computes with torch's softmax here (None: it runs the kernel)."""
    return _load()[1]


def in_use() -> bool:
    return _load()[0] is not None


@lru_cache(maxsize=None)
def _load() -> tuple[ctypes.CDLL | None, str | None]:
    """(the built kernel, None), or (None, why not): decided once a process."""
    why = _refusal()
    if why is None:
        try:
            lib = ctypes.CDLL(str(_built()))
            lib.qd_softmax_bf16.argtypes = [ctypes.c_void_p, ctypes.c_void_p] + [ctypes.c_int64] * 3
            lib.qd_softmax_bf16.restype = ctypes.c_int
            return lib, None
        except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
            why = f"the kernel did not build or load: {_first_line(e)}"
    return None, why


def _refusal() -> str | None:
    from ..cpu import _first_processor

    if os.environ.get(ENV, "1").lower() in ("0", "off", "no", "false"):
        return f"{ENV}=0"
    flags = set(_first_processor().get("flags", "").split())
    missing = [f for f in NEEDED if f not in flags]
    if missing:
        return f"the CPU lacks {', '.join(missing)}"
    if _compiler() is None:
        return "no C compiler ($CC or cc) to build it"
    return None


def _compiler() -> str | None:
    return shutil.which(os.environ.get("CC") or "cc")


def _built() -> Path:
    """The shared library, built once per source, flags and compiler into models.home()/kernels/ (written under a
    temporary name and renamed: processes building at once each get a whole file)."""
    from ..models import home

    cc = _compiler()
    version = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=60).stdout
    key = hashlib.sha256("\0".join([SOURCE.read_text(), *FLAGS, version]).encode()).hexdigest()[:16]
    target = home() / "kernels" / f"softmax-{key}.so"
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
            out = Path(tmp) / target.name
            subprocess.run([cc, *FLAGS, str(SOURCE), "-o", str(out)], check=True, capture_output=True, text=True,
                           timeout=300)
            out.replace(target)
    return target


def _first_line(e: Exception) -> str:
    text = getattr(e, "stderr", None) or str(e)
    return (text.strip().splitlines() or [type(e).__name__])[0]
