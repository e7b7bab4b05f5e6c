"""scripts/random_weights.py and scripts/replay_on_weights.py, which time the real model's work on a machine its
weights cannot reach: a folder of the same configuration and tokenizer with other weights, and a runner whose passes
run on a model and whose logits are a script's, so that the engine does what it would do with the real model."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import torch

from conftest import VOCAB, tiny_model
from quickdraft.core import Stats
from quickdraft.drafters.prediction import PredictionDrafter
from quickdraft.engine import Limits, generate
from quickdraft.runners.hf import HFRunner

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def script(name: str):
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_random_weights_keep_the_configuration_and_tokenizer_and_change_the_weights(tiny_folder, tmp_path):
    from safetensors.torch import load_file
    from transformers import AutoConfig, AutoTokenizer

    out = script("random_weights").make(tiny_folder, tmp_path / "random", torch.float32, seed=1)
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
    replay = script("replay_on_weights")
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
