"""The device option (options.LoadOptions.device, CLI --device) and the engine on a device.

The rules need no GPU: "cuda" where torch sees none is refused before anything loads, "auto" takes the CPU here.
The runs on a device go through the engine as the runner loads a target on a GPU (bf16, every Linear in fixed-size
row blocks: invariance.fixed_rows_here), on the CPU always and on CUDA where torch sees a GPU (reported as not
run where it does not): every drafter and rule gives plain decoding's tokens, and the load's check finds the passes
row-invariant there.
"""

from __future__ import annotations

import os

import pytest
import torch

from conftest import VOCAB, tiny_model
from quickdraft import cli, models, options
from quickdraft.acceptance import Acceptance
from quickdraft.core import Stats
from quickdraft.drafters.base import FirstOf, NoDrafter
from quickdraft.drafters.draft_model import DraftModelConfig, DraftModelDrafter
from quickdraft.drafters.lookup import LookupConfig, PromptLookupDrafter
from quickdraft.drafters.ouroboros import OuroborosConfig, OuroborosDrafter
from quickdraft.drafters.phrase_pool import PhrasePool
from quickdraft.drafters.prediction import PredictionConfig, PredictionDrafter
from quickdraft.engine import Limits, generate
from quickdraft.errors import QuickdraftError
from quickdraft.options import LoadOptions
from quickdraft.runners import attention, gpu_softmax
from quickdraft.runners.hf import HFRunner
from quickdraft.runners.invariance import FIXED_ROWS, fixed_rows_here, make_row_invariant, row_invariance
from quickdraft.runners.kernels import FixedRows, linear_layers, use_kernels
from quickdraft.sampling import SamplingParams

N = 40
GPU = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU here: the CUDA runs are not run")
DEVICES = ["cpu", pytest.param("cuda", marks=GPU)]


# -- the option --------------------------------------------------------------------------------------------------

def test_cuda_without_a_gpu_is_refused_before_anything_loads(monkeypatch, capsys):
    monkeypatch.setattr(options, "cuda_available", lambda: False)
    with pytest.raises(QuickdraftError, match=r"device 'cuda': torch .* sees no CUDA GPU on this machine"):
        LoadOptions(device="cuda")
    monkeypatch.setattr(models, "resolve", lambda *a, **k: pytest.fail("pulled a model for a device it cannot use"))
    assert cli.main(["generate", "--device", "cuda", "hi"]) == 2
    assert "sees no CUDA GPU" in capsys.readouterr().err


@pytest.mark.parametrize("kwargs, message", [
    ({"device": "tpu"}, "device must be one of auto, cpu, cuda; got 'tpu'"),
    ({"device": "cuda", "runner": "llama.cpp"}, "llama.cpp runner runs on the CPU"),
    ({"device": "cuda", "kernels": "onednn"}, "kernels 'onednn' packs weights for the CPU"),
    ({"device": "cuda", "draft_model": "d", "draft_precision": "int8"}, "'int8' .* is a CPU path"),
])
def test_device_rules(monkeypatch, kwargs, message):
    monkeypatch.setattr(options, "cuda_available", lambda: True)  # refused for what was asked, not for the GPU
    with pytest.raises(QuickdraftError, match=message):
        LoadOptions(**kwargs)


def test_auto_takes_a_gpu_where_torch_sees_one_unless_a_cpu_path_is_asked_for(monkeypatch):
    monkeypatch.setattr(options, "cuda_available", lambda: False)
    assert LoadOptions().resolved_device() == "cpu" and LoadOptions().draft_dtype() == "int8"
    monkeypatch.setattr(options, "cuda_available", lambda: True)
    on_gpu = LoadOptions(draft_model="d")
    assert (on_gpu.resolved_device(), on_gpu.target_dtype(), on_gpu.draft_dtype()) == ("cuda", "bf16", "bf16")
    assert LoadOptions(dtype="fp32").target_dtype() == "fp32"  # asked for: kept
    for cpu_path in ({"runner": "llama.cpp"}, {"kernels": "onednn"}, {"draft_model": "d", "draft_precision": "int8"}):
        assert LoadOptions(**cpu_path).resolved_device() == "cpu"
    assert LoadOptions(device="cpu").resolved_device() == "cpu"


