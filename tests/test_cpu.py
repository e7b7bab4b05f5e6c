"""quickdraft.cpu: the CPU's model and the flags that change kernels, ratios and crashes; the allocator."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from quickdraft import cli, cpu
from quickdraft.cpu import RELEVANT_FLAGS, cpu_info, describe, has_native_bf16

XEON_AMX = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz
flags\t\t: fpu vme avx2 fma avx512f avx512_vnni avx512_bf16 amx_bf16 amx_tile amx_int8 sse4_2

processor\t: 1
model name\t: Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz
flags\t\t: fpu vme avx2 fma avx512f avx512_vnni avx512_bf16 amx_bf16 amx_tile amx_int8 sse4_2
"""
EPYC = """processor\t: 0
model name\t: AMD EPYC 7B13
flags\t\t: fpu sse4_2 avx avx2 fma f16c
"""


def test_model_and_relevant_flags_in_a_fixed_order():
    info = cpu_info(XEON_AMX)
    assert info["model"] == "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz"
    assert info["flags"] == ["avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_int8", "amx_bf16"]
    assert cpu_info(EPYC) == {"model": "AMD EPYC 7B13", "flags": ["avx2", "fma"]}
    assert describe(cpu_info(EPYC)) == "AMD EPYC 7B13 [avx2 fma]"


def test_native_bf16_only_with_avx512_bf16_or_amx():
    assert has_native_bf16(cpu_info(XEON_AMX))
    assert not has_native_bf16(cpu_info(EPYC))
    assert not has_native_bf16(cpu_info("model name\t: Xeon\nflags\t\t: avx2 avx512f\n"))


def test_this_machine():
    info = cpu_info()
    assert info["model"] and set(info["flags"]) <= set(RELEVANT_FLAGS)
    assert cpu_info("")["flags"] == []  # no /proc/cpuinfo: flags unknown, not invented


def test_tcmalloc_found_where_installed_and_the_environment_to_start_again_in(tmp_path):
    assert cpu.find_tcmalloc([str(tmp_path)]) is None
    (tmp_path / cpu.TCMALLOC).write_bytes(b"")
    path = cpu.find_tcmalloc(["/nonexistent", str(tmp_path)])
    assert path == str(tmp_path / cpu.TCMALLOC)
    env = cpu.tcmalloc_env({"LD_PRELOAD": "/x/libiomp5.so", "HOME": "/h"}, path)
    assert env["LD_PRELOAD"] == f"{path}:/x/libiomp5.so" and env["HOME"] == "/h" and env["_QUICKDRAFT_PRELOADED"] == "1"
    assert int(env["TCMALLOC_LARGE_ALLOC_REPORT_THRESHOLD"]) >= 1 << 40  # no report for a model's weights
    assert cpu.tcmalloc_env({}, path)["LD_PRELOAD"] == path
    assert cpu.tcmalloc_env({cpu.TCMALLOC_ENV: "0"}, path) is None  # asked not to
    assert cpu.tcmalloc_env(env, path) is None  # started again once already: never a loop
    assert cpu.tcmalloc_env({}, None) is None
    assert cpu.allocator("7f00-7f01 r-xp 0 08:01 1 /usr/lib/libtcmalloc_minimal.so.4.5.10\n") == "tcmalloc"
    assert cpu.allocator("7f00-7f01 r-xp 0 08:01 1 /usr/lib/x86_64-linux-gnu/libc.so.6\n") == "system"


@pytest.mark.skipif(cpu.find_tcmalloc() is None, reason="tcmalloc is not installed (Debian: libtcmalloc-minimal4)")
def test_a_program_starts_again_on_tcmalloc_and_not_when_asked_not_to():
    child = "import quickdraft.cpu as c; print(c.allocator())"
    code = f"import quickdraft.cpu as c; c.restart_with_tcmalloc(['-c', {child!r}]); print('as is', c.allocator())"
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "_QUICKDRAFT_PRELOADED")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "tcmalloc"
    out = subprocess.run([sys.executable, "-c", code], env={**env, cpu.TCMALLOC_ENV: "0"}, capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == "as is system"


def test_the_cli_starts_again_only_for_model_commands_run_as_a_program(monkeypatch):
    calls = []
    monkeypatch.setattr(cpu, "restart_with_tcmalloc", lambda argv: calls.append(list(argv)))
    monkeypatch.setattr(sys, "argv", ["quickdraft", "models", "list"])
    cli.main()
    assert calls == []
    monkeypatch.setattr(sys, "argv", ["quickdraft", "bench", "--help"])
    with pytest.raises(SystemExit):
        cli.main()
    assert calls == [["-m", "quickdraft", "bench", "--help"]]
    with pytest.raises(SystemExit):
        cli.main(["bench", "--help"])  # called from Python with its arguments: this process goes on as it is
    assert len(calls) == 1
