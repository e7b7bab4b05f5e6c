"""What CPU this is, in the terms that change this project's numbers and crashes.

The project's machines differ between sessions and CI runs (AMD EPYC with AVX2 only; Intel Xeon with
AVX-512; Intel Xeon with AMX and AVX512_BF16). Kernel choices and speed ratios differ between them, and
llama.cpp's AMX path crashes on the last kind (docs/llamacpp.md), so every benchmark record names the CPU
and these flags, and code that must choose by CPU asks here.

    >>> describe({"model": "AMD EPYC", "flags": ["avx2", "fma"]})
    'AMD EPYC [avx2 fma]'
"""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any

# The instruction sets that decide which kernels run here: float32 SIMD width, native bf16, AMX tiles.
RELEVANT_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_int8", "amx_bf16")


def cpu_info(cpuinfo: str | None = None) -> dict[str, Any]:
    """{"model": the CPU's model name, "flags": the RELEVANT_FLAGS it has, in that order}.

    Reads /proc/cpuinfo (or the text given, for tests); elsewhere the model is platform's guess and the
    flags are unknown (an empty list).
    """
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            cpuinfo = ""
    model = platform.processor() or platform.machine()
    flags: set[str] = set()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and value.strip():
            model = value.strip()
        elif key.strip() == "flags":
            flags = set(value.split())
        if flags and key.strip() == "flags":
            break  # every core lists the same flags; the first model name precedes them
    return {"model": model, "flags": [f for f in RELEVANT_FLAGS if f in flags]}


def describe(info: dict[str, Any] | None = None) -> str:
    """One line for reports and notes: the model name and the relevant flags."""
    info = cpu_info() if info is None else info
    return f"{info['model']} [{' '.join(info['flags'])}]"


def has_native_bf16(info: dict[str, Any] | None = None) -> bool:
    """Whether the CPU computes bf16 dot products in hardware (AVX512_BF16 or AMX)."""
    flags = (cpu_info() if info is None else info)["flags"]
    return "avx512_bf16" in flags or "amx_bf16" in flags


def usable_cores() -> int:
    """The cores this process may run on (not the machine's total when pinned to fewer)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1
