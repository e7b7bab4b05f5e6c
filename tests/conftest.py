"""Shared fixtures: tiny randomly initialised transformers models built in-process (no downloads)."""

from __future__ import annotations

import os

import pytest
import torch
import transformers
from tokenizers import Tokenizer as RawTokenizer
from tokenizers import decoders, models, pre_tokenizers
from transformers import (Gemma3ForCausalLM, Gemma3TextConfig, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast,
                          Qwen2Config, Qwen2ForCausalLM)

from quickdraft.runners.base import Runner

VOCAB = 96

# Every load runs the row-invariance check itself (tests patch it); tests/test_runtime.py tests the kept answers
os.environ["QUICKDRAFT_CHECK_CACHE"] = "off"


def _sliding_rollback() -> bool:
    from packaging.version import Version

    from quickdraft.runners.hf import SLIDING_ROLLBACK_FROM

    return Version(transformers.__version__) >= Version(SLIDING_ROLLBACK_FROM)


# tests that run a sliding-window model (tiny_model("gemma3")): the runner refuses those before transformers 5.18
# (runners/hf.py; tested in test_exactness.py)
needs_sliding_rollback = pytest.mark.skipif(not _sliding_rollback(), reason="sliding-window rollback needs transformers>=5.18")


# where the scripts that made a result live: next to it (docs/results/<dir>/), not in scripts/
AMX_KIT = "docs/results/2026-11-26-amx-llama-cpp"  # random_weights, replay_on_weights, random_gguf, amx_check.sh
OUROBOROS_RESULTS = "docs/results/2026-11-24-ouroboros"  # ouroboros_ablation


