"""What CPU this is, in the terms that change this project's numbers and crashes.

The machines this runs on differ in the instruction sets that decide kernels: AVX2 only; AVX-512; AMX with
AVX512_BF16. Kernel choices and speed ratios differ between them, and llama.cpp's AMX path crashes on the last
kind (docs/llamacpp.md#stock-baselines-on-cpus-with-amx), so every benchmark record names the CPU and these flags,
and code that must choose by CPU asks here. It also says which memory allocator the process runs on, and starts the
CLI again on tcmalloc where it is installed (restart_with_tcmalloc).

    >>> describe({"model": "Example CPU 8C", "flags": ["avx2", "fma"]})
    'Example CPU 8C [avx2 fma]'
"""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

# The instruction sets that decide which kernels run here: float32 SIMD width, native bf16, AMX tiles.
RELEVANT_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_int8", "amx_bf16")


def _first_processor(cpuinfo: str | None = None) -> dict[str, str]:
    """The fields of the first processor in /proc/cpuinfo (or the text given, for tests); {} where there is none.
    Every core lists the same model and flags."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            cpuinfo = ""
    fields: dict[str, str] = {}
    for line in cpuinfo.strip().split("\n\n")[0].splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    return fields


def cpu_info(cpuinfo: str | None = None) -> dict[str, Any]:
    """{"model": the CPU's model name, "flags": the RELEVANT_FLAGS it has, in that order}.

    Reads /proc/cpuinfo (or the text given, for tests); elsewhere the model is platform's guess and the
    flags are unknown (an empty list).
    """
    fields = _first_processor(cpuinfo)
    flags = set(fields.get("flags", "").split())
    return {"model": fields.get("model name") or platform.processor() or platform.machine(),
            "flags": [f for f in RELEVANT_FLAGS if f in flags]}


def identity() -> dict[str, str]:
    """What of this CPU can change which kernels run and how they split their sums: vendor, family, model, stepping,
    every flag, and the cache sizes (oneDNN blocks its products by them). For keys of results that depend on it
    (runners/load.checked)."""
    fields = _first_processor()
    ident = {k: fields[k] for k in ("vendor_id", "cpu family", "model", "model name", "stepping", "flags") if k in fields}
    caches = Path("/sys/devices/system/cpu/cpu0/cache")
    for index in sorted(caches.glob("index*")) if caches.is_dir() else ():
        try:
            ident[index.name] = " ".join((index / f).read_text().strip() for f in ("level", "type", "size"))
        except OSError:
            pass
    return ident or {"platform": platform.platform()}


def describe(info: dict[str, Any] | None = None) -> str:
    """One line for reports and notes: the model name and the relevant flags."""
    info = cpu_info() if info is None else info
    return f"{info['model']} [{' '.join(info['flags'])}]"


def has_native_bf16(info: dict[str, Any] | None = None) -> bool:
    """Whether the CPU computes bf16 dot products in hardware (AVX512_BF16 or AMX)."""
    flags = (cpu_info() if info is None else info)["flags"]
    return "avx512_bf16" in flags or "amx_bf16" in flags


def has_amx_bf16(info: dict[str, Any] | None = None) -> bool:
    """Whether the CPU computes bf16 products on AMX tiles (whose kernels the runner treats apart: FixedRows, and
    SDPA for prefill)."""
    return "amx_bf16" in (cpu_info() if info is None else info)["flags"]


def usable_cores() -> int:
    """The cores this process may run on (not the machine's total when pinned to fewer)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


# -- the memory allocator -----------------------------------------------------------------------------------------
# A verify pass allocates and frees tensors of megabytes (scores, logits) every layer and every pass; glibc's malloc
# returns much of that memory to the system and faults it in again, where tcmalloc keeps it. The CLI's long-running
# commands start again with tcmalloc preloaded where the library is installed, as vLLM's and PyTorch's CPU launchers
# recommend (torch.backends.xeon.run_cpu --enable-tcmalloc); the numbers computed are the same, only the time
# changes (measured: docs/cpu.md#allocator).
TCMALLOC = "libtcmalloc_minimal.so.4"  # Debian and Ubuntu: libtcmalloc-minimal4
TCMALLOC_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/lib")
TCMALLOC_ENV = "QUICKDRAFT_TCMALLOC"  # "0": never preload it


def find_tcmalloc(dirs: Sequence[str] = TCMALLOC_DIRS) -> str | None:
    """The path of tcmalloc's shared library in the first of `dirs` that has it, else None."""
    for d in dirs:
        path = os.path.join(d, TCMALLOC)
        if os.path.exists(path):
            return path
    return None


def allocator(maps: str | None = None) -> str:
    """"tcmalloc" where this process has it loaded (its /proc/self/maps, or `maps`), else "system"."""
    if maps is None:
        try:
            with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
                maps = f.read()
        except OSError:
            return "system"
    return "tcmalloc" if "libtcmalloc" in maps else "system"


def tcmalloc_env(env: Mapping[str, str], path: str | None) -> dict[str, str] | None:
    """The environment to start this program again in with tcmalloc preloaded, or None where that should not happen:
    not on Linux, no library found, QUICKDRAFT_TCMALLOC=0, or already tried (a start that still lacks it does not
    start again). tcmalloc reports every allocation over 1 GiB on stderr by default; a model's weights can be one."""
    if sys.platform != "linux" or path is None or env.get(TCMALLOC_ENV) == "0" or env.get("_QUICKDRAFT_PRELOADED"):
        return None
    preload = env.get("LD_PRELOAD", "")
    return {**env, "LD_PRELOAD": f"{path}:{preload}" if preload else path, "_QUICKDRAFT_PRELOADED": "1",
            "TCMALLOC_LARGE_ALLOC_REPORT_THRESHOLD": env.get("TCMALLOC_LARGE_ALLOC_REPORT_THRESHOLD", str(1 << 40))}


def restart_with_tcmalloc(argv: Sequence[str]) -> None:
    """Replace this process by `sys.executable argv...` with tcmalloc preloaded, where tcmalloc_env says so and it is
    not loaded already; otherwise return and go on as is."""
    if allocator() == "tcmalloc":
        return
    env = tcmalloc_env(os.environ, find_tcmalloc())
    if env is not None:
        sys.stdout.flush()
        sys.stderr.flush()
        os.execve(sys.executable, [sys.executable, *argv], env)