def test_the_vllm_engine_refuses_device(capsys):
    assert cli.main(["serve", "--engine", "vllm", "--device", "cpu"]) == 2
    assert "--device" in capsys.readouterr().err


def test_a_gpu_runs_every_linear_in_fixed_row_blocks():
    assert fixed_rows_here(torch.bfloat16, "cuda") == fixed_rows_here(torch.float32, "cuda") == FIXED_ROWS
    assert attention.prefill_here(torch.bfloat16, "cuda") == "sdpa"


# -- the engine on a device ---------------------------------------------------------------------------------------

def on_device(device: str, arch: str = "qwen2", seed: int = 0) -> torch.nn.Module:
    """A tiny model as the runner loads a target on `device` the way it does on a GPU: bf16, the runner's grouped
    attention, torch's Linear on a GPU (packed where oneDNN runs on the CPU), every Linear in FixedRows."""
    model = tiny_model(arch, seed).to(device, torch.bfloat16)
    model.set_attn_implementation(attention.register(attention.NAME))
    use_kernels(model, "auto")
    if device == "cuda":
        make_row_invariant(model)  # fixed_rows_here: FixedRows on a GPU
    else:
        from quickdraft.runners.invariance import fix_rows

        fix_rows(model, FIXED_ROWS)  # what a GPU gets, here on the CPU
    return model



def runner_on(model: torch.nn.Module) -> HFRunner:
    """The runner as it runs on a GPU: its lean pass pads each pass's rows to whole blocks once (LeanPass.pad_rows,
    which HFRunner sets on a GPU), here on the CPU too."""
    runner = HFRunner(model)
    if runner.device.type == "cpu":
        runner.lean.pad_rows = runner.row_block
    assert runner.lean.pad_rows == FIXED_ROWS
    return runner

def run(runner, prompt, drafter=None, n=N, **kw):
    stats = Stats()
    steps = list(generate(runner, prompt, Limits(n), drafter, stats=stats, **kw))
    return [t for s in steps for t in s.tokens], stats


PROMPT = [(i * 37 + 11) % VOCAB for i in range(40)] + [5, 17, 33, 2, 71, 5, 17, 33]


@pytest.mark.parametrize("device", DEVICES)
def test_the_runner_lives_on_its_device_and_hands_logits_to_the_cpu(device):
    model = on_device(device)
    runner = runner_on(model)
    assert runner.device.type == device and runner.row_block == FIXED_ROWS
    assert all(isinstance(parent, FixedRows) for parent, _, _ in linear_layers(model))  # every Linear in blocks
    runner.prefill(PROMPT)
    logits = runner.forward([3, 4, 5])
    assert logits.device.type == "cpu" and logits.dtype == torch.float32 and logits.shape == (3, runner.vocab_size)
    assert runner.cache.layers[0].keys.device.type == device
    runner.keep(len(PROMPT), [0, 2])  # a tree path's rows: indexed on the device
    assert runner.length == len(PROMPT) + 2


@pytest.mark.parametrize("device", DEVICES)
def test_the_benchs_transformers_baseline_runs_a_stock_model_on_the_device(device):
    """bench/engines.run_transformers puts transformers' own layers in place (kernels.as_transformers_loads_it): on the
    device, the model's logits are then a stock model's of the same weights there, and the runner's after."""
    from quickdraft.runners.kernels import as_transformers_loads_it

    model, stock = on_device(device), tiny_model("qwen2").to(device, torch.bfloat16)
    ids = torch.tensor([PROMPT], device=device)
    with torch.inference_mode():
        before = model(ids).logits
        with as_transformers_loads_it(model):
            assert not any(isinstance(m, FixedRows) for m in model.modules())
            assert torch.equal(model(ids).logits, stock(ids).logits)
        assert torch.equal(model(ids).logits, before)
    assert all(isinstance(parent, FixedRows) for parent, _, _ in linear_layers(model))


