"""Every drafter and policy gives exactly the token ids of plain greedy decoding.

Ground truth is transformers' own `generate(do_sample=False)` on the same tiny model. Drafts are
built from that truth: always right, always wrong, partly right (insertions, deletions and
replacements at the start, middle and end), and random.
"""

from __future__ import annotations

import random

import pytest
import torch

from conftest import VOCAB, bf16_or_skip, check_invariants, needs_sliding_rollback, reference_greedy, tiny_model
from quickdraft.core import Draft, Stats
from quickdraft.drafters.base import FirstOf, NoDrafter
from quickdraft.drafters.lookup import LookupConfig, PromptLookupDrafter
from quickdraft.drafters.prediction import POLICIES, PredictionConfig, PredictionDrafter
from quickdraft.engine import Limits, generate
from quickdraft.runners.hf import HFRunner
from quickdraft.sizing import DraftSizer
from quickdraft.stopping import StopStrings

N = 48


def run(model, prompt, drafter=None, n=N, eos=(), stop_check=None, stats=None):
    """Output tokens and steps of one engine run; every run's accounting is checked too."""
    runner = HFRunner(model)
    stats = Stats() if stats is None else stats
    steps = list(generate(runner, prompt, Limits(n, frozenset(eos)), drafter, stop_check, stats))
    out = [t for s in steps for t in s.tokens]
    check_invariants(stats, steps, out)
    return out, steps


def prompt_of(length: int, seed: int = 0) -> list[int]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, VOCAB, (length,), generator=g).tolist()


