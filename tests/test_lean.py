"""The lean pass (runners/lean.py): decoding and verify passes without transformers' plumbing between the layers give
the model forward's logits bit for bit (targets on the runner's own attention, draft models on SDPA), run where the
layers are ones it reproduces and only while an attention it calls is set, and a load whose lean pass differs from
the model's forward keeps the model's forward."""

from __future__ import annotations

import warnings

import pytest
import torch
from transformers import MistralConfig, MistralForCausalLM, Qwen2Config, Qwen2ForCausalLM

from conftest import VOCAB, bf16_or_skip, tiny_model
from quickdraft.core import Stats
from quickdraft.drafters.prediction import PredictionDrafter
from quickdraft.engine import Limits, generate
from quickdraft.runners import attention, lean, load
from quickdraft.runners.hf import HFRunner
from quickdraft.runners.invariance import FIXED_ROWS, row_invariance
from quickdraft.runners.kernels import FixedRows
from quickdraft.runners.lean import LeanPass, agrees

PARENTS = (-1, 0, 0, 2, 1, -1, 5, 6)  # a tree pass's draft: branches from the root, one forking


def passes(runner, prompt: list[int]) -> list[torch.Tensor]:
    """Logits of a one-token pass, of linear passes of 2-33 tokens (each rolled back) and of a tree pass."""
    runner.reset()
    runner.prefill(prompt)
    length = len(prompt)
    rest = [(t * 31 + 7) % runner.vocab_size for t in range(40)]
    out = [runner.forward(rest[:1])]
    for n in (2, 5, 17, 33):
        runner.rollback(length)
        out.append(runner.forward(rest[:n]))
    runner.rollback(length)
    out.append(runner.forward_tree(rest[: len(PARENTS) + 1], PARENTS))
    runner.reset()
    return out


def draft_int8(arch: str):
    """A draft model as the loader makes one: transformers' own attention (SDPA), Linear layers in int8."""
    from quickdraft.runners.kernels import quantize_for_drafting

    return quantize_for_drafting(tiny_model(arch), "int8")


# targets as the runner loads them (its own attention), then models on SDPA as draft models load (float32, int8)
@pytest.mark.parametrize("arch", ["llama-bf16", "qwen2-bf16", "qwen2-fp32", "llama-bf16-fixed", "llama", "qwen2",
                                  "qwen2-int8"])
@pytest.mark.parametrize("cached", [1, 100, 300])
def test_lean_pass_gives_the_model_forwards_bits(arch, cached):
    model = draft_int8(arch.removesuffix("-int8")) if arch.endswith("-int8") else tiny_model(arch)
    if "-bf16" in arch:
        bf16_or_skip(model)
    assert model.config._attn_implementation in lean.USABLE
    runner = load.lean_checked(HFRunner(model))  # as loaded: keys padded where that keeps the bits
    assert isinstance(runner.lean, LeanPass) and runner.lean.usable()
    prompt = [(i * 13 + 5) % VOCAB for i in range(cached)]
    through_lean = passes(runner, prompt)
    kept, runner.lean = runner.lean, None
    through_model = passes(runner, prompt)
    assert len(through_lean) == len(through_model) == 6
    for a, b in zip(through_lean, through_model):
        assert a.shape == b.shape and torch.equal(a, b)
    assert agrees(runner, kept) and runner.lean is None  # agrees leaves the runner's path as it found it



