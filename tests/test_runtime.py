"""Row invariance on the transformers runner (runners/invariance.py, runners/load.exact_runner), in bf16 and float32:
every row of a pass gets, bit for bit, the numbers a one-token pass gives it, so drafted output is plain
decoding's by construction. The exactness tests of every drafter also run on both as the runner loads them
(conftest's `tiny`: "qwen2-fp32", "llama-bf16", "qwen2-bf16")."""

from __future__ import annotations

import os

import pytest
import torch

from conftest import bf16_or_skip, tiny_model

import quickdraft
from quickdraft.runners import attention
from quickdraft.cpu import has_native_bf16
from quickdraft.errors import UnsupportedModelError
from quickdraft.runners import kernels as kernel_layers
from quickdraft.runners import load
from quickdraft.runners.hf import HFRunner
from quickdraft.runners.invariance import (FIXED_ROWS, PAD_ROWS, choose, make_row_invariant,
                                           pad_where_needed, row_invariance, rows_invariant, rows_needed, unpacked)
from quickdraft.runners.kernels import MIN_ROWS, FixedRows, RowPadded, linear_layers

NARROW_LONG = (896, 4864)  # qwen2.5-coder-0.5b's down projection: the shape bf16 kernels split differently by rows


@pytest.mark.parametrize("kernels", ["torch", "onednn"])
def test_row_padding_restores_invariance_where_the_kernels_lack_it(kernels, capsys):
    """The mutation check at the layer level: without padding this shape's rows differ between pass sizes on
    machines whose kernels split it by rows (this project's AMD EPYC with AVX512_BF16 does, on torch's Linear and
    packed alike), with padding they never do. Where the kernels happen to be invariant, the first half cannot show
    it: printed, not hidden."""
    torch.manual_seed(0)
    layer = torch.nn.Linear(NARROW_LONG[1], NARROW_LONG[0], bias=False).to(torch.bfloat16)
    if kernels == "onednn":
        if not kernel_layers.packable(torch.bfloat16):
            pytest.skip("oneDNN has no bf16 kernels on this CPU: dtype bf16 runs torch's own Linear here")
        layer = kernel_layers.PackedLinear(layer.weight)
    plain_ok = rows_invariant(layer, NARROW_LONG[1], torch.bfloat16)
    rows = rows_needed(layer, NARROW_LONG[1], torch.bfloat16)
    assert rows is not None and (rows == 1) == plain_ok
    assert rows_invariant(RowPadded(layer, rows), NARROW_LONG[1], torch.bfloat16)
    with capsys.disabled():
        print(f"\n  bf16 {NARROW_LONG} Linear ({kernels}) without padding row-invariant on this machine: {plain_ok}; "
              f"padded to {rows} rows")


def test_row_padded_keeps_the_layers_numbers_and_shapes():
    layer = torch.nn.Linear(8, 5).to(torch.bfloat16)
    x = torch.randn(2, 3, 8).to(torch.bfloat16)  # [batch, rows, in]
    out = RowPadded(layer)(x)
    assert out.shape == (2, 3, 5)
    assert torch.equal(out, layer(torch.cat([x.reshape(6, 8), x.new_zeros(MIN_ROWS - 6, 8)]))[:6].reshape(2, 3, 5))
    big = torch.randn(MIN_ROWS + 1, 8).to(torch.bfloat16)
    assert torch.equal(RowPadded(layer)(big), layer(big))


def test_a_padded_output_layer_still_loads():
    """qwen2.5-coder-1.5b's output layer (1536 x 151936) is padded on some CPUs: the runner reads the output
    layer's out_features, which RowPadded must give (it raised AttributeError: a bf16 load failed)."""
    model = tiny_model("qwen2").to(torch.bfloat16)
    head = model.get_output_embeddings()
    model.set_output_embeddings(RowPadded(head))
    runner = HFRunner(model)
    assert runner.vocab_size == head.out_features and model.get_output_embeddings().weight is head.weight
    assert runner.forward([1, 2, 3]).shape == (3, head.out_features)


def test_only_layers_that_need_it_are_padded():
    model = torch.nn.Sequential(torch.nn.Linear(64, 64, bias=False), torch.nn.Linear(64, 64, bias=False)).to(torch.bfloat16)
    before = [type(m) for m in model]
    names = pad_where_needed(model)
    assert all(isinstance(m, RowPadded) == (str(i) in names) for i, m in enumerate(model))
    assert before == [torch.nn.Linear] * 2


