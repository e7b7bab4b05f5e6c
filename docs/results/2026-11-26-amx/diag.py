import json, sys, time, torch
sys.path.insert(0, "src")
from transformers import Qwen2Config, Qwen2ForCausalLM
from quickdraft.runners import attention
from quickdraft.runners.hf import HFRunner, PackedLinear, check_row_invariance, use_kernels
from quickdraft.runners.invariance import RowPadded, rows_invariant, pad_where_needed
torch.set_num_threads(2)
bf = torch.bfloat16
def probe(layer, fin, rows_list=(1, 2, 3, 4, 5, 8, 15, 16, 17, 24, 31, 32, 33, 48, 63, 64, 65, 128)):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(max(rows_list), fin, generator=g).to(bf)
    with torch.inference_mode():
        alone = torch.cat([layer(x[i:i+1]) for i in range(x.shape[0])])
        return "".join("=" if torch.equal(layer(x[:m]), alone[:m]) else "x" for m in rows_list)
print("rows probed: 1 2 3 4 5 8 15 16 17 24 31 32 33 48 63 64 65 128  (=: same bits as one row alone)")
for out, fin in ((896, 896), (128, 896), (4864, 896), (896, 4864), (151936, 896)):
    w = torch.randn(out, fin).to(bf) * 0.02
    lin = torch.nn.Linear(fin, out, bias=False).to(bf); lin.weight.data = w
    packed = PackedLinear(w)
    res = {"torch": probe(lin, fin), "packed": probe(packed, fin)}
    for r in (16, 32, 64):
        res[f"packed pad{r}"] = probe(RowPadded(packed, r), fin)
    print(out, fin, json.dumps(res), flush=True)
# attention alone on random inputs: grouped, n-token rows vs one-token
torch.manual_seed(0)
for L in (40, 300, 1000, 2100):
    bad = []
    for n in (2, 5, 16, 33):
        q = torch.randn(1, 14, n, 64).to(bf); k = torch.randn(1, 2, L, 64).to(bf); v = torch.randn(1, 2, L, 64).to(bf)
        allowed = torch.ones(n, L, dtype=torch.bool); allowed[:, L-n:] = torch.tril(torch.ones(n, n, dtype=torch.bool))
        mask = torch.zeros(1, 1, n, L, dtype=bf).masked_fill(~allowed, torch.finfo(bf).min)
        full = attention.grouped_attention(None, q, k, v, mask, 0.125)[0]
        for i in range(n):
            Li = L - n + i + 1
            one = attention.grouped_attention(None, q[:, :, i:i+1], k[:, :, :Li], v[:, :, :Li], None, 0.125)[0]
            if not torch.equal(full[:, i:i+1], one): bad.append((n, i)); break
    print("attention grouped L", L, "differs at", bad, flush=True)
cfg = json.load(open(".device/qwen0.5b-config.json"))
config = Qwen2Config(**{k: v for k, v in cfg.items() if k not in ("architectures", "transformers_version")})
if len(sys.argv) > 1: config.num_hidden_layers = int(sys.argv[1])
torch.manual_seed(0)
model = Qwen2ForCausalLM(config).eval().to(bf)
model.set_attn_implementation(attention.register(attention.NAME))
use_kernels(model, "auto"); print("padded:", sorted(set(pad_where_needed(model))), flush=True)
runner = HFRunner(model)
print("model check, grouped attention:", check_row_invariance(runner), flush=True)
model.set_attn_implementation(attention.register(attention.ROWS))
print("model check, rows attention:", check_row_invariance(runner), flush=True)