@pytest.mark.parametrize("arch", ["llama-bf16-fixed", "qwen2-bf16-fixed"])
def test_padded_rows_give_the_same_bits_and_every_linear_whole_blocks(arch):
    """LeanPass.pad_rows, as the runner runs on a GPU (here on the CPU): passes padded once to whole blocks give
    the logits of the model's forward and of the lean pass whose Linears pad their own rows, bit for bit, stay
    row-invariant, and every Linear of a decoding or verify pass gets whole blocks (pads nothing itself)."""
    model = tiny_model(arch)
    bf16_or_skip(model)
    runner = HFRunner(model)
    runner.lean.pad_rows = FIXED_ROWS  # what hf.HFRunner sets on a GPU
    runner = load.lean_checked(runner)
    assert runner.lean.pad_rows == FIXED_ROWS  # kept: the bits stay
    rows = []  # rows each FixedRows layer was handed in blocks (prefill's passes run in one product)
    hooks = [m.register_forward_pre_hook(lambda m, args: rows.append(args[0].shape[:-1].numel()) if m.in_blocks else None)
             for m in model.modules() if isinstance(m, FixedRows)]
    prompt = [(i * 13 + 5) % VOCAB for i in range(100)]
    padded = passes(runner, prompt)
    for hook in hooks:
        hook.remove()
    assert rows and all(r % FIXED_ROWS == 0 for r in rows)
    assert row_invariance(runner, [(i * 7919 + 11) % VOCAB for i in range(150)], (2, 5, 17, 33, 65)) == 0.0
    runner.lean.pad_rows = None
    in_linears = passes(runner, prompt)
    runner.lean = None
    in_model = passes(runner, prompt)
    for a, b, c in zip(padded, in_linears, in_model):
        assert a.shape == b.shape == c.shape and torch.equal(a, b) and torch.equal(a, c)


def test_lean_pass_runs_every_decoding_pass_and_no_prefill(monkeypatch):
    """Every pass of a drafted generation goes through the lean pass, prefill through the model's forward (its own
    attention); the output is plain decoding's on the same runner and transformers' own greedy decoding's."""
    from conftest import reference_greedy

    model = tiny_model("qwen2-fp32")
    runner = HFRunner(model)
    calls = []
    call = LeanPass.__call__
    monkeypatch.setattr(LeanPass, "__call__",
                        lambda self, ids, *a, **k: calls.append(ids.shape[1]) or call(self, ids, *a, **k))
    prompt = [(i * 7 + 3) % VOCAB for i in range(40)]
    stats = Stats()
    plain = [t for s in generate(runner, prompt, Limits(30)) for t in s.tokens]
    assert calls == [1] * 30  # the prompt's last token and every plain step; the prefill of 39 is not among them
    calls.clear()
    prediction = plain[:10] + [(plain[10] + 1) % VOCAB] + plain[11:]
    drafted = [t for s in generate(runner, prompt, Limits(30), PredictionDrafter(prediction), stats=stats)
               for t in s.tokens]
    assert drafted == plain == reference_greedy(model, prompt, 30)
    assert len(calls) == stats.target_passes and max(calls) > 1 and stats.accepted_prediction_tokens > 0


def test_lean_pass_only_for_the_layers_it_reproduces():
    assert LeanPass.for_model(tiny_model("llama")) is not None and LeanPass.for_model(tiny_model("qwen2")) is not None
    eager = tiny_model("llama")
    eager.set_attn_implementation("eager")
    assert not LeanPass(eager).usable()  # an attention it does not call: the model's forward runs
    assert LeanPass.for_model(tiny_model("gemma3")) is None  # other layers (and sliding windows)
    common = dict(vocab_size=VOCAB, hidden_size=48, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2)
    assert LeanPass.for_model(MistralForCausalLM(MistralConfig(**common))) is None  # not in lean.LAYERS
    sliding = Qwen2ForCausalLM(Qwen2Config(**common, use_sliding_window=True, sliding_window=16, max_window_layers=1))
    assert "sliding_attention" in sliding.config.layer_types and LeanPass.for_model(sliding) is None
    assert set(lean.LAYERS) == {"Qwen2DecoderLayer", "LlamaDecoderLayer"}


