"""ms per verify pass of 1, 9, 33 and 129 tokens after 800 and 2,560 cached random tokens (median), as one line.

Run once per version with PYTHONPATH pointing at its src/, processes alternated (ab_verify.txt)."""
import time, random, statistics
import quickdraft
gen = quickdraft.load("qwen2.5-coder-0.5b", progress=False)
r = gen.runner; r.reuse_prefix = False
rng = random.Random(0)
out = []
for L in (800, 2560):
    ctx = [rng.randrange(1000, 20000) for _ in range(L)]
    r.reset(); r.prefill(ctx)
    for n in (1, 9, 33, 129):
        ts = []
        for i in range(7 if n > 9 else 15):
            toks = [rng.randrange(1000, 20000) for _ in range(n)]
            t = time.perf_counter(); r.forward(toks); ts.append(time.perf_counter() - t); r.rollback(L)
        out.append(f"L{L} n{n} {statistics.median(ts[2:])*1000:.1f}")
print(" | ".join(out))
