"""Linear layers packed for oneDNN (runners.kernels.PackedLinear, use_kernels), float32 and bfloat16: the same
numbers as torch's Linear within float rounding, every layer replaced, and the option checked before any work.

Exactness of every drafter on packed models is covered by the `tiny` fixture's "qwen2-fp32" and "llama-bf16" cases
(test_exactness, test_draft_model, test_trees, ...), whose ground truth is transformers' own greedy
decoding of the same packed model.
"""

from __future__ import annotations

import copy
import warnings

import pytest
import torch

import quickdraft
from conftest import reference_greedy, tiny_model
from quickdraft.cpu import has_native_bf16
from quickdraft.errors import QuickdraftError
from quickdraft.runners.hf import HFRunner
from quickdraft.runners.kernels import PackedLinear, packable, use_kernels

needs_onednn = pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="torch built without oneDNN")


@needs_onednn
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", [(1, 64), (3, 64), (1, 1, 64), (2, 17, 64), (1, 33, 64)])
def test_packed_linear_matches_torch(bias, shape):
    torch.manual_seed(0)
    linear = torch.nn.Linear(64, 80, bias=bias)
    packed = PackedLinear(linear.weight, linear.bias)
    x = torch.randn(*shape)
    with torch.inference_mode():
        got, want = packed(x), linear(x)
    assert got.shape == want.shape == (*shape[:-1], 80)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


@needs_onednn
def test_a_non_contiguous_input_and_a_copy():
    torch.manual_seed(1)
    linear = torch.nn.Linear(32, 16)
    packed = PackedLinear(linear.weight, linear.bias)
    x = torch.randn(32, 5).t()  # [5, 32], not contiguous
    torch.testing.assert_close(packed(x), linear(x), atol=1e-5, rtol=1e-5)
    twin = copy.deepcopy(packed)
    assert twin.weight is not packed.weight and torch.equal(twin(x), packed(x))


@needs_onednn
def test_use_kernels_packs_every_linear_layer_and_keeps_the_logits():
    stock, packed = tiny_model("qwen2"), tiny_model("qwen2")
    assert use_kernels(packed, "onednn") == "onednn"
    assert not any(type(m) is torch.nn.Linear for m in packed.modules())
    n_linear = sum(type(m) is torch.nn.Linear for m in stock.modules())
    assert sum(isinstance(m, PackedLinear) for m in packed.modules()) == n_linear > 0
    ids = torch.tensor([[5, 17, 33, 2, 71, 5, 17]])
    with torch.inference_mode():
        torch.testing.assert_close(packed(ids).logits, stock(ids).logits, atol=1e-4, rtol=1e-4)
    assert HFRunner(packed).kernels == "onednn" and HFRunner(stock).kernels == "torch"
    # and the packed model decodes by itself (transformers' generate on the same modules)
    assert len(reference_greedy(packed, [5, 17, 33], 12)) == 12


def test_torch_kernels_leave_the_model_as_loaded():
    model = tiny_model("llama")
    before = [id(m) for m in model.modules()]
    assert use_kernels(model, "torch") == "torch"
    assert [id(m) for m in model.modules()] == before


def test_auto_picks_onednn_where_torch_has_it():
    model = tiny_model("llama")
    assert use_kernels(model, "auto") == ("onednn" if torch.backends.mkldnn.is_available() else "torch")


def test_auto_leaves_a_model_that_onednn_does_not_run():
    model = tiny_model("llama").to(torch.float16)
    assert use_kernels(model, "auto") == "torch"
    with pytest.raises(QuickdraftError, match="kernels='onednn' needs torch built with oneDNN and a float32 model, "
                                              "or a bfloat16 one.*this model is torch.float16"):
        use_kernels(model, "onednn")


needs_onednn_bf16 = pytest.mark.skipif(not packable(torch.bfloat16), reason="no oneDNN bf16 kernels on this CPU")