def edit(seq: list[int], kind: str, where: str, size: int = 3) -> list[int]:
    """The sequence with `size` tokens inserted, deleted or replaced at its start, middle or end."""
    at = {"start": 0, "middle": len(seq) // 2, "end": len(seq) - size}[where]
    junk = [(t + 17) % VOCAB for t in seq[at : at + size]]
    if kind == "insert":
        return seq[:at] + junk + seq[at:]
    if kind == "delete":
        return seq[:at] + seq[at + size :]
    return seq[:at] + junk + seq[at + size :]


@pytest.mark.parametrize("prompt_len", [1, 7, 3000])
def test_plain_engine_matches_transformers(tiny, prompt_len):
    prompt = prompt_of(prompt_len)
    out, steps = run(tiny, prompt, NoDrafter())
    assert out == reference_greedy(tiny, prompt, N)
    assert len(steps) == N


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("prompt_len", [1, 7, 3000])
def test_prediction_always_right(tiny, policy, prompt_len):
    prompt = prompt_of(prompt_len)
    ref = reference_greedy(tiny, prompt, N)
    stats = Stats()
    out, steps = run(tiny, prompt, PredictionDrafter(ref, PredictionConfig.for_policy(policy)), stats=stats)
    assert out == ref
    assert stats.rejected_prediction_tokens == 0
    assert len(steps) < N // 4  # the drafts did real work


@pytest.mark.parametrize("policy", POLICIES)
def test_prediction_always_wrong(tiny, policy):
    prompt = prompt_of(7)
    ref = reference_greedy(tiny, prompt, N)
    unused = [t for t in range(VOCAB) if t not in ref]
    wrong = [unused[i % len(unused)] for i in range(len(ref))]  # no token of it is ever right
    stats = Stats()
    out, _ = run(tiny, prompt, PredictionDrafter(wrong, PredictionConfig.for_policy(policy)), stats=stats)
    assert out == ref
    assert stats.accepted_prediction_tokens == 0 and stats.rejected_prediction_tokens > 0


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("kind", ["insert", "delete", "replace"])
@pytest.mark.parametrize("where", ["start", "middle", "end"])
def test_prediction_partly_right(tiny, policy, kind, where):
    prompt = prompt_of(7, seed=3)
    ref = reference_greedy(tiny, prompt, N)
    pred = edit(ref, kind, where)
    stats = Stats()
    out, steps = run(tiny, prompt, PredictionDrafter(pred, PredictionConfig.for_policy(policy)), stats=stats)
    assert out == ref
    assert len(steps) < N  # the drafts did real work
    at = {"start": 0, "middle": N // 2, "end": N - 3}[where]  # where the prediction departs from the output
    pos, after = 0, 0
    for s in steps:
        if pos + len(s.verdict.draft) <= at:  # drafted before the edit: the prediction is the output there
            assert s.verdict.accepted == len(s.verdict.draft)
        after += sum(1 for i, f in enumerate(s.from_draft) if f and pos + i >= at + 3)
        pos += len(s.tokens)
    if policy == "default" and where != "end":  # re-anchors within a few tokens of agreement after the edit
        assert after > 0


def replaced_every(seq: list[int], every: int) -> list[int]:
    """The sequence with one token replaced every `every` tokens (a re-indented or renamed line each time)."""
    return [(t + 17) % VOCAB if i % every == every - 1 else t for i, t in enumerate(seq)]


@pytest.mark.parametrize("sized", [False, True])
def test_prediction_read_as_a_replacement_after_a_run(tiny, sized):
    """After a departure from an anchor that 8 tokens had confirmed, the drafter drafts where a same-length replacement
    leaves it (drafters/prediction.py); sized: with the two-phase cap (sizing.py). Right (every 12th token replaced:
    the replacement is right), wrong (a one-token insertion instead: the guess is not tried or misses), and an EOS
    inside a draft: the output is plain decoding's every time."""
    prompt = prompt_of(7, seed=9)
    ref = reference_greedy(tiny, prompt, N)
    eos = ref[N - 6]
    for pred, eos_ids in ((replaced_every(ref, 12), ()), (edit(ref, "insert", "middle", 1), ()),
                          (edit(replaced_every(ref, 12), "insert", "start", 2), ()), (replaced_every(ref, 12), (eos,))):
        runner, stats = HFRunner(tiny), Stats()
        drafter = PredictionDrafter(pred)
        sizer = DraftSizer() if sized else None
        steps = list(generate(runner, prompt, Limits(N, frozenset(eos_ids)), drafter, stats=stats, sizer=sizer))
        out = [t for s in steps for t in s.tokens]
        check_invariants(stats, steps, out)
        assert out == (ref[: ref.index(eos)] if eos_ids else ref)
        if pred == replaced_every(ref, 12) and not sized:  # never quiet after a replacement: no plain pass
            assert all(s.verdict.draft for s in steps[:-1])


def test_prediction_longer_and_shorter_than_output(tiny):
    prompt = prompt_of(5, seed=4)
    ref = reference_greedy(tiny, prompt, N)
    for pred in (ref[: N // 2], ref + ref, ref[N // 3 :]):
        out, _ = run(tiny, prompt, PredictionDrafter(pred))
        assert out == ref


@pytest.mark.parametrize("prompt_len", [1, 40, 3000])
def test_prompt_lookup(tiny, prompt_len):
    ref_prompt = prompt_of(prompt_len, seed=5)
    # Put the true continuation inside the prompt so lookup has something right to find.
    head = reference_greedy(tiny, ref_prompt, N)
    prompt = ref_prompt + head[: N // 2] + ref_prompt[-3:] if prompt_len > 1 else ref_prompt
    ref = reference_greedy(tiny, prompt, N)
    # growth=0: fixed lengths; num_tokens 2 with growth 3: lengths follow the copy (6, 9, 12, ... up to 40)
    for config in (LookupConfig(), LookupConfig(min_ngram=1), LookupConfig(max_ngram=2, min_ngram=1, num_tokens=5),
                   LookupConfig(max_ngram=1, min_ngram=1, num_tokens=1), LookupConfig(growth=0),
                   LookupConfig(num_tokens=2, growth=3, max_tokens=40)):
        out, _ = run(tiny, prompt, PromptLookupDrafter(config))
        assert out == ref


def test_prediction_then_lookup(tiny):
    prompt = prompt_of(30, seed=6)
    ref = reference_greedy(tiny, prompt, N)
    pred = edit(edit(ref, "replace", "middle", 5), "delete", "start", 2)
    out, _ = run(tiny, prompt, FirstOf([PredictionDrafter(pred), PromptLookupDrafter()]))
    assert out == ref


@pytest.mark.parametrize("arch", ["llama-bf16-fixed", "qwen2-bf16-fixed"])
def test_fixed_row_blocks_give_plain_decodings_tokens(arch):
    """Every Linear in fixed-size row blocks (invariance.FixedRows: how bf16 loads with AMX), on every CPU: plain
    decoding as the reference decodes it (prefill in one product, as the runner prefills), and drafts always right,
    always wrong and partly right, after a short prompt and one of several prefill chunks."""
    model = tiny_model(arch)
    bf16_or_skip(model)
    for prompt in (prompt_of(7, seed=3), prompt_of(1500, seed=3)):
        ref = reference_greedy(model, prompt, N)
        assert run(model, prompt, NoDrafter())[0] == ref
        unused = [t for t in range(VOCAB) if t not in ref]
        for pred in (ref, [unused[i % len(unused)] for i in range(N)], edit(ref, "replace", "middle"),
                     edit(ref, "insert", "start")):
            assert run(model, prompt, PredictionDrafter(pred))[0] == ref
        assert run(model, prompt, PromptLookupDrafter(LookupConfig(min_ngram=1)))[0] == ref


class RandomDrafter:
    """Drafts of random length, right for a random number of tokens, then random."""

    def __init__(self, truth: list[int], prompt_len: int, seed: int):
        self.truth, self.prompt_len, self.rng = truth, prompt_len, random.Random(seed)

    def begin(self, prompt):
        pass

    def propose(self, context, budget):
        done = len(context) - self.prompt_len
        k = min(budget, self.rng.randint(0, 12))
        right = self.rng.randint(0, k)
        toks = self.truth[done : done + right] + [self.rng.randrange(VOCAB) for _ in range(k)]
        return Draft(tuple(toks[:k]), source="random")

    def observe(self, context, verdict):
        pass


@pytest.mark.parametrize("seed", range(4))
def test_random_drafts(tiny, seed):
    prompt = prompt_of(9, seed=seed)
    ref = reference_greedy(tiny, prompt, N)
    out, _ = run(tiny, prompt, RandomDrafter(ref, len(prompt), seed))
    assert out == ref


@pytest.mark.parametrize("policy", POLICIES)
def test_stops_at_eos_inside_a_draft_block(tiny, policy):
    prompt = prompt_of(7, seed=7)
    ref = reference_greedy(tiny, prompt, N)
    eos = ref[N // 2]  # a token that first appears at or before the middle
    cut = ref.index(eos)
    for drafter in (NoDrafter(), PredictionDrafter(ref, PredictionConfig.for_policy(policy)), PromptLookupDrafter()):
        out, steps = run(tiny, prompt, drafter, eos={eos})
        assert out == ref[:cut]
        assert steps[-1].finish_reason == "stop"


def letters(ids) -> str:
    """A decode with tokens of 1 to 3 characters, so that stop strings span token boundaries."""
    return "".join("abcdefghij"[t % 10] * (1 + t % 3) for t in ids)


@pytest.mark.parametrize("policy", POLICIES)
def test_stop_string_spanning_tokens_and_blocks(tiny, policy):
    prompt = prompt_of(7, seed=8)
    ref = reference_greedy(tiny, prompt, N)
    text = letters(ref)
    stop = text[len(text) // 2 - 2 : len(text) // 2 + 2]  # 4 characters, crossing a token boundary
    stop_at = text.index(stop) + len(stop)
    keep = next(i for i in range(1, N + 1) if len(letters(ref[:i])) >= stop_at)
    for drafter in (NoDrafter(), PredictionDrafter(ref, PredictionConfig.for_policy(policy)), PromptLookupDrafter()):
        stats = Stats()
        out, steps = run(tiny, prompt, drafter, stop_check=StopStrings([stop], letters), stats=stats)
        assert out == ref[:keep]
        assert steps[-1].finish_reason == "stop"
        assert stats.completion_tokens == keep
        assert stats.accepted_prediction_tokens + stats.rejected_prediction_tokens == stats.draft_tokens


@pytest.mark.parametrize("policy", POLICIES)
def test_max_new_tokens_is_exact(tiny, policy):
    prompt = prompt_of(4, seed=9)
    ref = reference_greedy(tiny, prompt, N)
    for n in (1, 2, 17):
        out, steps = run(tiny, prompt, PredictionDrafter(ref, PredictionConfig.for_policy(policy)), n=n)
        assert out == ref[:n]
        assert steps[-1].finish_reason == "length"


def test_context_length_stops_generation(tiny):
    prompt = prompt_of(20, seed=10)
    ref = reference_greedy(tiny, prompt, N)
    runner = HFRunner(tiny, max_context=30)
    steps = list(generate(runner, prompt, Limits(N), PredictionDrafter(ref)))
    out = [t for s in steps for t in s.tokens]
    assert out == ref[:10]
    assert steps[-1].finish_reason == "length"


@needs_sliding_rollback
@pytest.mark.parametrize("prompt_len", [5, 40])
def test_sliding_window_model_rolls_back_exactly(prompt_len):
    # Gemma-3 layout: a 16-token sliding window, so drafts are verified and cut back past the window.
    model = tiny_model("gemma3")
    prompt = prompt_of(prompt_len, seed=11)
    ref = reference_greedy(model, prompt, N)
    assert run(model, prompt, NoDrafter())[0] == ref
    for pred in (ref, edit(ref, "replace", "middle", 4), edit(ref, "insert", "start", 2)):
        assert run(model, prompt, PredictionDrafter(pred))[0] == ref
    assert run(model, prompt, RandomDrafter(ref, len(prompt), seed=1))[0] == ref


def test_sliding_window_models_are_refused_where_transformers_cannot_roll_them_back(monkeypatch):
    """transformers before 5.18 gives a past-recording sliding-window layer more keys than its mask in a second pass
    without a crop: refused at the runner, before any work, saying which version to install."""
    from quickdraft.errors import UnsupportedModelError

    monkeypatch.setattr("transformers.__version__", "5.17.0")
    with pytest.raises(UnsupportedModelError, match=r"sliding-window.*5\.17\.0.*transformers>=5\.18"):
        HFRunner(tiny_model("gemma3"))
    HFRunner(tiny_model("llama"))  # no sliding window: any version