def test_a_load_whose_lean_pass_differs_keeps_the_models_forward(tiny_folder, monkeypatch):
    """The mutation check: a lean pass that changes one logit in the last row is caught by the load's comparison."""
    monkeypatch.setenv("QUICKDRAFT_CHECK_CACHE", "off")
    assert isinstance(load.exact_runner(tiny_folder, torch.float32).lean, LeanPass)
    call = LeanPass.__call__

    def off_by_a_little(self, ids, *args, **kwargs):
        logits = call(self, ids, *args, **kwargs)  # [1, n, V]
        logits[0, -1, 0] += 1e-3
        return logits

    assert isinstance(load.lean_checked(HFRunner(draft_int8("qwen2"))).lean, LeanPass)  # a draft model's: on SDPA
    monkeypatch.setattr(LeanPass, "__call__", off_by_a_little)
    runner = load.exact_runner(tiny_folder, torch.float32)
    assert runner.lean is None and runner.row_invariant
    assert runner.model.config._attn_implementation == attention.ROWS
    assert load.lean_checked(HFRunner(draft_int8("qwen2"))).lean is None


def test_a_lean_pass_that_fails_on_the_model_warns_and_the_models_forward_runs(monkeypatch):
    """Another transformers whose functions take other arguments: the comparison raises, the load says so and keeps
    the model's forward, and the runner still decodes (plain decoding's tokens)."""
    from conftest import reference_greedy

    def refuse(*args, **kwargs):
        raise TypeError("create_causal_mask() got an unexpected keyword argument 'cache'")

    monkeypatch.setattr(LeanPass, "__call__", refuse)
    model = tiny_model("qwen2-fp32")
    with pytest.warns(UserWarning, match="lean pass does not run this model here .TypeError"):
        runner = load.lean_checked(HFRunner(model))
    assert runner.lean is None and runner.length == 0
    prompt = [(i * 7 + 3) % VOCAB for i in range(20)]
    assert [t for s in generate(runner, prompt, Limits(12)) for t in s.tokens] == reference_greedy(model, prompt, 12)


def test_the_load_pads_keys_where_the_bits_stay_and_not_where_they_change(monkeypatch):
    """lean_checked tries the lean pass with padded keys first, then without; it drops the lean pass only where
    neither gives the model forward's bits."""
    model = tiny_model("qwen2-fp32")
    monkeypatch.setattr(lean, "agrees", lambda runner, lean_pass: not lean_pass.pad_keys)
    runner = load.lean_checked(HFRunner(model))
    assert isinstance(runner.lean, LeanPass) and runner.lean.pad_keys is False
    monkeypatch.setattr(lean, "agrees", lambda runner, lean_pass: lean_pass.pad_keys)
    assert load.lean_checked(HFRunner(model)).lean.pad_keys is True
    monkeypatch.setattr(lean, "agrees", lambda runner, lean_pass: False)
    assert load.lean_checked(HFRunner(model)).lean is None

    def padded_raises(runner, lean_pass):  # e.g. a transformers whose cache layers lack what KeyBuffers use
        if lean_pass.pad_keys:
            raise AttributeError("'DynamicLayer' object has no attribute 'lazy_initialization'")
        return True

    monkeypatch.setattr(lean, "agrees", padded_raises)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the form without padded keys runs: nothing to warn of
        assert load.lean_checked(HFRunner(model)).lean.pad_keys is False


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_padded_keys_get_no_weight(dtype):
    """attention.attend with `count`: rows past the count (any finite numbers) change nothing but rounding; padding
    that is not whole blocks is refused."""
    torch.manual_seed(0)
    for L, spare in ((1, 0), (63, 64), (64, 0), (65, 128), (700, 0), (1030, 64)):  # spare: whole blocks a rollback left
        P = L + (-L) % attention.SOFTMAX_BLOCK + spare
        q = torch.randn(1, 2, 3 * 4, 16, dtype=dtype)  # [b, Hkv, G n, D]
        keys = torch.randn(1, 2, P, 16, dtype=dtype) * 4
        values = torch.randn(1, 2, P, 16, dtype=dtype)
        keys[:, :, L:], values[:, :, L:] = 3e4, -2e4  # large, finite
        mask = torch.zeros(1, 1, 1, 4, L, dtype=dtype)
        mask[..., -1] = torch.finfo(dtype).min  # the last key hidden from every row
        padded = attention.attend(q, keys.transpose(2, 3), values, mask, 0.25, groups=3, count=L)
        exact = attention.attend(q, keys[:, :, :L].transpose(2, 3), values[:, :, :L], mask, 0.25, groups=3)
        assert padded.shape == exact.shape == (1, 2, 12, 16)
        tolerance = 1e-5 if dtype == torch.float32 else 2e-2
        assert torch.allclose(padded.float(), exact.float(), atol=tolerance, rtol=tolerance) and padded.isfinite().all()
    with pytest.raises(ValueError, match="not whole blocks"):
        attention.attend(q, keys[:, :, :-1].transpose(2, 3), values[:, :, :-1], mask, 0.25, groups=3, count=L)