def load_script(name: str, folder: str = "scripts"):
    """<folder>/<name>.py as a module (the scripts are not a package); folder is relative to the repository."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parents[1] / folder / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tiny_model(arch: str, seed: int = 0):
    """arch: llama, qwen2 or gemma3; "qwen2-onednn": its Linear layers packed (runners.kernels.use_kernels);
    "llama-bf16": in bfloat16 as the runner loads it (grouped eager attention, Linear layers packed for oneDNN where
    torch can, then padded where their shape is not row-invariant: runners/invariance.py); "llama-bf16-torch": the
    same on torch's own bf16 Linear (kernels "torch"); "qwen2-fp32": float32 as the runner loads it (attention one
    row at a time, Linear layers packed, padded where needed: runners/load.exact_runner). With AMX the bf16 ones
    have every Linear in fixed-size row blocks instead, as the runner loads them there; "-fixed" after any of them
    ("llama-bf16-fixed") does that on every CPU (invariance.FixedRows)."""
    arch, _, kernels = arch.partition("-")
    if kernels.startswith(("bf16", "fp32")):
        from quickdraft.runners import attention
        from quickdraft.runners.kernels import use_kernels
        from quickdraft.runners.invariance import FIXED_ROWS, fix_rows, make_row_invariant

        bf16 = kernels.startswith("bf16")
        fixed = kernels.endswith("-fixed")
        model = tiny_model(arch, seed).to(torch.bfloat16 if bf16 else torch.float32)
        model.set_attn_implementation(attention.register(attention.NAME if bf16 else attention.ROWS))
        use_kernels(model, kernels.removesuffix("-fixed").partition("-")[2] or "auto")
        if fixed:
            fix_rows(model, FIXED_ROWS)
        else:
            make_row_invariant(model)
        return model
    if kernels:
        from quickdraft.runners.kernels import use_kernels

        model = tiny_model(arch, seed)
        assert use_kernels(model, kernels) == kernels
        return model
    common = dict(
        vocab_size=VOCAB, hidden_size=48, intermediate_size=96, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=8192,
        initializer_range=0.3,  # sharp logits: varied, content-dependent greedy output
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    if arch == "llama":
        model = LlamaForCausalLM(LlamaConfig(**common))
    elif arch == "qwen2":
        model = Qwen2ForCausalLM(Qwen2Config(**common))
    elif arch == "gemma3":  # sliding-window layers: rollback must work past the window too
        config = Gemma3TextConfig(**common, head_dim=12, sliding_window=16, layer_types=["sliding_attention", "full_attention"])
        model = Gemma3ForCausalLM(config)
    else:
        raise ValueError(arch)
    return model.eval()


@pytest.fixture(scope="session", params=["llama", "qwen2", "qwen2-fp32", "llama-bf16", "qwen2-bf16"])
def tiny(request):
    """Each test on both architectures as transformers builds them, once more in float32 as the runner loads a
    target (packed for oneDNN, attention one row at a time, padded layers), and in bfloat16 as dtype "bf16" loads
    them on this machine (kernels auto: packed where oneDNN runs bf16 here, torch's own Linear elsewhere; until
    2026-11-26 qwen2 ran on torch's own everywhere, which the load's wider check then found not row-invariant on the
    project's AMD EPYC: passes of 48 rows or more can differ there, docs/runtime.md). dtype "bf16" is
    exact only where this CPU's bf16 kernels can be made row-invariant, and refused elsewhere (tested in
    test_runtime.py); there the bf16 runs say so and stop."""
    model = tiny_model(request.param)
    if "-bf16" in request.param:
        bf16_or_skip(model)
    return model


def bf16_or_skip(model) -> None:
    """Skip, saying why, where bf16 passes of this model are not row-invariant on this CPU by the runner's own check
    at load (dtype "bf16" is refused there: runners/load.exact_runner). Seen row-invariant on an AMD EPYC with
    AVX512_BF16."""
    from quickdraft.cpu import describe
    from quickdraft.runners.hf import HFRunner
    from quickdraft.runners.load import check_row_invariance

    worst = check_row_invariance(HFRunner(model))
    if worst != 0.0:
        pytest.skip(f"bf16 kernels of this CPU ({describe()}) are not row-invariant even with eager attention and "
                    f"padded layers (max logit difference {worst:g}): dtype bf16 is refused here")


def reference_greedy(model, prompt: list[int], n: int, prefilled: int | None = None) -> list[int]:
    """Plain greedy decoding by transformers itself: the ground truth for exactness. A model on the runner's own
    attention (grouped, or one row at a time) is decoded as that runner decodes plainly: the prompt but its last token
    prefilled with the runner's prefill attention (attention.prefill_here; runners/hf.py: prefill's logits decide
    nothing), then one token per forward pass; written out here with the model's own forward, not the runner's code.
    prefilled: how many leading tokens were prefilled (default: all but the last); the rest are decoded one per pass
    (a drafter's runner that prefilled only the request's prompt)."""
    from quickdraft.runners import attention

    passes = model.config._attn_implementation
    if passes in (attention.NAME, attention.ROWS):
        return _greedy_after_prefill(model, prompt, n, passes, len(prompt) - 1 if prefilled is None else prefilled)
    ids = torch.tensor([prompt])
    with torch.inference_mode():
        out = model.generate(
            ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=n, min_new_tokens=n,
            eos_token_id=None, pad_token_id=0,
        )
    return out[0, len(prompt):].tolist()


def _greedy_after_prefill(model, prompt: list[int], n: int, passes: str, prefilled: int) -> list[int]:
    import inspect

    from transformers import DynamicCache

    from quickdraft.runners import attention

    cache = DynamicCache(config=model.config)
    kw = {"cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values": cache}
    out = []
    with torch.inference_mode():
        if prefilled:
            from quickdraft.runners.kernels import one_product

            model.set_attn_implementation(attention.prefill_here(model.dtype))
            try:
                with one_product(model):  # FixedRows layers: one product per prefill pass
                    model(input_ids=torch.tensor([prompt[:prefilled]]), use_cache=True, **kw)
            finally:
                model.set_attn_implementation(passes)
        for t in prompt[prefilled:-1]:  # the context after what was prefilled, one token per pass
            model(input_ids=torch.tensor([[t]]), use_cache=True, **kw)
        last = prompt[-1]
        for _ in range(n):
            logits = model(input_ids=torch.tensor([[last]]), use_cache=True, **kw).logits  # [1, 1, V]
            last = int(logits[0, -1].argmax())
            out.append(last)
    return out


class MarkovRunner(Runner):
    """A target whose next-token logits depend on the current token only: logits = table[token]."""

    def __init__(self, table: torch.Tensor):  # [V, V]
        self.table, self.vocab_size, self.max_context = table, table.shape[0], 1 << 20
        self._length = 0

    @property
    def length(self):
        return self._length

    def reset(self):
        self._length = 0

    def prefill(self, tokens):
        self._length += len(tokens)

    def forward(self, tokens):
        self._length += len(tokens)
        return self.table[torch.tensor(list(tokens))]  # [n, V]

    def rollback(self, length):
        self._length = length


class TreeMarkovRunner(MarkovRunner):
    """MarkovRunner with trees: a Markov target's scores depend on the current token only."""

    supports_trees = True

    def forward_tree(self, tokens, parents):
        return self.forward(tokens)

    def keep(self, start, rows):
        self.rollback(start + len(rows))