@needs_onednn_bf16
@pytest.mark.parametrize("shape", [(1, 64), (3, 64), (2, 17, 64)])
def test_packed_bf16_linear_matches_torch(shape, capsys):
    """bf16 weights packed once: torch's bf16 Linear's numbers (bit for bit on this project's AMD EPYC, where both
    run oneDNN's kernel; within bf16 rounding is what is asserted, CPUs differ), and a bf16 result."""
    torch.manual_seed(0)
    linear = torch.nn.Linear(64, 80).to(torch.bfloat16)
    packed = PackedLinear(linear.weight, linear.bias)
    x = torch.randn(*shape).to(torch.bfloat16)
    with torch.inference_mode():
        got, want = packed(x), linear(x)
    assert got.dtype == torch.bfloat16 and got.shape == want.shape == (*shape[:-1], 80)
    torch.testing.assert_close(got, want, atol=2e-2, rtol=2e-2)
    assert torch.equal(copy.deepcopy(packed)(x), got)
    with capsys.disabled():
        print(f"\n  packed bf16 Linear bit for bit torch's on this machine ({list(shape)}): {torch.equal(got, want)}")


@needs_onednn_bf16
def test_auto_packs_a_bf16_model_and_keeps_its_logits():
    stock, packed = tiny_model("qwen2").to(torch.bfloat16), tiny_model("qwen2").to(torch.bfloat16)
    assert use_kernels(packed, "auto") == "onednn" and HFRunner(packed).kernels == "onednn"
    ids = torch.tensor([[5, 17, 33, 2, 71, 5, 17]])
    with torch.inference_mode():
        torch.testing.assert_close(packed(ids).logits, stock(ids).logits, atol=5e-2, rtol=5e-2)


def test_bad_kernels_are_refused_before_any_work(tmp_path):
    with pytest.raises(ValueError, match="kernels must be one of auto, onednn, torch; got 'mkl'"):
        use_kernels(tiny_model("llama"), "mkl")
    missing = str(tmp_path / "nothing-here")  # never opened: the option is checked first
    with pytest.raises(QuickdraftError, match="kernels must be one of auto, onednn, torch; got 'mkl'"):
        quickdraft.load(missing, kernels="mkl")
    with pytest.raises(QuickdraftError, match="kernels applies to the transformers runner"):
        quickdraft.load(missing, runner="llama.cpp", kernels="onednn")


@needs_onednn
def test_load_packs_the_target_and_an_fp32_draft_but_not_an_int8_one(tiny_folder):
    gen = quickdraft.load(str(tiny_folder), draft_model=str(tiny_folder), dtype="fp32", progress=False)
    # packed, but for shapes torch's own Linear makes row-invariant with fewer padded rows (invariance.choose)
    assert gen.runner.kernels in ("onednn", "onednn+torch") and gen.draft_runner.kernels == "torch"  # int8 stays
    with warnings.catch_warnings(record=True) as caught:  # bf16 where the CPU has it: torch's own bf16 kernels,
        warnings.simplefilter("always")  # unless the load's invariance check refuses them there (then it says so)
        auto = quickdraft.load(str(tiny_folder), progress=False)
    fell_back = any("dtype auto falls back to fp32" in str(w.message) for w in caught)
    bf16 = has_native_bf16() and not fell_back
    assert auto.runner.dtype == ("bf16" if bf16 else "fp32")
    assert auto.runner.kernels in (("onednn", "onednn+torch") if packable(torch.bfloat16 if bf16 else torch.float32)
                                   else ("torch",))
    fp32 = quickdraft.load(str(tiny_folder), draft_model=str(tiny_folder), draft_precision="fp32", progress=False)
    assert fp32.draft_runner.kernels == "onednn"
    stock = quickdraft.load(str(tiny_folder), kernels="torch", progress=False)
    assert stock.runner.kernels == "torch"
    for g in (gen, fp32):  # drafting on packed layers reproduces plain decoding on them
        want = g.generate("abc", chat=False, max_new_tokens=24, drafter="none")
        got = g.generate("abc", chat=False, max_new_tokens=24, drafter="draft-model", draft_sizing="off")
        assert got.token_ids == want.token_ids and got.stats.draft_forwards > 0