class Quirky(torch.nn.Module):
    """A layer whose kernel path changes below `fewest` rows (as oneDNN's float32 products do below 2), or always
    with the row count (fewest None)."""

    def __init__(self, fewest: int | None):
        super().__init__()
        self.fewest, self.weight = fewest, torch.nn.Parameter(torch.randn(6, 8))

    def forward(self, x):  # [rows, in] -> [rows, out]
        rows = x.shape[0]
        quirk = rows < self.fewest if self.fewest else rows
        # each row's sums on their own (a matmul's own path may change with the rows too): only the quirk differs
        return (x[:, None, :] * self.weight).sum(-1) + 1e-3 * quirk


@pytest.mark.parametrize("fewest", [2, 4, 8, MIN_ROWS])
def test_padding_is_to_the_fewest_rows_that_make_a_layer_invariant(fewest):
    layer = Quirky(fewest)
    assert not rows_invariant(layer, 8, torch.float32)
    assert rows_needed(layer, 8, torch.float32) == fewest and rows_invariant(RowPadded(layer, fewest), 8, torch.float32)
    assert rows_needed(torch.nn.Linear(8, 6).to(torch.float64), 8, torch.float64) in (1, *PAD_ROWS)
    assert rows_needed(Quirky(None), 8, torch.float32) is None  # no padding helps: left to the model's check


def test_a_shape_runs_on_the_kernel_that_needs_the_fewest_padded_rows():
    """choose: the layer as it is where invariant, else the alternative kernel where it needs fewer rows (as with AMX,
    where packed bf16 products need 32-64 rows and torch's own need none for most shapes), a tie keeping the layer's
    own kernel, and padding of either only as far as needed."""
    def make(fewest):
        return lambda layer: Quirky(fewest)

    assert choose(Quirky(1), 8, make(None)) is None  # invariant as it is (a quirk below 1 row never shows)
    alternative = choose(Quirky(16), 8, make(2))(Quirky(16))
    assert isinstance(alternative, RowPadded) and alternative.min_rows == 2 and alternative.linear.fewest == 2
    own = choose(Quirky(4), 8, make(4))(Quirky(4))
    assert isinstance(own, RowPadded) and own.min_rows == 4 and own.linear.fewest == 4
    assert choose(Quirky(None), 8, make(1))(Quirky(None)).fewest == 1  # nothing pads the layer: the alternative
    assert choose(Quirky(None), 8, make(None)) is None and choose(Quirky(None), 8, None) is None  # left to the check


def test_fixed_rows_computes_every_pass_in_blocks_of_the_same_product():
    """FixedRows: the layer's numbers and shapes, each row as a one-row pass padded to the block gives it (by
    construction: even for a layer whose every row count takes another path, which no padding helps), and one
    product of the pass's own rows where in_blocks is off (prefill)."""
    torch.manual_seed(0)
    layer = Quirky(None)  # adds 1e-3 x its row count
    assert rows_needed(layer, 8, torch.float32) is None
    fixed = FixedRows(layer, 4)
    assert rows_invariant(fixed, 8, torch.float32)
    x = torch.randn(2, 5, 8)  # [batch, rows, in]: 10 rows, three blocks of 4
    out = fixed(x)
    assert out.shape == (2, 5, 6) and torch.allclose(out, x @ layer.weight.T + 4e-3)
    fixed.in_blocks = False
    assert torch.equal(fixed(x.reshape(10, 8)), layer(x.reshape(10, 8)))  # 1e-3 x 10 rows
    linear = torch.nn.Linear(8, 6)
    assert FixedRows(linear, 4).out_features == 6 and FixedRows(linear, 4).weight is linear.weight


def test_the_cpu_decides_between_fixed_blocks_and_padding(monkeypatch):
    """make_row_invariant: bf16 with AMX, every Linear in FIXED_ROWS-row blocks; bf16 without AMX and float32
    anywhere, padding where needed (the layers that need none stay as they are)."""
    def model(dtype):
        return torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.Linear(32, 64)).to(dtype)

    flags = {"amx": ["avx512f", "avx512_bf16", "amx_tile", "amx_bf16"], "no amx": ["avx512f", "avx512_bf16"]}
    for cpu, fl in flags.items():
        monkeypatch.setattr("quickdraft.cpu.cpu_info", lambda fl=fl: {"model": cpu, "flags": fl})
        for dtype in (torch.bfloat16, torch.float32):
            m = model(dtype)
            names = make_row_invariant(m)
            if cpu == "amx" and dtype == torch.bfloat16:
                assert names == ["0", "1"] and all(isinstance(l, FixedRows) and l.rows == FIXED_ROWS for l in m)
            else:
                assert not any(isinstance(l, FixedRows) for l in m)
                assert all(isinstance(l, RowPadded) == (str(i) in names) for i, l in enumerate(m))


