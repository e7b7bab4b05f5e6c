"""quickdraft.cpu: the CPU's model and the flags that change kernels, ratios and crashes."""

from __future__ import annotations

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
