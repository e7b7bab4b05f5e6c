"""The draft-model drafter: exact under greedy decoding whatever the draft model is, its cache kept
in step with the context, lossless under sampling, and refused when its vocabulary differs.

Greedy ground truth is transformers' own generate on the target. Draft models: the target itself
(always right), a int8 copy of it (almost always right), a perturbed copy (partly right), an
unrelated random model, a scripted model that is always wrong, and one with padding rows.
"""

from __future__ import annotations

import copy
import json
import math

import pytest
import torch
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

import quickdraft
from conftest import VOCAB, MarkovRunner, assert_follows, reference_greedy, tiny_model
from test_exactness import N, letters, prompt_of, run
from quickdraft.api import Generator
from quickdraft.core import Stats
from quickdraft.drafters.base import FirstOf
from quickdraft.drafters.draft_model import DraftModelConfig, DraftModelDrafter, check_vocabularies
from quickdraft.drafters.prediction import PredictionDrafter
from quickdraft.engine import Limits, generate
from quickdraft.errors import QuickdraftError, UnsupportedModelError
from quickdraft.runners import ScriptedRunner
from quickdraft.runners.hf import HFRunner
from quickdraft.runners.kernels import quantize_for_drafting
from quickdraft.sampling import SamplingParams, probs_from_logits
from quickdraft.sizing import DraftSizer, PassCosts
from quickdraft.stopping import StopStrings
from quickdraft.tokenizer import ByteTokenizer


def drafter(model_or_runner, config=DraftModelConfig(), sampling=SamplingParams(), vocab=VOCAB):
    runner = model_or_runner if hasattr(model_or_runner, "rollback") else HFRunner(model_or_runner)
    return DraftModelDrafter(runner, vocab, sampling, config)


def perturbed(model, scale: float, seed: int = 3):
    other = copy.deepcopy(model)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in other.parameters():
            p.add_(torch.randn(p.shape, generator=g) * scale * p.std())
    return other


CONFIGS = {"adaptive": DraftModelConfig(), "k=1": DraftModelConfig(k=1), "k=5, no cutoff": DraftModelConfig(k=5, min_confidence=0, min_joint=0)}


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("prompt_len", [1, 7, 300])
def test_target_as_its_own_draft_is_always_right(tiny, config, prompt_len):
    prompt = prompt_of(prompt_len)
    ref = reference_greedy(tiny, prompt, N)
    stats = Stats()
    out, steps = run(tiny, prompt, drafter(tiny, CONFIGS[config]), stats=stats)
    assert out == ref
    assert stats.rejected_prediction_tokens == 0  # a draft cache out of step would propose wrong tokens
    assert stats.draft_forwards >= stats.draft_tokens  # one forward per drafted token at least
    if config != "k=1":
        assert len(steps) <= N // 2  # every pass keeps a draft token (the tiny model doubts its tokens: short drafts)


def test_int8_copy_drafts_exactly(tiny):
    prompt = prompt_of(9, seed=1)
    ref = reference_greedy(tiny, prompt, N)
    stats = Stats()
    int8 = quantize_for_drafting(copy.deepcopy(tiny).float(), "int8")  # a draft is loaded in float32, then int8
    out, _ = run(tiny, prompt, drafter(int8, DraftModelConfig(k=4, min_confidence=0, min_joint=0)), stats=stats)
    assert out == ref
    # it mostly agrees (a bf16 target rounds each layer where its int8 copy does not: less, still mostly)
    factor = 1 if tiny.dtype == torch.bfloat16 else 2
    assert stats.accepted_prediction_tokens > factor * stats.rejected_prediction_tokens


@pytest.mark.parametrize("config", list(CONFIGS))
def test_partly_right_draft_model(tiny, config):
    prompt = prompt_of(7, seed=2)
    ref = reference_greedy(tiny, prompt, N)
    stats = Stats()
    out, _ = run(tiny, prompt, drafter(perturbed(tiny, 0.35), CONFIGS[config]), stats=stats)
    assert out == ref
    assert stats.accepted_prediction_tokens > 0 and stats.rejected_prediction_tokens > 0


