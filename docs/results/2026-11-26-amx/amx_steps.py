"""On the device machine's CPU: qwen2.5-coder-0.5b's shapes (random weights), 2 threads, one pass of n tokens after
`cached` tokens: stock transformers (eager attention, torch Linear) against quickdraft's exact runner, fp32 and bf16."""
import json, random, statistics, sys, time
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM
sys.path.insert(0, "src")
from quickdraft.runners import attention
from quickdraft.runners.hf import HFRunner, check_row_invariance, use_kernels
from quickdraft.runners.invariance import pad_where_needed

cfg = json.load(open(".device/qwen0.5b-config.json"))
config = Qwen2Config(**{k: v for k, v in cfg.items() if k not in ("architectures", "transformers_version")})
if len(sys.argv) > 2: config.num_hidden_layers = int(sys.argv[2])
torch.manual_seed(0)
t = time.perf_counter()
base = Qwen2ForCausalLM(config).eval()
print(f"built in {time.perf_counter() - t:.0f} s", flush=True)
torch.set_num_threads(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
print("threads", torch.get_num_threads(), "bf16 kernels", torch.ops.mkldnn._is_mkldnn_bf16_supported(), flush=True)
rng = random.Random(0)

def timed(runner, cached, n, reps):
    ctx = [rng.randrange(150000) for _ in range(cached)]
    runner.reset(); runner.prefill(ctx)
    ts = []
    for _ in range(reps):
        toks = [rng.randrange(150000) for _ in range(n)]
        s = time.perf_counter(); runner.forward(toks); ts.append(time.perf_counter() - s); runner.rollback(cached)
    return statistics.median(ts) * 1e3

for dtype in (torch.bfloat16,):
    for setup in ("stock", "quickdraft"):
        model = Qwen2ForCausalLM(config).eval()
        model.load_state_dict(base.state_dict())
        model = model.to(dtype)
        if setup == "quickdraft":
            model.set_attn_implementation(attention.register(attention.NAME if dtype == torch.bfloat16 else attention.ROWS))
            use_kernels(model, "auto"); names = pad_where_needed(model)
            print("replaced:", {n: type(m).__name__ + (f"({type(m.linear).__name__}, {m.min_rows})" if hasattr(m, "linear") else "")
                                for n, m in model.named_modules() if n.startswith("model.layers.0.") or n == "lm_head"}, flush=True)
        else:
            model.set_attn_implementation("eager")
        runner = HFRunner(model)
        inv = check_row_invariance(runner) if setup == "quickdraft" else None
        row = {n: timed(runner, 800, n, 7 if n == 1 else 4) for n in (1, 4, 16, 32, 65)}
        t = time.perf_counter(); runner.reset(); runner.prefill([rng.randrange(150000) for _ in range(800)]); pre = time.perf_counter() - t
        long1 = timed(runner, 2000, 1, 5); long32 = timed(runner, 2000, 32, 3)
        print(f"{str(dtype)[6:]:9s} {setup:10s} kernels {runner.kernels} invariance {inv}: after 800: " + ", ".join(f"{n}: {v:.1f}" for n, v in row.items())
              + f" ms; prefill 800 {pre:.2f} s; after 2000: 1: {long1:.1f}, 32: {long32:.1f} ms", flush=True)
        del runner, model