def test_prefill_runs_fixed_rows_layers_in_one_product_and_passes_in_blocks():
    """The runner's prefill turns the blocks off (its rows decide no token; the plain and drafted runs share what
    it leaves), its passes keep them, and an error in prefill leaves them on."""
    model = tiny_model("qwen2-bf16-fixed")
    seen = []
    for layer in model.modules():
        if isinstance(layer, FixedRows):
            layer.register_forward_hook(lambda layer, args, out: seen.append((args[0].shape[-2], layer.in_blocks)))
    runner = HFRunner(model)
    runner.prefill(list(range(40)))
    assert seen and all(blocks is False for _, blocks in seen)
    assert {rows for rows, _ in seen} == {40, 1}  # the output layer: the last row only (logits_to_keep)
    seen.clear()
    runner.forward([1, 2, 3])
    assert seen and all(blocks is True for _, blocks in seen)
    with pytest.raises((IndexError, RuntimeError)):
        runner.prefill([runner.vocab_size + 5])  # an id the embedding does not have
    assert all(layer.in_blocks for layer in model.modules() if isinstance(layer, FixedRows))


@pytest.mark.skipif(not kernel_layers.packable(torch.float32), reason="torch built without oneDNN: no packed layers to unpack")
def test_the_alternative_to_a_packed_layer_is_torchs_own_over_the_same_weight():
    torch.manual_seed(0)
    linear = torch.nn.Linear(64, 32, bias=True)
    back = unpacked(kernel_layers.PackedLinear(linear.weight, linear.bias))
    assert type(back) is torch.nn.Linear and torch.equal(back.weight, linear.weight) and torch.equal(back.bias, linear.bias)
    assert unpacked(linear) is None


def padded_or_skip(runner: HFRunner) -> HFRunner:
    """The runner with the lean pass's padded keys (lean.py, KeyBuffers), as a load turns them on; skips where they
    do not give the model forward's bits on this CPU (the load then runs without them)."""
    load.lean_checked(runner)
    if runner.lean is None or not runner.lean.pad_keys:
        pytest.skip("padded keys change this model's bits on this CPU: loads run without them")
    return runner


@pytest.mark.parametrize("arch", ["llama-bf16", "qwen2-bf16", "qwen2-bf16-torch", "llama-bf16-fixed", "qwen2-bf16-fixed"])
@pytest.mark.parametrize("cached", [1, 100, 300])
@pytest.mark.parametrize("keys", ["as cached", "padded"])
def test_bf16_passes_are_row_invariant_bit_for_bit(arch, cached, keys):
    model = tiny_model(arch)
    bf16_or_skip(model)  # where the CPU's bf16 kernels cannot be made invariant, dtype bf16 is refused (below)
    runner = HFRunner(model) if keys == "as cached" else padded_or_skip(HFRunner(model))
    tokens = [(i * 31 + 7) % runner.vocab_size for i in range(cached + 64)]
    assert row_invariance(runner, tokens, sizes=(2, 3, 5, 8, 16, 17, 33, 64)) == 0.0


def test_bf16_passes_with_padded_keys_are_row_invariant_past_value_block():
    """Past attention.VALUE_BLOCK cached keys the values are summed in blocks; padded to whole SOFTMAX_BLOCKs too."""
    runner = HFRunner(tiny_model("qwen2-bf16"))
    bf16_or_skip(runner.model)
    padded_or_skip(runner)
    tokens = [(i * 31 + 7) % runner.vocab_size for i in range(attention.VALUE_BLOCK - 20 + 65)]
    assert row_invariance(runner, tokens, sizes=(2, 17, 33, 65)) == 0.0


@pytest.mark.parametrize("keys", ["as cached", "padded"])
def test_tree_passes_are_row_invariant_in_bf16(keys):
    """A tree pass (4-D mask) gives each node the numbers a linear pass along its path gives it."""
    model = tiny_model("qwen2-bf16")
    bf16_or_skip(model)
    runner = HFRunner(model) if keys == "as cached" else padded_or_skip(HFRunner(model))
    prompt = [(i * 13 + 5) % runner.vocab_size for i in range(40)]
    runner.prefill(prompt[:-1])  # the engine's invariant: every context token but the last is cached
    draft, parents = [3, 9, 4, 7, 1], (-1, 0, 0, 2, -1)  # two branches from the root, one from the third node
    tree = runner.forward_tree([prompt[-1], *draft], parents)  # [1 + 5, vocab]: root first
    for path in ([0, 1], [0, 2, 3], [4]):
        runner.rollback(len(prompt) - 1)
        linear = runner.forward([prompt[-1], *(draft[i] for i in path)])  # [1 + len(path), vocab]
        assert torch.equal(tree[[0, *(i + 1 for i in path)]], linear), path
    runner.rollback(len(prompt) - 1)


