"""What a benchmark row records of where it ran: the machine, the versions, which weights, and peak memory."""

from __future__ import annotations

import hashlib
import os
import platform
import resource
import sys
from pathlib import Path
from typing import Any

from ..cpu import allocator, cpu_info
from .llamacpp_stock import repack_allowed


def machine_info() -> dict[str, Any]:
    """The machine a run ran on: the CPU's model and the flags that change kernels and ratios (quickdraft.cpu),
    memory, the allocator, and whether llama.cpp baselines could load stock repacked weights (bench/llamacpp_stock.py)."""
    info_cpu = cpu_info()
    mem = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem = round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    info: dict[str, Any] = {"platform": platform.platform(), "cpu": info_cpu["model"], "cpu_flags": info_cpu["flags"],
                            "cores": os.cpu_count(), "memory_gib": mem, "hostname": platform.node(),
                            "allocator": allocator()}  # tcmalloc or the system's: it changes times (cpu.py)
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
