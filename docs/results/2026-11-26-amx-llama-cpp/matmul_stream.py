"""The weights of one one-token step of qwen2.5-coder-0.5b (24 layers' q, k, v, o, gate, up, down and the output
layer: 988 MB in bf16, distinct tensors so nothing stays in cache) multiplied by 1 and by 32 rows, with each kernel
torch offers for bf16 on the CPU, against what a float32 sum reads from memory: how near the step's products come to
the machine's bandwidth."""
import sys, time, torch
torch.manual_seed(0)
H, I, KV, V, L = 896, 4864, 128, 151936, 24
shapes = [(H, H), (KV, H), (KV, H), (H, H), (I, H), (I, H), (H, I)] * L + [(V, H)]
ws = [torch.randn(o, i).to(torch.bfloat16) for o, i in shapes]
gb = sum(w.numel() for w in ws) * 2 / 1e9
x = {n: {i: torch.randn(n, i).to(torch.bfloat16) for i in (H, I)} for n in (1, 32)}
def bench(step, rounds=7):
    step(); ts = []
    for _ in range(rounds):
        t = time.perf_counter(); step(); ts.append(time.perf_counter() - t)
    return sorted(ts)[len(ts) // 2]
s = torch.ones(2**28)
t = bench(lambda: s.sum(), 9)
print(f"{torch.get_num_threads()} threads; float32 sum of 1 GiB: {t*1e3:.1f} ms, {2**30/t/1e9:.1f} GB/s; step weights {gb*1e3:.0f} MB in bf16")
del s
import os
isa = os.environ.get("ONEDNN_MAX_CPU_ISA", "default")
for rows, n in ((32, 1), (32, 32), (1, 1), (32, 1)):
    packed = [torch.ops.mkldnn._reorder_linear_weight(w, rows) for w in ws]
    t = bench(lambda: [torch.ops.mkldnn._linear_pointwise(x[n][w.shape[1]], p, None, "none", [None], "") for w, p in zip(ws, packed)])
    print(f"[isa {isa}] packed for {rows:>2} rows, {n:>2}-row products: {t*1e3:6.1f} ms ({gb/t:.1f} GB/s)")
    del packed
t = bench(lambda: [torch.nn.functional.linear(x[1][w.shape[1]], w) for w in ws])
print(f"[isa {isa}] torch's Linear,        1-row products: {t*1e3:6.1f} ms ({gb/t:.1f} GB/s)")