def test_bf16_load_checks_the_property_and_refuses_where_it_fails(tiny_folder, monkeypatch):
    try:
        gen = quickdraft.load(str(tiny_folder), dtype="bf16", progress=False)
    except UnsupportedModelError as e:  # this CPU's bf16 kernels: refused, with the reason (seen loading on an
        assert "not row-invariant" in str(e), e  # AMD EPYC with AVX512_BF16; CPUs differ, so both ways are checked)
        print(f"dtype bf16 refused on this CPU (native bf16: {has_native_bf16()}): {e}")
        return
    assert gen.runner.dtype == "bf16" and gen.runner.row_invariant is True
    assert gen.runner.model.config._attn_implementation == attention.NAME
    plain = gen.generate("abc def", chat=False, drafter="none", max_new_tokens=24)
    drafted = gen.generate("abc def", chat=False, prediction=plain.text[:10] + "zz" + plain.text[12:], max_new_tokens=24)
    assert drafted.token_ids == plain.token_ids and drafted.stats.accepted_prediction_tokens > 0
    monkeypatch.setattr("quickdraft.runners.load.row_invariance", lambda *a, **k: 0.03125)
    with pytest.raises(UnsupportedModelError, match="not row-invariant.*0.03125.*use dtype fp32"):
        load.exact_runner(tiny_folder, torch.bfloat16)
    if has_native_bf16():  # auto would take bf16 here: the refusal makes it fall back to fp32, saying so
        with pytest.warns(UserWarning, match="not row-invariant.*dtype auto falls back to fp32"), \
                pytest.warns(UserWarning, match="fp32 passes are not row-invariant"):  # the check is patched for both
            auto = quickdraft.load(str(tiny_folder), progress=False)
        assert auto.runner.dtype == "fp32"


@pytest.mark.real_model
@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
def test_real_model_is_row_invariant_and_exact(dtype):
    try:
        gen = quickdraft.load("smollm2-135m", dtype=dtype, progress=False)
    except UnsupportedModelError as e:  # bf16 only: float32 has nothing to fall back to and loads (with a warning)
        assert dtype == "bf16" and "not row-invariant" in str(e), e
        print(f"dtype bf16 refused on this CPU (native bf16: {has_native_bf16()}): {e}")
        return
    assert gen.runner.row_invariant is True
    tokens = gen.tokenizer.encode("def fibonacci(n):\n    " * 20)
    assert row_invariance(gen.runner, tokens, sizes=(2, 7, 16, 32)) == 0.0
    prompt = [{"role": "user", "content": "Write a Python function that adds two numbers."}]
    plain = gen.generate(prompt, drafter="none", max_new_tokens=48)
    for prediction in (plain.text, plain.text[:20] + " # changed\n" + plain.text[20:], "nothing alike " * 5):
        assert gen.generate(prompt, prediction=prediction, max_new_tokens=48).token_ids == plain.token_ids


@pytest.mark.parametrize("name", [attention.NAME, attention.ROWS])
@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_the_runners_attention_computes_eager_attention(arch, name):
    """runners/attention.py, grouped and one row at a time: the same attention as transformers' eager one (float32,
    so that only summation order differs), for a linear pass after a cache and for a tree pass with its 4-D mask."""
    eager, grouped = tiny_model(arch), tiny_model(arch)
    eager.set_attn_implementation("eager")
    grouped.set_attn_implementation(attention.register(name))
    assert grouped.config.num_attention_heads > grouped.config.num_key_value_heads  # grouped-query: G > 1
    a, b = HFRunner(eager), HFRunner(grouped)
    prompt = [(i * 17 + 3) % a.vocab_size for i in range(50)]
    for r in (a, b):
        r.prefill(prompt[:-9])
    assert torch.allclose(a.forward(prompt[-9:]), b.forward(prompt[-9:]), atol=1e-5)
    tokens, parents = [prompt[-9], 3, 9, 4, 7, 1], (-1, 0, 0, 2, -1)  # as in test_tree_passes_are_row_invariant_in_bf16
    for r in (a, b):
        r.rollback(len(prompt) - 9)
    assert torch.allclose(a.forward_tree(tokens, parents), b.forward_tree(tokens, parents), atol=1e-5)