def test_key_buffers_append_in_place_and_never_write_where_another_cache_reads():
    """The cache's keys and values live in buffers of spare rows: a decoding step copies its own rows only, the
    passes read whole SOFTMAX_BLOCKs, a rollback keeps the buffer, and whatever replaced the layer's tensors (a
    prefill, prefix reuse) gets a new buffer: rows another sequence kept are never written."""
    runner = load.lean_checked(HFRunner(tiny_model("qwen2-fp32")))
    runner.lean.pad_keys = True  # the mechanism, whatever the load chose for float32 on this CPU
    runner.prefill_chunk = 32  # prefix reuse keeps whole chunks: the first 64 tokens here
    seen = []
    buffers = runner.lean.key_buffers
    append = buffers.append

    def recording(i, layer, k, v):
        keys, values, count = append(i, layer, k, v)
        seen.append((keys.shape[-2], count))
        return keys, values, count

    prompt = [(i * 7 + 3) % VOCAB for i in range(70)]
    runner.prefill(prompt)
    layer = runner.cache.layers[0]
    with pytest.MonkeyPatch.context() as m:
        m.setattr(buffers, "append", recording)
        runner.forward([5])  # the prefill's rows copied into a new buffer once
        buffer = buffers.buffers[0][0]
        for token in range(6, 30):
            runner.forward([token])
        runner.rollback(80)
        runner.forward([1, 2, 3])
    assert buffers.buffers[0][0] is buffer and layer.keys.data_ptr() == buffer.data_ptr()
    assert runner.length == 83 == layer.keys.shape[-2]
    assert len(seen) == 26 * len(runner.cache.layers)
    assert {padded for padded, _ in seen} == {128}  # 71 to 95, then 83 cached keys: one shape for the products
    assert all(padded - attention.SOFTMAX_BLOCK < count <= padded for padded, count in seen)

    runner.reset()  # keeps this sequence's first two chunks for prefix reuse, in tensors of their own
    kept_cache = runner._kept[0][0]
    kept = [t.clone() for t in (kept_cache.layers[0].keys, kept_cache.layers[0].values)]
    assert kept[0].shape[-2] == 64
    runner.prefill([9] * 50)  # another sequence: nothing to take; its passes append to buffers of its own
    runner.forward([4])
    runner.forward([4, 5, 6])
    assert runner.cache is not kept_cache
    assert torch.equal(kept_cache.layers[0].keys, kept[0]) and torch.equal(kept_cache.layers[0].values, kept[1])
    runner.reset()
    runner.prefill(prompt[:64] + [9] * 6)  # takes the kept rows, then appends its own
    assert runner.cache is kept_cache
    runner.forward([4])
    assert buffers.buffers[0][0].data_ptr() != buffer.data_ptr()
    assert kept_cache.layers[0].keys.data_ptr() == buffers.buffers[0][0].data_ptr()
    assert torch.equal(kept_cache.layers[0].keys[..., :64, :], kept[0])
