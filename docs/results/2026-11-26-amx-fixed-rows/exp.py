"""AMX: can packed bf16 products be made row-invariant by fixed-shape blocks (every pass computed in B-row
products, the last zero-padded), and what does it cost? qwen2.5-coder-0.5b's shapes, random weights, 2 threads."""
import json, random, statistics, sys, time
import torch
sys.path.insert(0, "src")
from transformers import Qwen2Config, Qwen2ForCausalLM
from quickdraft.runners import attention
from quickdraft.runners.hf import HFRunner, PackedLinear, check_row_invariance, use_kernels
from quickdraft.runners.invariance import pad_where_needed, unpacked, row_invariance
torch.set_num_threads(2)
bf = torch.bfloat16
print("torch", torch.__version__, "threads", torch.get_num_threads(), flush=True)

class Blocked(torch.nn.Module):
    def __init__(self, linear, rows):
        super().__init__(); self.linear, self.rows = linear, rows
    @property
    def weight(self): return self.linear.weight
    @property
    def in_features(self): return self.linear.in_features
    @property
    def out_features(self): return self.linear.out_features
    def forward(self, x):
        n = x.shape[:-1].numel(); B = self.rows
        flat = x.reshape(n, x.shape[-1]); k = -(-n // B)
        padded = flat.new_zeros(k * B, flat.shape[-1]); padded[:n] = flat
        out = torch.cat([self.linear(padded[i * B:(i + 1) * B]) for i in range(k)])
        return out[:n].reshape(*x.shape[:-1], -1)

ROWS = (1, 2, 3, 5, 8, 15, 16, 17, 31, 32, 33, 48, 63, 64, 65, 100, 128, 129)
def probe(layer, fin, tiny):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(max(ROWS), fin, generator=g)
    if tiny:
        x = torch.where(torch.rand(x.shape, generator=g) < tiny, x * 1e-39, x)
    x = x.to(bf)
    with torch.inference_mode():
        alone = torch.cat([layer(x[i:i+1]) for i in range(x.shape[0])])
        return "".join("=" if torch.equal(layer(x[:m]), alone[:m]) else "x" for m in ROWS)

print("rows:", ROWS, flush=True)
t0 = time.perf_counter()
for out, fin, bias in [] if len(sys.argv) > 2 else ((896, 896, True), (128, 896, True), (4864, 896, False), (896, 4864, False)):
    torch.manual_seed(1)
    lin = torch.nn.Linear(fin, out, bias=bias).to(bf)
    packed = PackedLinear(lin.weight.detach(), lin.bias.detach() if bias else None)
    res = {}
    for tiny in (0, 0.3):
        res[f"torch d{tiny}"] = probe(lin, fin, tiny)
        res[f"packed d{tiny}"] = probe(packed, fin, tiny)
        for B in (16, 32, 64):
            res[f"blocked{B} d{tiny}"] = probe(Blocked(packed, B), fin, tiny)
    print(out, fin, "bias" if bias else "", json.dumps(res), flush=True)
print(f"probes {time.perf_counter() - t0:.0f} s", flush=True)

cfg = json.load(open(".device/qwen0.5b-config.json"))
config = Qwen2Config(**{k: v for k, v in cfg.items() if k not in ("architectures", "transformers_version")})
if len(sys.argv) > 1: config.num_hidden_layers = int(sys.argv[1])
torch.manual_seed(0)
base = Qwen2ForCausalLM(config).eval()
state = base.state_dict()

def build(name):
    dtype = torch.float32 if name == "fp32 current" else bf
    m = Qwen2ForCausalLM(config).eval(); m.load_state_dict(state); m = m.to(dtype)
    m.set_attn_implementation(attention.register(attention.ROWS if dtype == torch.float32 else attention.NAME))
    if name == "bf16 new":
        from quickdraft.runners.invariance import make_row_invariant
        use_kernels(m, "auto"); make_row_invariant(m, alternative=unpacked)
    elif name in ("bf16 current", "fp32 current"):
        use_kernels(m, "auto"); pad_where_needed(m, alternative=unpacked)
    elif name == "bf16 packed (not exact)":
        use_kernels(m, "onednn")
    elif name.startswith("bf16 blocked"):
        use_kernels(m, "onednn")
        chosen = {}
        for mod in list(m.modules()):
            for cn, child in list(mod.named_children()):
                if isinstance(child, PackedLinear):
                    shape = tuple(child.weight.shape)
                    if shape not in chosen:
                        if name.endswith("per shape"):  # fewest rows whose blocks are invariant on probes with denormals
                            ok = lambda l: "x" not in probe(l, shape[1], 0.3) + probe(l, shape[1], 0)
                            chosen[shape] = 1 if ok(child) else next((B for B in (16, 32, 64) if ok(Blocked(child, B))), 64)
                        else:
                            chosen[shape] = int(name.split()[-1])
                    if chosen[shape] > 1:
                        setattr(mod, cn, Blocked(child, chosen[shape]))
        print(name, "rows by shape", chosen, flush=True)
    return HFRunner(m)

def first_difference(runner, cached=1000, n=65):
    """Which Linear first gives a row of an n-row pass other bits than the one-token pass, and were its inputs equal?"""
    names = [nm for nm, mod in runner.model.named_modules() if nm.endswith("proj") or nm == "lm_head"]
    rec = {}
    def hook(nm):
        def f(mod, inp, out):
            rec.setdefault(nm, []).append((inp[0].detach().reshape(-1, inp[0].shape[-1]).clone(), out.detach().reshape(-1, out.shape[-1]).clone()))
        return f
    mods = dict(runner.model.named_modules())
    hs = [mods[nm].register_forward_hook(hook(nm)) for nm in names]
    tokens = [(i * 7919 + 11) % runner.vocab_size for i in range(cached + n)]
    runner.reset(); runner.prefill(tokens[:cached]); rec.clear()
    for t in tokens[cached:]: runner.forward([t])
    one = {nm: (torch.cat([a for a, _ in v]), torch.cat([b for _, b in v])) for nm, v in rec.items()}
    runner.rollback(cached); rec.clear(); runner.forward(tokens[cached:])
    for h in hs: h.remove()
    runner.reset()
    for nm in names:
        (ia, oa), (ib, ob) = one[nm], rec[nm][0]
        if not torch.equal(oa, ob):
            rows = (oa != ob).any(-1).nonzero().flatten().tolist()
            return f"{nm}: inputs equal {torch.equal(ia, ib)}, rows differing {rows[:8]}{'...' if len(rows) > 8 else ''}"
    return "no Linear differs"

runners = {}
for name in tuple(sys.argv[3].split(",")) if len(sys.argv) > 3 else ("bf16 current", "bf16 packed (not exact)", "bf16 blocked per shape", "bf16 blocked 64"):
    t = time.perf_counter(); r = build(name)
    inv = check_row_invariance(r)
    wide = row_invariance(r, [(i * 7919 + 11) % r.vocab_size for i in range(100 + 129)], (3, 9, 24, 48, 64, 100, 129)) if name.startswith(("bf16 blocked", "bf16 new")) else None
    kinds = sorted({type(x).__name__ + (f"({type(x.linear).__name__},{getattr(x, 'min_rows', getattr(x, 'rows', ''))})" if hasattr(x, "linear") else "")
                    for nm, x in r.model.named_modules() if nm.endswith("proj") or nm == "lm_head"})
    where = first_difference(r) if inv != 0.0 else ""
    print(f"{name}: load+check {time.perf_counter() - t:.0f} s, check {inv}, wider sizes after 100: {wide}, layers {kinds} {where}", flush=True)
    runners[name] = r

rng = random.Random(0)
ctx = [rng.randrange(150000) for _ in range(800)]
for r in runners.values(): r.reset(); r.prefill(ctx)
res = {(name, n): [] for name in runners for n in (1, 32, 65)}
for _ in range(3):
    for name, r in runners.items():
        for n, reps in ((1, 5), (32, 2), (65, 1)):
            for _ in range(reps):
                toks = [rng.randrange(150000) for _ in range(n)]
                t = time.perf_counter(); r.forward(toks); res[(name, n)].append(time.perf_counter() - t); r.rollback(800)
for name in runners:
    print(f"{name:26s} after 800 cached: 1 token {statistics.median(res[(name, 1)])*1e3:6.1f} ms   32 tokens {statistics.median(res[(name, 32)])*1e3:6.1f} ms   65 tokens {statistics.median(res[(name, 65)])*1e3:6.1f} ms", flush=True)
for name, r in runners.items():
    t = time.perf_counter(); r.reset(); r.prefill(ctx); print(f"{name:26s} prefill 800: {time.perf_counter() - t:.2f} s", flush=True)