def _attention_in_float64(query, key, value, mask, scaling):
    """Attention as the formula writes it, in float64: query [b, H, n, D], key/value [b, Hkv, L, D], additive mask
    [b or 1, 1, n, L] or None -> [b, n, H, D]."""
    G = query.shape[1] // key.shape[1]
    k, v = key.double().repeat_interleave(G, 1), value.double().repeat_interleave(G, 1)  # [b, H, L, D]
    scores = query.double() @ k.transpose(2, 3) * scaling  # [b, H, n, L]
    if mask is not None:
        scores = scores + mask.double()
    return (torch.softmax(scores, -1) @ v).transpose(1, 2)


def _additive(allowed: torch.Tensor, dtype=torch.float32) -> torch.Tensor:
    """[b, n, L] bool -> eager attention's additive mask [b, 1, n, L]."""
    return torch.zeros(allowed.shape, dtype=dtype).masked_fill(~allowed, torch.finfo(dtype).min)[:, None]


@pytest.mark.parametrize("case", ["causal after a cache", "first pass", "sliding window", "batch, padded", "no mask"])
def test_prefill_attention_computes_attention(case):
    """attention.prefill_attention, by blocks of query rows against the keys they may see: the attention the formula
    gives (float64) for every kind of mask a prefill pass gets, over block boundaries (n = 150: two whole blocks of
    PREFILL_BLOCK and a part). Keys no row may see are not read at all: the last 3, masked for every row in the first
    case, hold NaN there."""
    torch.manual_seed(0)
    b, H, Hkv, D, n = 1, 6, 2, 16, 150
    cached = 0 if case == "first pass" else 100
    L = cached + n
    position = torch.arange(cached, L)[:, None]  # [n, 1]
    allowed = (torch.arange(L)[None] <= position)[None]  # [1, n, L]: causal after the cache
    if case == "sliding window":
        allowed = allowed & (torch.arange(L)[None] > position - 40)
    if case == "batch, padded":  # the second sequence's first 7 positions are padding
        b = 2
        allowed = allowed.repeat(2, 1, 1)
        allowed[1, :, :7] = False
    mask = None if case == "no mask" else _additive(allowed)
    query = torch.randn(b, H, n, D)
    key, value = torch.randn(b, Hkv, L, D), torch.randn(b, Hkv, L, D)
    if case == "causal after a cache":  # the last 3 keys masked for every row: never read
        allowed[..., -3:] = False
        mask = _additive(allowed)
        key[:, :, -3:], value[:, :, -3:] = float("nan"), float("nan")
    out, _ = attention.prefill_attention(None, query, key, value, mask, scaling=0.25)
    assert out.shape == (b, n, H, D)
    expected = _attention_in_float64(query, key.nan_to_num(), value.nan_to_num(), mask, 0.25)
    assert torch.allclose(out.double(), expected, atol=1e-5)


def test_prefill_attention_in_bf16_is_eager_attentions_precision_and_repeats_its_bits():
    """In bf16: as close to the formula as transformers' eager attention in bf16 is, and the same bits every time the
    same pass runs (prefix reuse takes a prefill's rows as they were computed)."""
    from transformers.models.llama.modeling_llama import eager_attention_forward

    torch.manual_seed(1)
    n, L = 200, 600
    query, key, value = torch.randn(1, 8, n, 64), torch.randn(1, 2, L, 64), torch.randn(1, 2, L, 64)
    mask = _additive((torch.arange(L)[None] <= torch.arange(L - n, L)[:, None])[None], torch.bfloat16)
    q, k, v = (t.bfloat16() for t in (query, key, value))
    ours, _ = attention.prefill_attention(None, q, k, v, mask, scaling=0.125)
    module = type("Attention", (), {"num_key_value_groups": 4, "training": False})()
    eager, _ = eager_attention_forward(module, q, k, v, mask, scaling=0.125)
    exact = _attention_in_float64(q, k, v, mask, 0.125)
    assert (ours.double() - exact).abs().max() <= 2 * (eager.double() - exact).abs().max()
    assert torch.equal(attention.prefill_attention(None, q.clone(), k.clone(), v.clone(), mask.clone(), scaling=0.125)[0],
                       ours)
    # the runner's prefill says its mask is causal instead of having every layer read it: the same bits
    assert torch.equal(attention.prefill_attention(None, q, k, v, mask, scaling=0.125, causal_prefill=True)[0], ours)