def chi2_critical(df: int, z: float = 3.719) -> float:
    """Wilson-Hilferty approximation of the chi-square quantile; z = 3.719 is the 1e-4 upper tail."""
    a = 2 / (9 * df)
    return df * (1 - a + z * a**0.5) ** 3


def assert_follows(counts: torch.Tensor, truth: torch.Tensor) -> None:
    """The histogram `counts` was drawn from the distribution `truth` (same shape): nothing outside its
    support, and a chi-square test at significance 1e-4."""
    support = truth.flatten() > 0
    assert counts.flatten()[~support].sum() == 0, "a sequence with zero probability was emitted"
    expected = truth.flatten()[support] * counts.sum()
    stat = float(((counts.flatten()[support] - expected) ** 2 / expected).sum())
    assert stat < chi2_critical(int(support.sum()) - 1), stat


def save_char_model(folder, chars, *, chat_template=None, decoder=False, layers=2, max_positions=512, seed=0,
                    tokenizer=None):
    """Save a tiny random llama with a one-character-per-token tokenizer (token 0 is <eos>) to folder.

    tokenizer: reuse this tokenizer instead of building one from chars.
    """
    if tokenizer is None:
        vocab = {"<eos>": 0, **{ch: i + 1 for i, ch in enumerate(chars)}}
        raw = RawTokenizer(models.WordLevel(vocab, unk_token="<eos>"))
        raw.pre_tokenizer = pre_tokenizers.Split("", "isolated")  # one character per token
        if decoder:
            raw.decoder = decoders.Fuse()
        tokenizer = PreTrainedTokenizerFast(tokenizer_object=raw, eos_token="<eos>")
    if chat_template is not None:
        tokenizer.chat_template = chat_template
    tokenizer.save_pretrained(folder)
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=layers,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=max_positions,
                         initializer_range=0.3, eos_token_id=0, bos_token_id=None)
    LlamaForCausalLM(config).save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_folder(tmp_path_factory):
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)] + [" ", "\n", ".", ",", "(", ")", ":", "="]
    return save_char_model(tmp_path_factory.mktemp("tiny-model"), letters)


def check_invariants(stats, steps, out) -> None:
    """The accounting every run must satisfy, whatever the drafter (engine.Step list, its Stats, its output)."""
    assert stats.accepted_prediction_tokens + stats.rejected_prediction_tokens == stats.draft_tokens
    assert stats.draft_tokens == sum(len(s.verdict.draft) for s in steps)
    assert stats.completion_tokens == len(out)
    assert stats.accepted_prediction_tokens == sum(f for s in steps for f in s.from_draft)
    assert stats.rejected_prediction_tokens == sum(len(s.verdict.draft) - sum(s.from_draft) for s in steps)
    assert stats.target_passes == len(steps)
    for s in steps:
        assert len(s.from_draft) == len(s.tokens)
        # accepted tokens come first in a step, then at most one generated (bonus) token
        assert list(s.from_draft) == [True] * sum(s.from_draft) + [False] * (len(s.tokens) - sum(s.from_draft))
        assert len(s.tokens) - sum(s.from_draft) <= 1
    by = stats.by_source
    assert sum(a for a, _ in by.values()) == stats.accepted_prediction_tokens
    assert sum(r for _, r in by.values()) == stats.rejected_prediction_tokens


SCRIPT_VOCAB, SCRIPT_EOS = 300, 0  # run_scripted's target: tokens below 200 in scripts, 200 and up edit material
SCRIPT_PROMPT = (299,)  # in no script: the scripted target ignores the prompt, prompt lookup finds nothing in it


def run_scripted(script, prediction, policy="default", max_new_tokens=1000, drafter=None):
    """The engine on a ScriptedRunner whose greedy output is `script` then EOS, drafting from `prediction` with
    `policy` (or with `drafter`): (Stats, the Steps, the output tokens)."""
    from quickdraft.core import Stats
    from quickdraft.drafters.prediction import PredictionConfig, PredictionDrafter
    from quickdraft.engine import Limits, generate
    from quickdraft.runners.scripted import ScriptedRunner

    stats = Stats()
    drafter = drafter or PredictionDrafter(prediction, PredictionConfig.for_policy(policy))
    runner = ScriptedRunner(script, SCRIPT_VOCAB, SCRIPT_EOS)
    steps = list(generate(runner, SCRIPT_PROMPT, Limits(max_new_tokens, frozenset({SCRIPT_EOS})), drafter, None, stats))
    return stats, steps, [t for s in steps for t in s.tokens]
