"""One-token steps with the cache growing (a new key count every step, as decoding does) against steps at one key
count (rolled back each time), and bf16 attention products alone at new against repeated key counts."""
import random, statistics, sys, time, torch, quickdraft
from quickdraft.cpu import describe
print(describe(), torch.__version__, torch.get_num_threads(), "threads")
# products alone: q [1, 2, 7, 64] x keys_t [1, 2, 64, L]; weights [1, 2, 7, L] x values [1, 2, L, 64]
D = int(sys.argv[2]) if len(sys.argv) > 2 else 64
for dtype in (torch.bfloat16,):
    q = torch.randn(1, 2, 7, D, dtype=dtype); kt = torch.randn(1, 2, D, 4096, dtype=dtype); v = torch.randn(1, 2, 4096, D, dtype=dtype)
    for name, lengths in (("new L", range(1000, 1200)), ("same L", [1000] * 200), ("L padded to 64", [(l + 63) // 64 * 64 for l in range(2000, 2200)])):
        ts = []
        for L in lengths:
            k_ = kt[..., :L]; v_ = v[:, :, :L]; w = torch.randn(1, 2, 7, L, dtype=dtype)
            t = time.perf_counter(); s = torch.matmul(q, k_); o = torch.matmul(w, v_); ts.append(time.perf_counter() - t)
        print(f"{dtype} {name}: two products {statistics.median(ts)*1e6:.0f} us median, {statistics.mean(ts)*1e6:.0f} us mean")
if len(sys.argv) > 1:
    r = quickdraft.load(sys.argv[1], dtype="bf16", progress=False).runner
    r.reuse_prefix = False
    rng = random.Random(0)
    for name in ("growing", "fixed"):
        r.reset(); r.prefill([rng.randrange(150000) for _ in range(800)]); ts = []
        for i in range(60):
            L = r.length; t = time.perf_counter(); r.forward([rng.randrange(150000)]); ts.append(time.perf_counter() - t)
            if name == "fixed": r.rollback(L)
        print(f"one-token steps, cache {name}: median {statistics.median(ts[5:])*1e3:.1f} ms, mean {statistics.mean(ts[5:])*1e3:.1f} ms")