def test_attention_the_runner_does_not_compute_is_refused_at_load(tmp_path):
    """Gemma 2 asks its attention to soft-cap the scores: the runner's attentions (grouped, one row at a time,
    prefill) do not, so they refuse to run it, and the exact runner refuses the model at load, before any work,
    rather than decoding with other attention than the model's."""
    from transformers import Gemma2Config, Gemma2ForCausalLM

    torch.manual_seed(0)
    config = Gemma2Config(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=2, head_dim=8, sliding_window=16)
    assert config.attn_logit_softcapping is not None
    model = Gemma2ForCausalLM(config)
    for name in (attention.NAME, attention.ROWS, attention.PREFILL):
        model.set_attn_implementation(attention.register(name))
        with pytest.raises(UnsupportedModelError, match="Gemma2Attention asks its attention for logit soft-capping"):
            model(input_ids=torch.tensor([[1, 2, 3]]))
    uncapped = Gemma2ForCausalLM(Gemma2Config(**{**config.to_dict(), "attn_logit_softcapping": None}))  # runs
    uncapped.set_attn_implementation(attention.register(attention.NAME))
    with torch.inference_mode():
        assert uncapped(input_ids=torch.tensor([[1, 2, 3]])).logits.shape == (1, 3, 64)
    assert attention.not_computed(model) == ["logit soft-capping (Gemma 2)"] and attention.not_computed(uncapped) == []
    model.save_pretrained(tmp_path)
    for dtype in (torch.float32, torch.bfloat16):
        with pytest.raises(UnsupportedModelError, match="Gemma2ForCausalLM's attention has logit soft-capping"):
            load.exact_runner(tmp_path, dtype)


def test_the_cpu_decides_what_prefill_attention_runs(monkeypatch):
    """attention.prefill_here: the blocks in bf16 on AVX512_BF16 without AMX (where they were measured faster), SDPA
    in float32, with AMX, and without bf16 instructions."""
    flags = {"amx": ["avx512f", "avx512_bf16", "amx_tile", "amx_bf16"], "avx512_bf16": ["avx512f", "avx512_bf16"],
             "avx2": ["avx2", "fma"]}
    for cpu, fl in flags.items():
        monkeypatch.setattr("quickdraft.cpu.cpu_info", lambda fl=fl: {"model": cpu, "flags": fl})
        assert attention.prefill_here(torch.float32) == "sdpa"
        assert attention.prefill_here(torch.bfloat16) == (attention.PREFILL if cpu == "avx512_bf16" else "sdpa")
        assert HFRunner(tiny_model("qwen2-fp32")).prefill_attention == "sdpa"
    assert HFRunner(tiny_model("qwen2")).prefill_attention is None  # a model on its own attention: prefill as loaded


def test_bf16_prefill_runs_its_own_attention_and_decoding_stays_exact(monkeypatch):
    """Prefill's logits decide nothing, so the bf16 runner prefills with attention.prefill_attention (fast on long
    prompts; on a CPU like the project's EPYC, as here) and runs every other pass on the row-invariant grouped
    attention: that implementation during prefill only, and drafted output still equals plain decoding on the same
    runner (both start from the same prefilled cache)."""
    from quickdraft.core import Stats
    from quickdraft.drafters.prediction import PredictionDrafter
    from quickdraft.engine import Limits, generate

    model = tiny_model("qwen2-bf16")
    bf16_or_skip(model)
    monkeypatch.setattr("quickdraft.cpu.cpu_info", lambda: {"model": "EPYC", "flags": ["avx512f", "avx512_bf16"]})
    runner = HFRunner(model)
    assert runner.prefill_attention == attention.PREFILL
    seen = []
    hook = model.model.layers[0].input_layernorm.register_forward_pre_hook(  # called by the model and lean.py alike
        lambda m, a: seen.append(model.config._attn_implementation))
    prompt = [(i * 13 + 5) % runner.vocab_size for i in range(300)]
    runner.prefill(prompt)
    runner.forward([3])
    hook.remove()
    assert seen == [attention.PREFILL] + [attention.NAME] and model.config._attn_implementation == attention.NAME
    runner.reset()

    def tokens(drafter):
        return [t for step in generate(runner, prompt, Limits(40), drafter, stats=Stats()) for t in step.tokens]

    plain = tokens(None)
    for prediction in (plain, plain[:10] + [7, 7] + plain[12:], [1, 2, 3] * 10):
        assert tokens(PredictionDrafter(prediction)) == plain


# -- float32: exact by construction (attention one row at a time, layers padded where needed) ------------------


@pytest.mark.parametrize("arch", ["llama-fp32", "qwen2-fp32", "qwen2-fp32-torch"])
@pytest.mark.parametrize("cached", [1, 100, 300])
def test_fp32_passes_are_row_invariant_bit_for_bit(arch, cached):
    runner = HFRunner(tiny_model(arch))
    tokens = [(i * 31 + 7) % runner.vocab_size for i in range(cached + 64)]
    assert row_invariance(runner, tokens, sizes=(2, 3, 5, 8, 16, 17, 33, 64)) == 0.0


