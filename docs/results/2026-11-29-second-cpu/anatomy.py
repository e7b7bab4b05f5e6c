"""Where a pass's time goes after 3,000 cached tokens, and whether huge pages for the weights change it.

    LD_PRELOAD=$T .venv/bin/python docs/results/2026-11-29-second-cpu/anatomy.py profile
    LD_PRELOAD=$T .venv/bin/python docs/results/2026-11-29-second-cpu/anatomy.py hugepages

profile: median pass times of 1, 17, 33, 65 and 129 random tokens, then torch.profiler's self time per operator
over five passes of 1 and of 33 tokens. hugepages: one-token and 33-token passes, then every large anonymous
mapping of the process (the weights among them) advised MADV_HUGEPAGE and collapsed at once (MADV_COLLAPSE,
Linux 6.1+), then the same passes again in the same process.
"""
import ctypes
import os
import random
import sys
import time

import quickdraft

gen = quickdraft.load("qwen2.5-coder-0.5b")
runner = gen.runner
random.seed(0)
runner.reset()
runner.prefill([random.randrange(1000, 30000) for _ in range(3000)])
cached = runner.length


def one(n: int) -> float:
    tokens = [random.randrange(1000, 30000) for _ in range(n)]
    t = time.perf_counter()
    runner.forward(tokens)
    seconds = time.perf_counter() - t
    runner.rollback(cached)
    return seconds


def median_ms(n: int, reps: int = 9) -> float:
    return sorted(one(n) for _ in range(reps))[reps // 2] * 1e3


def collapse(min_bytes: int = 8 << 20) -> int:
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    huge, done = 2 << 20, 0
    for line in open("/proc/self/maps"):
        f = line.split()
        if (len(f) > 5 and f[5] != "[heap]") or "rw" not in f[1]:
            continue
        a, b = (int(x, 16) for x in f[0].split("-"))
        a, b = (a + huge - 1) & ~(huge - 1), b & ~(huge - 1)
        if b - a >= min_bytes:
            libc.madvise(a, b - a, 14)  # MADV_HUGEPAGE
            libc.madvise(a, b - a, 25)  # MADV_COLLAPSE
            done += b - a
    return done


def huge_kb() -> str:
    return next(line.split()[1] for line in open(f"/proc/{os.getpid()}/smaps_rollup") if "AnonHuge" in line)


if sys.argv[1] == "profile":
    from torch.profiler import ProfilerActivity, profile

    print(" | ".join(f"{n} tokens {median_ms(n):.1f} ms" for n in (1, 1, 17, 33, 65, 129)))
    for n in (1, 33):
        with profile(activities=[ProfilerActivity.CPU]) as p:
            for _ in range(5):
                one(n)
        print(f"{n}-token passes, self time of 5 passes:")
        print(p.key_averages().table(sort_by="self_cpu_time_total", row_limit=8))
else:
    print("before", [f"{median_ms(n):.1f}" for n in (1, 1, 33)], "AnonHugePages kB", huge_kb())
    t = time.perf_counter()
    advised = collapse()
    print(f"collapsed {advised >> 20} MB in {time.perf_counter() - t:.1f} s")
    print("after ", [f"{median_ms(n):.1f}" for n in (1, 1, 33)], "AnonHugePages kB", huge_kb())