@pytest.mark.parametrize("seed", [1, 2])
def test_unrelated_random_draft_model(tiny, seed):
    prompt = prompt_of(7, seed=3)
    ref = reference_greedy(tiny, prompt, N)
    out, _ = run(tiny, prompt, drafter(tiny_model("llama", seed=seed)))
    assert out == ref


def test_always_wrong_draft_model(tiny):
    prompt = prompt_of(7, seed=4)
    ref = reference_greedy(tiny, prompt, N)
    wrong = [t for t in range(VOCAB) if t not in ref][:1] * (len(prompt) + 2 * N)
    stats = Stats()
    out, _ = run(tiny, prompt, drafter(ScriptedRunner(wrong, VOCAB, eos=wrong[0]), DraftModelConfig(min_confidence=0, min_joint=0)),
                 stats=stats)
    assert out == ref
    assert stats.accepted_prediction_tokens == 0 and stats.rejected_prediction_tokens > 0


def test_draft_model_with_padding_rows(tiny):
    # A draft whose logits are wider than the target's (padding rows past the shared vocabulary).
    torch.manual_seed(5)
    wide = LlamaForCausalLM(LlamaConfig(vocab_size=VOCAB + 32, hidden_size=48, intermediate_size=96, num_hidden_layers=2,
                                        num_attention_heads=4, num_key_value_heads=2, initializer_range=0.3)).eval()
    prompt = prompt_of(7, seed=5)
    ref = reference_greedy(tiny, prompt, N)
    d = drafter(wide)
    out, _ = run(tiny, prompt, d)
    assert out == ref
    params = SamplingParams(temperature=1.0, seed=0)
    d = drafter(wide, sampling=params)
    d.begin(prompt)
    draft = d.propose(prompt, 3)
    assert draft.probs.shape == (len(draft), VOCAB)  # the target's width
    assert torch.allclose(draft.probs.sum(-1), torch.ones(len(draft)))


def test_drafts_are_the_draft_models_own_greedy_continuation(tiny):
    """Slow reference: every draft equals what the draft model alone generates from that context, also
    when another drafter (a prediction, first in the chain) proposed the steps in between."""
    draft_model = perturbed(tiny, 0.5)
    prompt = prompt_of(6, seed=6)
    ref = reference_greedy(tiny, prompt, N)
    inner = drafter(draft_model, DraftModelConfig(k=4, min_confidence=0, min_joint=0))
    checked, begun = [], []

    class Checking:
        def begin(self, p):
            begun.append(len(p))
            inner.begin(p)

        def propose(self, context, budget):
            d = inner.propose(context, budget)
            if len(d):  # (its runner prefilled the prompt but its last token, with its prefill attention)
                assert list(d.tokens) == reference_greedy(draft_model, list(context), len(d), prefilled=begun[-1] - 1)
                checked.append(len(d))
            return d

        def observe(self, context, verdict):
            inner.observe(context, verdict)

    prediction = ref[:10] + [(t + 1) % VOCAB for t in ref[10:20]] + ref[20:30]
    out, _ = run(tiny, prompt, FirstOf([PredictionDrafter(prediction), Checking()]))
    assert out == ref
    assert len(checked) >= 3