@pytest.mark.parametrize("device", DEVICES)
def test_passes_are_row_invariant_on_the_device(device):
    runner = runner_on(on_device(device))
    tokens = [(i * 7919 + 11) % runner.vocab_size for i in range(120)]
    assert row_invariance(runner, tokens, (2, 5, 16, 17, 33, 65)) == 0.0


@pytest.mark.parametrize("device", DEVICES)
def test_folded_softmax_gives_a_row_the_same_bits_whatever_masked_keys_follow(device):
    # torch's CUDA softmax changes kernel, and the order of its sums, with the row's length; the fold does not
    torch.manual_seed(0)
    scores = (torch.randn(2, 7, 2000) * 4).to(device)  # [b, rows, keys]: peaked rows, as trained attention has
    widths = (2000, 2048, 2112, 4096, 9216, 9280, 24576, 24640)
    folded = [attention.folded_softmax(torch.nn.functional.pad(scores, (0, w - 2000), value=float("-inf")))
              for w in widths]
    assert all(torch.equal(f[..., :2000], folded[0]) and not f[..., 2000:].any() for f in folded)
    assert torch.allclose(folded[0], torch.softmax(scores, -1), rtol=1e-5, atol=1e-7)
    assert torch.equal(attention.folded_softmax(torch.tensor([[3.0]], device=device)), torch.ones(1, 1, device=device))


def check_gpu_softmax_kernel(device: str) -> None:
    """gpu_softmax's kernel on `device`: a row padded to other widths gets the same bits, in float32 and bf16, and
    the weights are softmax's (folded_softmax's, to rounding)."""
    torch.manual_seed(0)
    scores = (torch.randn(2, 7, 1000) * 4).to(device)  # [b, rows, keys]
    for dtype in (torch.float32, torch.bfloat16):
        x = scores.to(dtype)
        rows = [gpu_softmax._run(torch.nn.functional.pad(x, (0, w - 1000), value=float("-inf")))
                for w in (1024, 1088, 2112, 4160)]
        assert all(r.dtype == dtype and torch.equal(r[..., :1000], rows[0][..., :1000]) and not r[..., 1000:].any()
                   for r in rows)
        folded = attention.folded_softmax(x).to(dtype)
        close = dict(rtol=1e-5, atol=1e-7) if dtype == torch.float32 else dict(rtol=1e-2, atol=1e-3)
        assert torch.allclose(rows[0][..., :1000].float(), folded.float(), **close)


def test_the_gpu_softmax_kernel_under_tritons_interpreter_on_the_cpu():
    import importlib.util
    import subprocess
    import sys
    from pathlib import Path

    if importlib.util.find_spec("triton") is None:
        pytest.skip("Triton is not installed here (not a dependency on a CPU): its interpreter cannot run the kernel")
    here = Path(__file__).parent
    code = f"import sys; sys.path.insert(0, {str(here)!r}); import test_device; test_device.check_gpu_softmax_kernel('cpu')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "TRITON_INTERPRET": "1"})  # read when Triton is imported
    assert done.returncode == 0, done.stderr[-3000:]


@GPU
def test_the_gpu_softmax_kernel_on_cuda():
    if (why := gpu_softmax.unavailable("cuda")) is not None:
        pytest.skip(f"the GPU softmax kernel does not run here, attention folds in torch: {why}")
    check_gpu_softmax_kernel("cuda")


@pytest.mark.parametrize("device, fold", [("cpu", False), ("cpu", True), pytest.param("cuda", True, marks=GPU)])
def test_passes_stay_row_invariant_where_rows_cross_2048_keys(device, fold, monkeypatch):
    monkeypatch.setattr(attention, "folds_here", lambda where: fold)  # on a GPU it folds; here both ways
    runner = runner_on(on_device(device))
    tokens = [(i * 7919 + 11) % runner.vocab_size for i in range(2048 + 40)]  # passes from 1959 cached keys
    assert row_invariance(runner, tokens, (2, 17, 129)) == 0.0