def test_tree_passes_are_row_invariant_in_fp32():
    """Tree nodes attend to the cache and their ancestors, gathered in order (rows_attention's other branch)."""
    runner = HFRunner(tiny_model("qwen2-fp32"))
    prompt = [(i * 13 + 5) % runner.vocab_size for i in range(40)]
    runner.prefill(prompt[:-1])
    draft, parents = [3, 9, 4, 7, 1], (-1, 0, 0, 2, -1)
    tree = runner.forward_tree([prompt[-1], *draft], parents)  # [1 + 5, vocab]
    for path in ([0, 1], [0, 2, 3], [4]):
        runner.rollback(len(prompt) - 1)
        linear = runner.forward([prompt[-1], *(draft[i] for i in path)])  # [1 + len(path), vocab]
        assert torch.equal(tree[[0, *(i + 1 for i in path)]], linear), path


def test_fp32_without_the_mechanism_is_not_invariant_here(capsys):
    """The mutation check in float32: the same model with its attention grouped (all rows in one product) or with
    its layers unpadded. The runner as loaded is invariant (above); on this project's AMD EPYC both mutants are not
    (the first at some cache lengths, where the sum over keys is split differently). Where the kernels happen to be
    invariant anyway the mutant cannot show it: printed, not hidden; at least one mutant must differ somewhere on a
    CPU whose float32 products are not row-invariant (all seen so far)."""
    worst = {}
    for mutant in ("grouped attention", "no padding"):
        model = tiny_model("qwen2-fp32")
        if mutant == "grouped attention":
            model.set_attn_implementation(attention.register())
        else:
            for module in list(model.modules()):
                for name, child in list(module.named_children()):
                    if isinstance(child, RowPadded):
                        setattr(module, name, child.linear)
        runner = HFRunner(model)
        worst[mutant] = max(row_invariance(runner, [(i * 31 + 7) % runner.vocab_size for i in range(cached + 64)],
                                           sizes=(2, 5, 17, 33, 64)) for cached in (1, 40, 100, 300))
    with capsys.disabled():
        print(f"\n  fp32 mutants, largest logit difference from one-token decoding on this machine: {worst}")
    assert max(worst.values()) > 0.0


def test_fp32_load_is_checked_and_warns_where_it_fails(tiny_folder, monkeypatch):
    gen = quickdraft.load(str(tiny_folder), dtype="fp32", progress=False)
    assert gen.runner.dtype == "fp32" and gen.runner.row_invariant is True
    assert gen.runner.model.config._attn_implementation == attention.ROWS
    plain = gen.generate("abc def", chat=False, drafter="none", max_new_tokens=24)
    drafted = gen.generate("abc def", chat=False, prediction=plain.text[:10] + "zz" + plain.text[12:], max_new_tokens=24)
    assert drafted.token_ids == plain.token_ids and drafted.stats.accepted_prediction_tokens > 0
    assert drafted.stats.row_invariant is True and plain.stats.as_dict()["row_invariant"] is True  # per request
    monkeypatch.setattr("quickdraft.runners.load.row_invariance", lambda *a, **k: 0.03125)
    with pytest.warns(UserWarning, match="fp32 passes are not row-invariant.*0.03125.*nearly tie"):
        runner = load.exact_runner(tiny_folder, torch.float32)
    assert runner.row_invariant is False  # float32 has nothing to fall back to: loaded, and the reports say so