def test_eos_and_stop_strings_inside_draft_blocks(tiny):
    prompt = prompt_of(7, seed=7)
    ref = reference_greedy(tiny, prompt, N)
    eos = ref[N // 2]
    out, steps = run(tiny, prompt, drafter(tiny), eos={eos})
    assert out == ref[: ref.index(eos)] and steps[-1].finish_reason == "stop"

    text = letters(ref)
    stop = text[len(text) // 2 - 2 : len(text) // 2 + 2]
    keep = next(i for i in range(1, N + 1) if len(letters(ref[:i])) >= text.index(stop) + len(stop))
    out, steps = run(tiny, prompt, drafter(tiny), stop_check=StopStrings([stop], letters))
    assert out == ref[:keep] and steps[-1].finish_reason == "stop"


def test_token_and_context_limits(tiny):
    prompt = prompt_of(20, seed=9)
    ref = reference_greedy(tiny, prompt, N)
    for n in (1, 2, 17):
        out, steps = run(tiny, prompt, drafter(tiny), n=n)
        assert out == ref[:n] and steps[-1].finish_reason == "length"
    steps = list(generate(HFRunner(tiny, max_context=30), prompt, Limits(N), drafter(HFRunner(tiny, max_context=30))))
    assert [t for s in steps for t in s.tokens] == ref[:10] and steps[-1].finish_reason == "length"


def test_a_draft_model_with_a_shorter_context_drafts_where_it_fits_and_stops_there(tiny):
    """A prompt longer than the draft model's context: nothing drafted, plain decoding's tokens; a prompt that fits
    drafts until the draft model's context is full, then the target goes on alone."""
    from quickdraft.drafters.ouroboros import OuroborosConfig, OuroborosDrafter
    from quickdraft.drafters.phrase_pool import PhrasePool

    for prompt_len in (40, 20):
        prompt = prompt_of(prompt_len, seed=11)
        ref = reference_greedy(tiny, prompt, N)
        for d in (drafter(HFRunner(tiny, max_context=30)),
                  OuroborosDrafter(HFRunner(tiny, max_context=30), PhrasePool(), OuroborosConfig())):
            steps = list(generate(HFRunner(tiny), prompt, Limits(N), d))
            assert [t for s in steps for t in s.tokens] == ref, (prompt_len, type(d).__name__)
            drafted = sum(len(s.verdict.draft) for s in steps)
            assert (drafted == 0) == (prompt_len == 40), (prompt_len, drafted)


@pytest.mark.parametrize("ratio", [0.06, 0.3])
@pytest.mark.parametrize("scale", [0.35, 1.0])
def test_drafts_trimmed_by_confidence_keep_the_output_exact(tiny, ratio, scale):
    """Sizing trims each draft to the prefix its confidences say is worth a pass, and pauses the draft
    model after a draft worth nothing: the output is plain greedy decoding's, at the end of the text
    and across an EOS too."""
    prompt = prompt_of(7, seed=2)
    ref = reference_greedy(tiny, prompt, N)
    for eos, want in (((), ref), ({ref[N - 5]}, ref[: ref.index(ref[N - 5])])):
        stats = Stats()
        d = drafter(perturbed(tiny, scale), DraftModelConfig(min_joint=0))
        out = [t for st in generate(HFRunner(tiny), prompt, Limits(N, frozenset(eos)), d, stats=stats,
                                    sizer=DraftSizer(costs=seeded_costs(ratio))) for t in st.tokens]
        assert out == want
        assert stats.draft_forwards > stats.draft_tokens > 0  # some drafts sent, some tokens made and not sent


def test_min_joint_stops_a_draft_the_draft_model_doubts(tiny):
    prompt = prompt_of(7, seed=2)
    lengths = {}
    for min_joint in (0.0, 0.05, 0.5):  # the tiny model rates its tokens about 0.3
        d = drafter(perturbed(tiny, 0.35), DraftModelConfig(k=8, min_confidence=0, min_joint=min_joint))
        drafts = []
        for n in range(3, 8):
            d.begin(prompt[:n])
            drafts.append(d.propose(prompt[:n], 8))
        for draft in drafts:
            assert len(draft.confidence) == len(draft) and all(0 < c <= 1 for c in draft.confidence)
            assert all(math.prod(draft.confidence[:j]) >= min_joint for j in range(2, len(draft) + 1))
        lengths[min_joint] = sum(map(len, drafts))
    assert lengths[0.0] == 5 * 8 and lengths[0.0] > lengths[0.05] > lengths[0.5] >= 5


def test_confidences_are_calibrated_by_the_requests_own_misses(tiny):
    d = drafter(tiny)
    assert d.calibrated(0.9) == pytest.approx(0.9)  # no evidence yet: the draft model's own probability
    d.misses = [0.0, 3.0]  # never missed where it expected 3 misses
    assert d.calibrated(0.9) == pytest.approx(0.975)
    d.misses = [3.0, 0.0]
    assert d.calibrated(0.9) == pytest.approx(0.6) and d.calibrated(0.5) == 0.0

    prompt = prompt_of(7, seed=1)
    right = drafter(tiny, DraftModelConfig(min_joint=0))  # the target itself: always right
    run(tiny, prompt, right)
    assert right.misses[0] == 0 and right.misses[1] > 0 and right.calibrated(0.5) > 0.5
    wrong_tokens = [t for t in range(VOCAB) if t not in reference_greedy(tiny, prompt, N)][:1] * (len(prompt) + 2 * N)
    wrong = drafter(ScriptedRunner(wrong_tokens, VOCAB, eos=wrong_tokens[0]), DraftModelConfig(min_joint=0))
    run(tiny, prompt, wrong)
    assert wrong.misses[0] > 1 + wrong.misses[1] and wrong.calibrated(0.99) < 0.99


def test_adaptive_length_grows_and_shrinks():
    script = list(range(10, 60))
    target = ScriptedRunner(script, 64, eos=0)
    right = drafter(ScriptedRunner(script, 64, eos=0), DraftModelConfig(initial=4, max_length=8, min_confidence=0, min_joint=0), vocab=64)
    steps = list(generate(target, [1, 2], Limits(40), right))
    assert [len(s.verdict.draft) for s in steps[:4]] == [4, 6, 8, 8]  # +2 after each fully accepted draft
    wrong = drafter(ScriptedRunner([63] * 80, 64, eos=0), DraftModelConfig(initial=4, min_confidence=0, min_joint=0), vocab=64)
    steps = list(generate(ScriptedRunner(script, 64, eos=0), [1, 2], Limits(10), wrong))
    assert [len(s.verdict.draft) for s in steps[:5]] == [4, 3, 2, 1, 1]  # -1 after each cut-short draft


# -- sampling ---------------------------------------------------------------------------------------


def test_draft_probs_are_the_processed_draft_distribution(tiny):
    params = SamplingParams(temperature=0.7, top_k=10, seed=1)
    other = tiny_model("qwen2", seed=4)
    d = drafter(other, DraftModelConfig(k=3, min_confidence=0, min_joint=0), params)
    prompt = prompt_of(5, seed=10)
    d.begin(prompt)
    draft = d.propose(prompt, 3)
    ref_runner = HFRunner(other)
    ref_runner.reset()
    logits = ref_runner.forward(prompt + list(draft.tokens[:-1]))[len(prompt) - 1 :]  # [3, V]
    assert torch.allclose(draft.probs, probs_from_logits(logits, params), atol=1e-5)
    assert all(draft.probs[i, t] > 0 for i, t in enumerate(draft.tokens))


def seeded_costs(ratio: float) -> PassCosts:
    """Pass costs 1 + ratio * (n - 1) seconds, weighted so that the test's own microsecond passes do not move them."""
    costs = PassCosts(decay=1.0)
    for _ in range(10_000):
        for n in range(1, 34):  # every size a draft can have: a measured size is not interpolated
            costs.record(n, 1.0 + (n - 1) * ratio)
    return costs


@pytest.mark.parametrize("draft_kind, sized", [("close", False), ("far", False), ("close", True)])
def test_joint_distribution_of_three_tokens_with_a_draft_model(draft_kind, sized):
    """Whole engine, sampled, with a draft model of its own distribution: the first three tokens follow
    the exact joint distribution of plain sampling from the target (chi-square, significance 1e-4).
    sized: drafts trimmed by the draft's confidences (sizing.py), which must not bias the output either."""
    g = torch.Generator().manual_seed(5)
    V = 4
    table = torch.randn(V, V, generator=g) * 1.5  # [V, V] target logits given the current token
    noise = torch.randn(V, V, generator=g) * (0.3 if draft_kind == "close" else 3.0)
    params = SamplingParams(temperature=0.9, top_k=3)
    step = probs_from_logits(table, params)  # [V, V]
    prompt = [0, 1, 2, 3, 1]
    truth = torch.zeros(V, V, V)
    for a in range(V):
        for b in range(V):
            truth[a, b] = step[prompt[-1], a] * step[a, b] * step[b]
    counts = torch.zeros(V, V, V)
    n = 3000
    accepted = trimmed = 0
    costs = seeded_costs(0.7)  # a 1-token draft pays when the draft rates it above 0.7
    for seed in range(n):
        s = SamplingParams(temperature=0.9, top_k=3, seed=seed)
        d = DraftModelDrafter(MarkovRunner(table + noise), V, s, DraftModelConfig(k=3, min_confidence=0, min_joint=0))
        stats = Stats()
        sizer = DraftSizer(costs=costs) if sized else None
        out = [t for st in generate(MarkovRunner(table), prompt, Limits(3), d, stats=stats, sampling=s, sizer=sizer)
               for t in st.tokens]
        counts[out[0], out[1], out[2]] += 1
        accepted += stats.accepted_prediction_tokens
        trimmed += stats.draft_forwards > stats.draft_tokens  # a draft token made and not sent
    assert_follows(counts, truth)
    assert accepted > n // 2  # drafts were really used
    if sized:
        assert n // 100 < trimmed < n - n // 100  # trimming happened (about 4 % of runs here), and not always


def test_a_draft_model_that_stops_after_some_tokens_keeps_plain_sampling_with_the_sizer():
    """Whole engine, sampled, the draft model's own early stop and the sizer together: the draft model goes on
    after drawing 2 first (it is then sure of its next token) and stops after any other first token (below
    min_confidence). Its first token is rated 0.5, worth a pass only with more tokens to come (a pass of 2
    tokens costs 1.65 passes of one, longer ones no more). A trim that read how long the draft was would verify
    the first token exactly when it is 2; the first two emitted tokens must still follow plain sampling (room for 3: a draft of up to 2)."""
    V = 4
    q = torch.tensor([[0.28, 0.26, 0.24, 0.22],  # after 0 or 3: unsure (0.28 < min_confidence 0.3)
                      [0.10, 0.20, 0.50, 0.20],  # after 1 (the prompt's last token): rated 0.5
                      [0.02, 0.95, 0.02, 0.01],  # after 2: sure
                      [0.28, 0.26, 0.24, 0.22]])
    p = torch.tensor([[0.30, 0.30, 0.20, 0.20],
                      [0.40, 0.25, 0.15, 0.20],
                      [0.25, 0.25, 0.25, 0.25],
                      [0.10, 0.20, 0.30, 0.40]])
    costs = PassCosts(decay=1.0)
    for _ in range(10_000):  # weighted so that the test's own microsecond passes do not move them
        for n in range(1, 34):
            costs.record(n, 1.0 if n == 1 else 1.65)
    prompt = [0, 3, 1]
    truth = p[1][:, None] * p  # [V, V]: P(first a, second b)
    counts, verified, n = torch.zeros(V, V), 0, 3000
    for seed in range(n):
        s = SamplingParams(temperature=1.0, seed=seed)
        d = DraftModelDrafter(MarkovRunner(q.log()), V, s, DraftModelConfig(k=3, min_joint=0))
        stats = Stats()
        steps = list(generate(MarkovRunner(p.log()), prompt, Limits(3), d, stats=stats, sampling=s,
                              sizer=DraftSizer(costs=copy.deepcopy(costs))))
        out = [t for st in steps for t in st.tokens]
        counts[out[0], out[1]] += 1
        verified += stats.draft_tokens > 0
    assert_follows(counts, truth)
    assert verified > n // 3  # drafts were sent, so the trim's choice mattered


class TrimOnly(DraftSizer):
    """A sizer that trims sampled drafts but never tells the drafter where it will cut (the drafter drafts on)."""

    def keeps(self, rates):
        return True


def test_a_sampled_draft_stops_where_the_trim_will_cut_it():
    """Under sampling the sizer tells the draft model where its causal trim cuts (DraftSizer.keeps), and the
    draft model stops drafting there: the drafts sent are the ones the trim alone sends (same seed, same first
    pass), made with fewer draft-model forwards. The draft model's own stops are off, so only the trim cuts."""
    g = torch.Generator().manual_seed(8)
    V = 6
    table = torch.randn(V, V, generator=g) * 3.0  # [V, V] target logits given the current token
    draft_table = table + torch.randn(V, V, generator=g) * 0.5  # [V, V]: a draft model, sometimes unsure
    costs = seeded_costs(0.2)
    config = DraftModelConfig(k=8, min_confidence=0, min_joint=0)
    saved = sent = 0
    for seed in range(200):
        first = {}
        for name, sizer_type in (("stops", DraftSizer), ("drafts on", TrimOnly)):
            s = SamplingParams(temperature=1.0, seed=seed)
            d = DraftModelDrafter(MarkovRunner(draft_table), V, s, config)
            step = next(generate(MarkovRunner(table), [0, 1, 2], Limits(9), d, sampling=s,
                                 sizer=sizer_type(costs=copy.deepcopy(costs))))
            first[name] = step.verdict.draft
        assert first["stops"].tokens == first["drafts on"].tokens  # what the trim sends is unchanged
        assert first["stops"].forwards <= first["drafts on"].forwards
        saved += first["drafts on"].forwards - first["stops"].forwards
        sent += len(first["stops"].tokens)
    assert saved > 100 and sent > 100  # forwards were saved, and drafts were still sent


def test_greedy_drafts_are_not_stopped_by_the_trims_causal_rule(tiny):
    """Greedy drafts are trimmed looking ahead (best_length over every confidence), so the engine gives the drafter
    no causal stop there; one left from a sampled request is cleared."""
    d = drafter(perturbed(tiny, 0.3))
    d.keep = lambda rates: False
    list(generate(HFRunner(tiny), prompt_of(5), Limits(4), d, sizer=DraftSizer()))
    assert d.keep is None


@pytest.mark.parametrize("draft_kind, sized", [("close", False), ("far", False), ("close", True)])
def test_sequences_ending_at_eos_follow_plain_sampling_with_a_draft_model(draft_kind, sized):
    """Whole sequences, end of text included: with token 3 as EOS and room for 4 tokens, a sampled run
    with a draft model emits each whole sequence (EOS early, EOS late, or none) with plain sampling's
    probability, so drafting changes neither when a sampled answer ends nor what comes before its end
    (chi-square, significance 1e-4). The draft model proposes EOS too, and tokens past it. EOS itself is
    not emitted: the last step's finish reason says it came. sized: with the drafter's own early stops (its
    defaults) and the sizer's trim and rests, as the engine runs by default."""
    g = torch.Generator().manual_seed(11)
    V, eos, room = 4, 3, 4
    table = torch.randn(V, V, generator=g) * 1.2  # [V, V] target logits given the current token
    table[:, eos] -= 0.5  # an EOS neither certain nor rare: every length has mass
    noise = torch.randn(V, V, generator=g) * (0.3 if draft_kind == "close" else 3.0)
    params = SamplingParams(temperature=1.0)
    step = probs_from_logits(table, params)  # [V, V]
    prompt = [0, 1, 2, 1]

    truth: dict[tuple[int, ...], float] = {}

    def walk(seq: tuple[int, ...], p: float) -> None:
        if (seq and seq[-1] == eos) or len(seq) == room:
            truth[seq] = p
            return
        for t in range(V):
            walk(seq + (t,), p * float(step[seq[-1] if seq else prompt[-1], t]))

    walk((), 1.0)
    index = {seq: i for i, seq in enumerate(truth)}
    counts = torch.zeros(len(index))
    n, accepted = 3000, 0
    costs = seeded_costs(0.7)
    config = DraftModelConfig(k=3) if sized else DraftModelConfig(k=3, min_confidence=0, min_joint=0)
    for seed in range(n):
        s = SamplingParams(temperature=1.0, seed=seed)
        d = DraftModelDrafter(MarkovRunner(table + noise), V, s, config)
        stats = Stats()
        sizer = DraftSizer(costs=costs) if sized else None
        steps = list(generate(MarkovRunner(table), prompt, Limits(room, frozenset({eos})), d, stats=stats, sampling=s,
                              sizer=sizer))
        out = tuple(t for st in steps for t in st.tokens) + ((eos,) if steps[-1].finish_reason == "stop" else ())
        counts[index[out]] += 1  # a sequence outside the tree (a token after EOS) would raise here
        accepted += stats.accepted_prediction_tokens
    assert_follows(counts, torch.tensor(list(truth.values())))
    assert accepted > n // (10 if sized else 4)  # drafts were really used (the sizer cuts many on these costs)


def test_sampled_run_is_reproducible_with_a_seed(tiny):
    prompt = prompt_of(5, seed=12)
    other = perturbed(tiny, 0.3)

    def once(seed):
        s = SamplingParams(temperature=0.8, seed=seed)
        return [t for st in generate(HFRunner(tiny), prompt, Limits(20), drafter(other, sampling=s), sampling=s)
                for t in st.tokens]

    assert once(3) == once(3)
    assert len({tuple(once(s)) for s in range(4)}) > 1


# -- vocabulary check, API and CLI ------------------------------------------------------------------------


def test_check_vocabularies():
    check_vocabularies({"a": 0, "b": 1}, {"a": 0, "b": 1})
    with pytest.raises(UnsupportedModelError, match=r"1 token\(s\) only in 'draft'.*does not share|with different ids"):
        check_vocabularies({"a": 0, "b": 1}, {"a": 0, "b": 2, "c": 1}, "target", "draft")
    with pytest.raises(UnsupportedModelError, match="does not share the tokenizer"):
        check_vocabularies({"a": 0, "b": 1}, {"a": 1, "b": 0})


def test_api_draft_model_drafter():
    tok = ByteTokenizer()
    script = tok.encode("speculative decoding, exactly")
    gen = Generator(ScriptedRunner(script, 257, tok.eos, max_context=128), tok,
                    draft_runner=ScriptedRunner(script, 257, tok.eos, max_context=128))
    r = gen.generate("hi")  # auto: the draft model when there is no prediction
    assert r.text == "speculative decoding, exactly"
    assert r.stats.by_source["draft-model"][0] == r.stats.accepted_prediction_tokens > 20
    assert gen.generate("hi", drafter="draft-model", draft=DraftModelConfig(k=2)).text == r.text
    # with a prediction, auto drafts from it and not from the draft model (lookup's short matches may follow the
    # prediction's end where the cost sizer, timing this runner, finds that they pay)
    sources = gen.generate("hi", prediction="speculative").stats.by_source
    assert "prediction" in sources and "draft-model" not in sources


@pytest.mark.parametrize(
    "options,message",
    [
        ({"drafter": "draft-model"}, "needs a draft model"),
        ({"draft": {"k": 3}}, "draft must be a DraftModelConfig"),
    ],
)
def test_api_bad_draft_options(options, message):
    tok = ByteTokenizer()
    gen = Generator(ScriptedRunner(tok.encode("abc"), 257, tok.eos), tok)
    with pytest.raises(QuickdraftError, match=message):
        gen.stream("hi", **options)
    assert gen.runner.passes == 0


@pytest.mark.parametrize("kwargs,message", [({"k": 0}, "positive integer or 'auto'"), ({"min_confidence": 1.0}, "min_confidence"),
                                            ({"min_joint": -0.1}, "min_joint"),
                                            ({"initial": 40}, "min_length <= initial <= max_length")])
def test_bad_draft_model_config(kwargs, message):
    with pytest.raises(QuickdraftError, match=message):
        DraftModelConfig(**kwargs)


@pytest.fixture(scope="module")
def other_tokenizer_folder(tiny_folder, tmp_path_factory):
    folder = tmp_path_factory.mktemp("other-tokenizer")
    tok = AutoTokenizer.from_pretrained(tiny_folder)
    tok.add_tokens(["<extra>"])
    tok.save_pretrained(folder)
    LlamaForCausalLM.from_pretrained(tiny_folder).save_pretrained(folder)
    return folder


def test_load_refuses_a_draft_model_with_another_vocabulary(tiny_folder, other_tokenizer_folder):
    with pytest.raises(UnsupportedModelError, match="only in .*<extra>"):
        quickdraft.load(str(tiny_folder), draft_model=str(other_tokenizer_folder))
    with pytest.raises(QuickdraftError, match="draft_precision must be one of int8, bf16, fp32"):
        quickdraft.load(str(tiny_folder), draft_model=str(tiny_folder), draft_precision="fp16")


def test_cli_with_a_draft_model(tiny_folder, capsys):
    from test_api_cli import run_cli

    code, out, err = run_cli(capsys, "generate", "--model", str(tiny_folder), "--draft-model", str(tiny_folder),
                             "--draft-precision", "fp32", "--max-new-tokens", "30", "--json", "--compare", "zzz")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["compare"]["identical"] is True and len(doc["token_ids"]) == 30
    assert doc["stats"]["by_source"]["draft-model"] == {"accepted": sum(doc["from_draft"]), "rejected": 0}
    assert doc["stats"]["draft_forwards"] > 0
    code, _, err = run_cli(capsys, "generate", "--model", str(tiny_folder), "--draft-length", "0", "abc")
    assert code == 2 and "positive integer or 'auto'" in err
    code, _, err = run_cli(capsys, "generate", "--model", str(tiny_folder), "--drafter", "draft-model", "abc")
    assert code == 2 and "needs a draft model" in err


def test_making_a_drafter_leaves_the_shared_draft_runner_alone():
    # The server builds the next request's drafter while another generation is running.
    runner = ScriptedRunner(list(range(10, 30)), 64, eos=0)
    runner.prefill([1, 2, 3])
    DraftModelDrafter(runner, 64, SamplingParams(temperature=1.0, seed=1))
    assert runner.length == 3


@pytest.mark.parametrize("seed", [2**64 - 1, -1, 2**63])
def test_the_largest_and_negative_seeds_are_taken(tiny, seed):
    """The draft model draws from seed + 1: at the largest seed the server accepts (2**64 - 1) that overflowed
    torch's seed (a 500 from the server's worker); it wraps modulo 2**64, as torch reads negative seeds."""
    d = drafter(tiny, sampling=SamplingParams(temperature=1.0, seed=seed))
    d.begin(prompt_of(5))
    draft = d.propose(prompt_of(5), 4)
    assert len(draft) >= 1
    again = drafter(tiny, sampling=SamplingParams(temperature=1.0, seed=seed))
    again.begin(prompt_of(5))
    assert again.propose(prompt_of(5), 4).tokens == draft.tokens  # reproducible