def test_on_a_gpu_the_loads_check_also_runs_passes_past_2048_cached_keys(monkeypatch):
    from types import SimpleNamespace

    from quickdraft.runners import load

    seen = []
    monkeypatch.setattr(load, "row_invariance", lambda runner, tokens, sizes: seen.append(len(tokens)) or 0.0)
    for device, context in (("cpu", 32768), ("cuda", 32768), ("cuda", 2048)):
        load.check_row_invariance(SimpleNamespace(device=torch.device(device), max_context=context, vocab_size=VOCAB))
    longest = max(load.CHECK_SIZES)
    assert seen == [7 + longest, 1000 + longest] * 2 + [2000 + longest] + [7 + longest, 1000 + longest]


@pytest.mark.parametrize("device", DEVICES)
def test_every_drafter_gives_plain_decodings_tokens_on_the_device(device):
    model = on_device(device)
    runner = runner_on(model)
    plain, _ = run(runner, PROMPT, NoDrafter())
    partly = plain[:10] + [(t + 1) % VOCAB for t in plain[10:14]] + plain[14:]
    for name, drafter in {
        "prediction, right": PredictionDrafter(plain, PredictionConfig()),
        "prediction, partly right": PredictionDrafter(partly, PredictionConfig()),
        "prediction, wrong": PredictionDrafter([(t + 3) % VOCAB for t in plain], PredictionConfig()),
        "lookup": PromptLookupDrafter(LookupConfig()),
        "prediction+lookup": FirstOf([PredictionDrafter(partly, PredictionConfig()), PromptLookupDrafter(LookupConfig())]),
        "draft model": DraftModelDrafter(runner_on(on_device(device, seed=1)), VOCAB, SamplingParams(), DraftModelConfig()),
        "ouroboros": OuroborosDrafter(runner_on(model), PhrasePool(OuroborosConfig().pool), OuroborosConfig()),
    }.items():
        out, stats = run(runner, PROMPT, drafter)
        assert out == plain, name
    assert stats.target_passes < N  # the trees did work


@pytest.mark.parametrize("device", DEVICES)
def test_sampled_drafts_give_plain_samplings_tokens_on_the_device(device):
    """Under sampling, prediction and lookup drafts are verified by the target's own draws (acceptance/rejection.
    verify_walk): over a device's logits too, the output is plain sampling's for the same seed."""
    runner = runner_on(on_device(device))
    sampling = SamplingParams(temperature=0.8, top_p=0.9, seed=3)
    plain, _ = run(runner, PROMPT, NoDrafter(), sampling=sampling)
    partly = plain[:10] + [(t + 1) % VOCAB for t in plain[10:14]] + plain[14:]
    for name, drafter in {
        "prediction, right": PredictionDrafter(plain, PredictionConfig()),
        "prediction, partly right": PredictionDrafter(partly, PredictionConfig()),
        "lookup": PromptLookupDrafter(LookupConfig()),
    }.items():
        out, stats = run(runner, PROMPT, drafter, sampling=sampling)
        assert out == plain, name
        # drafts were verified; the predictions' were kept too (the tiny model's sampled text repeats little)
        assert stats.draft_tokens > 0 and (name == "lookup" or stats.accepted_prediction_tokens > 0), name


@pytest.mark.parametrize("device", DEVICES)
def test_sampling_and_mentored_decoding_run_on_the_device(device):
    """Speculative sampling and mentored decoding over logits a device computed: reproducible with a seed, and a
    draft that is the target itself is always accepted under speculative sampling (exactly its distribution)."""
    model = on_device(device)
    runner = runner_on(model)
    sampling = SamplingParams(temperature=0.8, top_k=20, seed=7)
    drafted = lambda: DraftModelDrafter(runner_on(model), VOCAB, sampling, DraftModelConfig())  # noqa: E731
    first, stats = run(runner, PROMPT, drafted(), sampling=sampling)
    again, _ = run(runner, PROMPT, drafted(), sampling=sampling)
    assert first == again and len(first) == N and stats.rejected_prediction_tokens == 0
    mentored, _ = run(runner, PROMPT, drafted(), sampling=sampling, acceptance=Acceptance("mentored", kl_bound=0.1))
    assert len(mentored) == N and all(0 <= t < VOCAB for t in mentored)