def test_the_loads_answer_is_kept_for_exactly_the_same_configuration(tiny_folder, tmp_path, monkeypatch, capsys):
    """A second load of the same folder, dtype and kernels takes the first one's answer instead of checking again;
    anything the answer depends on that changes (here: the threads, the weights file, the kernels) checks again."""
    monkeypatch.setenv("QUICKDRAFT_CHECK_CACHE", "on")
    monkeypatch.setenv("QUICKDRAFT_HOME", str(tmp_path / "home"))
    runs = []
    real = load.check_row_invariance
    monkeypatch.setattr(load, "check_row_invariance", lambda runner: runs.append(1) or real(runner))
    first = load.exact_runner(tiny_folder, torch.float32, progress=True)
    assert (len(runs), first.row_invariance_kept, first.row_invariant) == (1, False, True)
    assert "checking that fp32 verify passes" in capsys.readouterr().err  # seconds of work: the user is told
    second = load.exact_runner(tiny_folder, torch.float32, progress=True)
    assert (len(runs), second.row_invariance_kept, second.row_invariant) == (1, True, True)
    assert "checking" not in capsys.readouterr().err
    assert len(list((tmp_path / "home" / "checks").glob("*.json"))) == 1
    load.exact_runner(tiny_folder, torch.float32, kernels="torch")  # other layers: checked
    assert len(runs) == 2
    threads = torch.get_num_threads()
    torch.set_num_threads(1 if threads > 1 else 2)
    try:
        load.exact_runner(tiny_folder, torch.float32)  # other threads: checked
    finally:
        torch.set_num_threads(threads)
    assert len(runs) == 3
    weights = next(tiny_folder.glob("*.safetensors"))
    os.utime(weights, ns=(weights.stat().st_atime_ns, weights.stat().st_mtime_ns + 1_000_000))
    assert not load.exact_runner(tiny_folder, torch.float32).row_invariance_kept  # the weights file changed: checked
    assert len(runs) == 4
    monkeypatch.setenv("QUICKDRAFT_CHECK_CACHE", "off")
    assert not load.exact_runner(tiny_folder, torch.float32).row_invariance_kept and len(runs) == 5
    # a kept refusal is a refusal: bf16 refused once is refused again without checking
    monkeypatch.setenv("QUICKDRAFT_CHECK_CACHE", "on")
    monkeypatch.setattr(load, "check_row_invariance", lambda runner: runs.append(1) or 0.03125)
    checked = []
    for _ in range(2):
        before = len(runs)
        with pytest.raises(UnsupportedModelError, match="0.03125"):
            load.exact_runner(tiny_folder, torch.bfloat16)
        checked.append(len(runs) - before)
    # grouped attention (with the lean pass's padded keys where they keep the bits, then without), then one row at a
    # time, each once; the second load takes every answer kept
    assert checked[0] in (2, 3) and checked[1] == 0


def test_the_layer_probes_are_kept_for_the_same_shapes_and_machine(tiny_folder, tmp_path, monkeypatch):
    """A second load takes each Linear shape's probe answer from the first (probing the output layer runs 129
    one-row products of it) and lays the layers out the same; other threads probe again; the cache off probes
    every time."""
    from quickdraft.runners import invariance

    monkeypatch.setenv("QUICKDRAFT_CHECK_CACHE", "on")
    monkeypatch.setenv("QUICKDRAFT_HOME", str(tmp_path / "home"))
    probed = []
    real = invariance.plan
    monkeypatch.setattr(invariance, "plan", lambda layer, *a: probed.append(tuple(layer.weight.shape)) or real(layer, *a))
    first = load.exact_runner(tiny_folder, torch.float32)
    shapes = {tuple(child.weight.shape) for _, _, child in linear_layers(first.model)}
    assert sorted(probed) == sorted(shapes)  # each distinct shape once
    assert len(list((tmp_path / "home" / "checks" / "probes").glob("*.json"))) == len(shapes)
    second = load.exact_runner(tiny_folder, torch.float32)
    assert len(probed) == len(shapes) and second.row_invariance_kept  # nothing probed again
    assert repr(second.model) == repr(first.model)  # the same layers, padded the same
    threads = torch.get_num_threads()
    torch.set_num_threads(1 if threads > 1 else 2)
    try:
        load.exact_runner(tiny_folder, torch.float32)  # other threads: probed again
    finally:
        torch.set_num_threads(threads)
    assert len(probed) == 2 * len(shapes)
    monkeypatch.setenv("QUICKDRAFT_CHECK_CACHE", "off")
    load.exact_runner(tiny_folder, torch.float32)
    assert len(probed) == 3 * len(shapes)


def test_the_load_checks_and_probes_the_longest_pass_a_prediction_drafts():
    """The load's check and the layer probes reach the longest verify pass the prediction drafter makes (the last
    token and a draft of max_draft), and prompt lookup's: a longer draft would run pass sizes no one checked."""
    from quickdraft.drafters.prediction import PredictionConfig
    from quickdraft.runners.invariance import PROBE_ROWS
    from quickdraft.runners.load import CHECK_SIZES

    longest = max(PredictionConfig.for_policy(p).max_draft for p in ("default", "openai")) + 1
    assert max(CHECK_SIZES) >= longest and max(PROBE_ROWS) >= longest
    # prompt lookup's longest draft, by default and as the server lets a request set it
    from quickdraft.drafters.lookup import LookupConfig
    from quickdraft.server.schemas import LookupOptions

    lookup = LookupConfig()
    assert max(CHECK_SIZES) >= max(lookup.num_tokens, lookup.max_tokens) + 1
    bounds = {name: max(m.le for m in LookupOptions.model_fields[name].metadata if hasattr(m, "le"))
              for name in ("num_tokens", "single_match_tokens", "max_tokens")}
    assert max(bounds.values()) + 1 <= max(CHECK_SIZES) and max(PROBE_ROWS) >= max(bounds.values()) + 1
