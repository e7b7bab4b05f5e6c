"""random_weights.py and replay_on_weights.py (in AMX_KIT, the AMX checks' folder), which time the real model's work on
a machine its weights cannot reach: a folder of the same configuration and tokenizer with other weights, and a runner
whose passes run on a model and whose logits are a script's, so that the engine does what it would do with the real
model."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from conftest import AMX_KIT, VOCAB, load_script, tiny_model
from quickdraft.core import Stats
from quickdraft.drafters.prediction import PredictionDrafter
from quickdraft.engine import Limits, generate
from quickdraft.runners.hf import HFRunner

def test_random_weights_keep_the_configuration_and_tokenizer_and_change_the_weights(tiny_folder, tmp_path):
    from safetensors.torch import load_file
    from transformers import AutoConfig, AutoTokenizer

    out = load_script("random_weights", AMX_KIT).make(tiny_folder, tmp_path / "random", torch.float32, seed=1)
    ignored = {"dtype": None, "_name_or_path": None}
    assert AutoConfig.from_pretrained(out).to_dict() | ignored == AutoConfig.from_pretrained(tiny_folder).to_dict() | ignored
    text = "parse the line, (then) count"
    assert AutoTokenizer.from_pretrained(out).encode(text) == AutoTokenizer.from_pretrained(tiny_folder).encode(text)
    for name in ("generation_config.json", "tokenizer_config.json"):
        if (tiny_folder / name).is_file():
            assert json.loads((out / name).read_text()) == json.loads((tiny_folder / name).read_text())
    ours, theirs = load_file(next(out.glob("*.safetensors"))), load_file(next(tiny_folder.glob("*.safetensors")))
    assert ours.keys() == theirs.keys() and all(ours[k].shape == theirs[k].shape for k in ours)
    assert any(not torch.equal(ours[k].float(), theirs[k].float()) for k in ours if ours[k].numel() > 1)


def test_a_shadow_scripted_runner_writes_the_script_and_runs_every_pass_on_the_model():
    replay = load_script("replay_on_weights", AMX_KIT)
    model = HFRunner(tiny_model("qwen2-fp32"))
    calls = []
    forward, forward_tree = model.forward, model.forward_tree
    model.forward = lambda tokens: calls.append(("linear", len(tokens))) or forward(tokens)
    model.forward_tree = lambda tokens, parents: calls.append(("tree", len(tokens))) or forward_tree(tokens, parents)
    prompt = [(i * 7 + 3) % VOCAB for i in range(30)]
    want = [(i * 5 + 1) % VOCAB for i in range(25)]  # not what the model would write: the script decides
    runner = replay.ShadowScriptedRunner(model, want, eos=VOCAB - 1)
    plain = [t for s in generate(runner, prompt, Limits(25)) for t in s.tokens]
    assert plain == want and calls == [("linear", 1)] * 25 and runner.model_s > 0
    calls.clear()
    stats = Stats()
    prediction = want[:8] + [(want[8] + 1) % VOCAB] + want[9:]
    drafted = [t for s in generate(runner, prompt, Limits(25), PredictionDrafter(prediction), stats=stats)
               for t in s.tokens]
    assert drafted == want and len(calls) == stats.target_passes < 25 and stats.accepted_prediction_tokens > 0
    assert model.length == runner.length  # the model's cache follows the engine's, rollbacks included
    assert model.reuse_prefix is False  # every run prefills its whole prompt, as one command does


# -- random_gguf.py (AMX_KIT): a real GGUF's header with random weights, for timing llama.cpp where weights cannot go --

def _tiny_gguf(path: Path) -> Path:
    """A GGUF with one tensor of every block type random_gguf knows, real-looking names and a tokenizer field."""
    import numpy as np
    from gguf import GGMLQuantizationType, GGUFWriter
    from gguf.constants import GGML_QUANT_SIZES

    writer = GGUFWriter(path, "llama")
    writer.add_block_count(1)
    writer.add_token_list(["a", "b", "c"])
    rng = np.random.default_rng(3)
    for kind in ("Q8_0", "Q5_0", "Q5_1", "Q4_0", "Q4_1", "Q4_K", "Q5_K", "Q6_K"):
        qtype = GGMLQuantizationType[kind]
        block_values, block_bytes = GGML_QUANT_SIZES[qtype]
        rows, cols = 2, 2 * 256  # 256: a whole block of every type
        data = rng.integers(0, 256, (rows, cols // block_values * block_bytes), dtype=np.uint8)
        writer.add_tensor(f"blk.0.{kind.lower()}.weight", data, raw_dtype=qtype)  # [rows, bytes]
    writer.add_tensor("blk.0.attn_norm.weight", rng.normal(size=64).astype(np.float32))
    writer.add_tensor("blk.0.attn_q.bias", rng.normal(size=64).astype(np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_random_gguf_keeps_the_header_and_every_tensor_and_writes_sane_random_weights(tmp_path):
    import numpy as np
    from gguf import GGUFReader

    rg = load_script("random_gguf", AMX_KIT)
    source = _tiny_gguf(tmp_path / "tiny.gguf")
    size = rg.header(source, tmp_path / "tiny.head.xz")
    assert size == source.stat().st_size
    out = rg.build(tmp_path / "tiny.head.xz", tmp_path / "random.gguf", seed=1)
    assert out.stat().st_size == size
    theirs, ours = GGUFReader(source), GGUFReader(out)
    assert source.read_bytes()[:theirs.data_offset] == out.read_bytes()[:ours.data_offset]  # the header, byte for byte
    assert [(t.name, t.tensor_type, list(t.shape), t.data_offset) for t in ours.tensors] == \
        [(t.name, t.tensor_type, list(t.shape), t.data_offset) for t in theirs.tensors]
    for mine, real in zip(ours.tensors, theirs.tensors):
        kind = mine.tensor_type.name
        assert not np.array_equal(np.asarray(mine.data), np.asarray(real.data)), mine.name
        if kind == "F32":
            values = np.asarray(mine.data)
            assert (values == 1.0).all() if "norm" in mine.name else abs(values.std() - 0.02) < 0.01
            continue
        block, scales = rg.SCALES[kind]
        blocks = np.asarray(mine.data).view(np.uint8).reshape(-1, block)
        for offset, value in scales:  # every block's fp16 scale set, none inf or NaN
            found = blocks[:, offset:offset + 2].copy().view(np.float16).ravel()
            assert (found == np.float16(value)).all(), (mine.name, offset)
        assert len(np.unique(blocks)) > 100  # the rest random


def test_random_gguf_refuses_a_type_it_does_not_know(tmp_path):
    import numpy as np
    import pytest
    from gguf import GGMLQuantizationType, GGUFWriter

    path = tmp_path / "iq.gguf"
    writer = GGUFWriter(path, "llama")
    writer.add_tensor("blk.0.attn_q.weight", np.zeros((2, 256), np.float16), raw_dtype=GGMLQuantizationType.F16)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    rg = load_script("random_gguf", AMX_KIT)
    rg.header(path, tmp_path / "iq.head.xz")
    with pytest.raises(SystemExit, match="blk.0.attn_q.weight: type F16"):
        rg.build(tmp_path / "iq.head.xz", tmp_path / "out.gguf")
