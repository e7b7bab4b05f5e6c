"""AMX decision data: qwen2.5-coder-0.5b shapes (random weights), 2 threads: exact runners of several kernel mixes,
one-token and 32-token passes after 800 cached tokens, measured round-robin (3 rounds)."""
import json, random, statistics, sys, time
import torch
sys.path.insert(0, "src")
from transformers import Qwen2Config, Qwen2ForCausalLM
from quickdraft.runners import attention
from quickdraft.runners.hf import HFRunner, check_row_invariance, use_kernels
from quickdraft.runners.invariance import pad_where_needed, unpacked
cfg = json.load(open(".device/qwen0.5b-config.json"))
config = Qwen2Config(**{k: v for k, v in cfg.items() if k not in ("architectures", "transformers_version")})
if len(sys.argv) > 1: config.num_hidden_layers = int(sys.argv[1])
torch.manual_seed(0)
base = Qwen2ForCausalLM(config).eval()
torch.set_num_threads(2)
runners = {}
for name in ("mixed", "packed-only", "torch-only", "fp32"):
    t = time.perf_counter()
    dtype = torch.float32 if name == "fp32" else torch.bfloat16
    m = Qwen2ForCausalLM(config).eval(); m.load_state_dict(base.state_dict()); m = m.to(dtype)
    m.set_attn_implementation(attention.register(attention.ROWS if name == "fp32" else attention.NAME))
    use_kernels(m, "torch" if name == "torch-only" else "onednn")
    pad_where_needed(m, alternative=unpacked if name in ("mixed", "fp32") else None)
    r = HFRunner(m)
    inv = check_row_invariance(r)
    kinds = {n.split(".")[-1]: type(x).__name__ + (f"({type(x.linear).__name__},{x.min_rows})" if hasattr(x, "linear") else "")
             for n, x in m.named_modules() if n.startswith("model.layers.0.") and n.endswith("proj") or n == "lm_head"}
    print(name, f"load+check {time.perf_counter() - t:.0f} s", "invariance", inv, kinds, flush=True)
    runners[name] = r
rng = random.Random(0)
ctx = [rng.randrange(150000) for _ in range(800)]
for r in runners.values(): r.reset(); r.prefill(ctx)
res = {(name, n): [] for name in runners for n in (1, 32)}
for _ in range(3):
    for name, r in runners.items():
        for n, reps in ((1, 5), (32, 2)):
            for _ in range(reps):
                toks = [rng.randrange(150000) for _ in range(n)]
                t = time.perf_counter(); r.forward(toks); res[(name, n)].append(time.perf_counter() - t); r.rollback(800)
for name in runners:
    print(f"{name:12s} 1 token {statistics.median(res[(name, 1)])*1e3:6.1f} ms   32 tokens {statistics.median(res[(name, 32)])*1e3:6.1f} ms", flush=True)