@needs_onednn_bf16
def test_a_packed_model_changes_dtype_as_a_model_does():
    """model.float() / .to(bf16) on packed layers (a float32 draft made from a bf16 target, as tests do): the
    weights unpacked, converted and packed again, so the converted model computes what a converted stock one does."""
    stock = tiny_model("qwen2").to(torch.bfloat16)
    packed = copy.deepcopy(stock)
    use_kernels(packed, "onednn")
    ids = torch.tensor([[5, 17, 33, 2, 71]])
    with torch.inference_mode():
        got, want = packed.float()(ids).logits, stock.float()(ids).logits
        assert got.dtype == torch.float32
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
        back = packed.to(torch.bfloat16)(ids).logits
    assert back.dtype == torch.bfloat16


@pytest.mark.parametrize("arch", ["qwen2-bf16", "llama-fp32", "llama-bf16-fixed", "qwen2-onednn"])
def test_as_transformers_loads_it_is_the_stock_model_inside_and_the_runners_after(arch):
    """The bench's transformers baselines (bench/engines.run_transformers): inside, every Linear is torch's own on the
    same weights and the attention transformers' default, so the logits are a stock model's bit for bit; after, the
    layers are the very objects the runner had and compute the bits they computed before."""
    from quickdraft.runners.kernels import FixedRows, RowPadded, as_transformers_loads_it

    stock = tiny_model(arch.partition("-")[0])
    model = tiny_model(arch)
    if "bf16" in arch:
        stock = stock.to(torch.bfloat16)
    layers = {name: m for name, m in model.named_modules()}
    wrapped = [m for m in layers.values() if isinstance(m, (FixedRows, RowPadded, PackedLinear))]
    assert wrapped, "nothing of the runner's in this model: the test would show nothing"
    attention = model.config._attn_implementation
    ids = torch.tensor([[5, 17, 33, 2, 71, 5, 17]])
    with torch.inference_mode():
        before = model(ids).logits
        with as_transformers_loads_it(model):
            assert not any(isinstance(m, (FixedRows, RowPadded, PackedLinear)) for m in model.modules())
            assert model.config._attn_implementation == stock.config._attn_implementation
            assert torch.equal(model(ids).logits, stock(ids).logits)
        after = model(ids).logits
    assert model.config._attn_implementation == attention
    assert all(a is b for a, b in zip((m for _, m in model.named_modules()), layers.values()))
    assert [name for name, _ in model.named_modules()] == list(layers)
    assert torch.equal(after, before)


@needs_onednn
def test_as_transformers_loads_it_restores_the_runners_layers_after_an_error():
    from quickdraft.runners.kernels import as_transformers_loads_it

    model = tiny_model("qwen2-fp32")
    ids = torch.tensor([[3, 1, 4, 1, 5]])
    with torch.inference_mode():
        before = model(ids).logits
        with pytest.raises(RuntimeError, match="mid-run"):
            with as_transformers_loads_it(model):
                raise RuntimeError("mid-run")
        assert torch.equal(model(ids).logits, before)
    assert all(m.weight is not None for m in model.modules() if isinstance(m, PackedLinear))


@needs_onednn
def test_as_transformers_loads_it_ties_the_output_layer_to_the_embedding():
    """A tied output layer gets its own packed copy at load (use_kernels); unpacked it is the embedding again, as in
    the model transformers loads, not a second dense copy."""
    from quickdraft.runners.kernels import as_transformers_loads_it
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                         num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True)).eval()
    use_kernels(model, "onednn")
    assert isinstance(model.lm_head, PackedLinear)
    with as_transformers_loads_it(model):
        assert model.lm_head.weight is model.get_input_embeddings().weight
    assert isinstance(model.lm_head, PackedLinear)
