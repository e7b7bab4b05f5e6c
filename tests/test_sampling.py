"""Sampling math: processed distributions, and speculative sampling preserves them.

The statistical tests draw N samples of the first (and second) emitted token and compare the
histogram with the target's processed distribution by a chi-square test at significance 1e-4
(critical value for 5 degrees of freedom: 25.74). With N = 20000 the test has the power to catch
real bugs: `test_the_test_catches_a_missing_residual` runs the same check on a verifier that draws
the correction from p instead of the residual and requires it to fail.
"""

from __future__ import annotations

import pytest
import torch

from conftest import VOCAB, MarkovRunner, assert_follows, tiny_model
from quickdraft.acceptance import Acceptance, verify_sampling, verify_walk
from quickdraft.core import Draft, Stats, Verdict
from quickdraft.drafters.prediction import PredictionDrafter
from quickdraft.engine import Limits, generate
from quickdraft.errors import QuickdraftError
from quickdraft.runners.hf import HFRunner
from quickdraft.sampling import SamplingParams, probs_from_logits, sample

V = 6
N = 20000
CRITICAL = 25.74  # chi-square, 5 degrees of freedom, p = 1e-4

P1 = torch.tensor([0.40, 0.25, 0.15, 0.10, 0.07, 0.03])
P2 = torch.tensor([0.05, 0.05, 0.10, 0.20, 0.25, 0.35])


def chi2(counts: torch.Tensor, probs: torch.Tensor) -> float:
    n = counts.sum()
    support = probs > 0
    assert counts[~support].sum() == 0, "a token with zero probability was emitted"
    expected = probs[support] * n
    return float(((counts[support] - expected) ** 2 / expected).sum())


def first_two(verify, draft_rows, proposal, n=N, seed=0):
    """Histogram of the first emitted token, and of the second one when the first was accepted."""
    g = torch.Generator().manual_seed(seed)
    target = torch.stack([P1, P2, P2])  # [3, V]: rows after 0, 1, 2 draft tokens (independent here)
    first, second = torch.zeros(V), torch.zeros(V)
    for _ in range(n):
        tokens = proposal(g)
        probs = None if draft_rows is None else draft_rows[: len(tokens)]
        verdict = verify(Draft(tokens, probs), target[: len(tokens) + 1], g)
        first[verdict.tokens[0]] += 1
        if len(verdict.tokens) > 1:
            second[verdict.tokens[1]] += 1
    return first, second


Q_CLOSE = torch.tensor([0.35, 0.30, 0.15, 0.10, 0.05, 0.05])
Q_FAR = torch.tensor([0.02, 0.03, 0.05, 0.10, 0.30, 0.50])
Q_ZERO = torch.tensor([0.0, 0.5, 0.5, 0.0, 0.0, 0.0])  # q(x) = 0 for most tokens


def drawn_from(q_rows):
    return lambda g: tuple(sample(q_rows[i], g) for i in range(len(q_rows)))


CASES = {
    "draft model close": (torch.stack([Q_CLOSE, Q_CLOSE]), drawn_from(torch.stack([Q_CLOSE, Q_CLOSE]))),
    "draft model far": (torch.stack([Q_FAR, Q_FAR]), drawn_from(torch.stack([Q_FAR, Q_FAR]))),
    "draft probs with zeros": (torch.stack([Q_ZERO, Q_FAR]), drawn_from(torch.stack([Q_ZERO, Q_FAR]))),
    "point mass right": (None, lambda g: (0, 5)),  # the most likely tokens
    "point mass wrong": (None, lambda g: (5, 0)),  # unlikely tokens
}


@pytest.mark.parametrize("case", list(CASES))
def test_speculative_sampling_preserves_the_target_distribution(case):
    rows, proposal = CASES[case]
    first, second = first_two(verify_sampling, rows, proposal)
    assert chi2(first, P1) < CRITICAL
    assert second.sum() > 500  # enough accepted first tokens to test the second position
    assert chi2(second, P2) < CRITICAL


def test_token_cut_by_top_k_is_always_rejected():
    params = SamplingParams(temperature=1.0, top_k=2)
    target = probs_from_logits(torch.log(torch.stack([P1, P2])), params)  # only tokens 0, 1 survive
    g = torch.Generator().manual_seed(1)
    counts = torch.zeros(V)
    for _ in range(4000):
        v = verify_sampling(Draft((3,)), target, g)
        assert v.accepted == 0
        counts[v.tokens[0]] += 1
    assert chi2(counts, target[0]) < CRITICAL


def test_the_test_catches_a_missing_residual():
    def buggy(draft: Draft, target_probs, g):  # corrects from p instead of max(0, p - q)
        v = verify_sampling(draft, target_probs, g)
        if v.accepted < len(draft):
            return Verdict(draft, v.accepted, v.tokens[:-1] + (sample(target_probs[v.accepted], g),))
        return v

    rows, proposal = CASES["draft model far"]
    first, _ = first_two(buggy, rows, proposal)
    assert chi2(first, P1) > CRITICAL


# -- processed distributions ---------------------------------------------------------------------


def test_probs_from_logits_worked_examples():
    logits = torch.tensor([[2.0, 1.0, 0.0, -9.0]])
    p = probs_from_logits(logits, SamplingParams(temperature=1.0, top_k=2))
    assert torch.allclose(p, torch.tensor([[0.7311, 0.2689, 0.0, 0.0]]), atol=1e-4)
    p = probs_from_logits(logits, SamplingParams(temperature=2.0))
    assert torch.allclose(p, torch.softmax(logits / 2, dim=-1))
    base = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    # top_p 0.8: 0.5 + 0.3 reaches it, so two tokens stay; 0.81 needs the third
    assert torch.allclose(probs_from_logits(base, SamplingParams(1.0, top_p=0.8)), torch.tensor([[0.625, 0.375, 0, 0]]))
    kept = probs_from_logits(base, SamplingParams(1.0, top_p=0.81)) > 0
    assert kept.tolist() == [[True, True, True, False]]
    # top_p tiny keeps the most likely token only
    assert probs_from_logits(base, SamplingParams(1.0, top_p=1e-6)).tolist() == [[1.0, 0.0, 0.0, 0.0]]


def nucleus_by_definition(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """top_p's tokens of one row [V], in float64, token by token: the likeliest first, each kept while the mass
    before it is below top_p."""
    keep, mass = torch.zeros_like(probs, dtype=torch.bool), 0.0
    for i in probs.double().argsort(descending=True).tolist():
        if mass >= top_p and keep.any():
            break
        keep[i], mass = True, mass + float(probs[i])
    return keep


@pytest.mark.parametrize("spread", ["peaked", "flat"])  # flat: a nucleus wider than NUCLEUS_FIRST, the whole row sorted
def test_nucleus_keeps_the_tokens_the_definition_keeps(spread):
    from quickdraft.sampling import NUCLEUS_FIRST, nucleus

    g = torch.Generator().manual_seed(1)
    V = 4 * NUCLEUS_FIRST
    logits = torch.randn(3, V, generator=g) * (8.0 if spread == "peaked" else 0.3)  # [3, V]
    probs = torch.softmax(logits, dim=-1)
    for top_p in (1e-6, 0.3, 0.9, 0.99):
        kept = nucleus(probs, top_p)  # [3, V]
        for row in range(3):
            assert torch.equal(kept[row], nucleus_by_definition(probs[row], top_p))
        assert torch.equal(kept[1:2], nucleus(probs[1:2], top_p))  # a row alone keeps what it keeps among others
    wide = int(nucleus(probs, 0.99).sum(-1).max())
    assert (wide > NUCLEUS_FIRST) == (spread == "flat")  # both ways were taken


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"temperature": -0.1}, "temperature must be a finite number >= 0"),
        ({"top_p": 0.0}, r"top_p must be in \(0, 1\]"),
        ({"top_p": 1.5}, r"top_p must be in \(0, 1\]"),
        ({"top_k": -1}, "top_k must be an integer >= 0"),
        ({"seed": "x"}, "seed must be an integer"),
    ],
)
def test_bad_sampling_params(kwargs, message):
    with pytest.raises(QuickdraftError, match=message):
        SamplingParams(**kwargs)


# -- the engine under sampling ------------------------------------------------------------------------


def sampled(model, prompt, drafter=None, seed=0, n=24, stats=None, top_p=1.0, acceptance=Acceptance()):
    params = SamplingParams(temperature=0.8, top_k=20, top_p=top_p, seed=seed)
    steps = generate(HFRunner(model), prompt, Limits(n), drafter, stats=stats, sampling=params, acceptance=acceptance)
    return [t for s in steps for t in s.tokens]


def test_a_seed_makes_sampling_reproducible():
    model = tiny_model("llama")
    prompt = [3, 1, 4, 1, 5]
    assert sampled(model, prompt, seed=7) == sampled(model, prompt, seed=7)
    assert len({tuple(sampled(model, prompt, seed=s)) for s in range(4)}) > 1


@pytest.mark.parametrize("case", ["point mass right", "point mass wrong"])
def test_the_walk_preserves_the_target_distribution(case):
    """verify_walk, the engine's rule for point masses under sampling, on the cases speculative sampling passes."""
    rows, proposal = CASES[case]
    params = SamplingParams(temperature=1.0)
    first, second = first_two(lambda draft, target, g: verify_walk(draft, target.log(), params, g), rows, proposal)
    assert chi2(first, P1) < CRITICAL
    assert chi2(second, P2) < CRITICAL


def test_sample_follows_its_distribution_and_skips_zeros():
    g = torch.Generator().manual_seed(3)
    probs = torch.tensor([0.40, 0.0, 0.25, 0.15, 0.0, 0.20])  # two tokens that must never come out
    counts = torch.zeros(V)
    for _ in range(N):
        counts[sample(probs, g)] += 1
    assert chi2(counts, probs) < 21.11  # chi-square, 3 degrees of freedom, p = 1e-4
    assert sample(torch.tensor([0.0, 0.0, 1.0, 0.0]), g) == 2


def test_a_draft_token_is_accepted_only_where_the_target_draws_it():
    # the walk accepts a draft token exactly where the target's own draw is that token
    logits = torch.tensor([[0.0, 9.0, -9.0], [9.0, 0.0, -9.0], [0.0, 0.0, 9.0]])  # nearly sure: 1, then 0, then 2
    params = SamplingParams(temperature=1.0, top_k=1)  # top_k 1: the draws are certain
    g = torch.Generator().manual_seed(0)
    assert verify_walk(Draft((1, 0)), logits, params, g).tokens == (1, 0, 2)
    assert verify_walk(Draft((1, 2)), logits, params, g).tokens == (1, 0)
    assert verify_walk(Draft((2, 0)), logits, params, g).tokens == (1,)
    assert verify_walk(Draft(), logits[:1], params, g).tokens == (1,)


SEEDED_DRAFTS = ["right", "wrong", "partly right", "lookup 2", "lookup 8"]


# The rules' settings that are speculative sampling (Acceptance.lossy False): each verifies as the exact rule does
EXACT_SETTINGS = {"exact": Acceptance(), "mentored at D = 0": Acceptance("mentored", 0.0),
                  "thresholds of 1.0": Acceptance("threshold")}


@pytest.mark.parametrize("drafts, top_p, rule", [(d, p, "exact") for d in SEEDED_DRAFTS for p in (1.0, 0.9)] + [
    (d, 1.0, rule) for d in ("partly right", "lookup 8") for rule in list(EXACT_SETTINGS)[1:]])
def test_seeded_sampling_with_drafts_gives_plain_samplings_tokens(drafts, top_p, rule):
    """Under sampling, point-mass drafts are verified by the target's own draws, one uniform per output position
    (acceptance/rejection.verify_walk): the output is plain sampling's under the same seed, token for token,
    whatever was drafted and however long the drafts were (the sizer sizes them by measured time). So are they
    under the other rules' settings that are speculative sampling."""
    from quickdraft.drafters.lookup import LookupConfig, PromptLookupDrafter

    model = tiny_model("llama")
    prompt = [3, 1, 4, 1, 5, 9, 2, 6] * 3
    for seed in range(3):
        plain = sampled(model, prompt, seed=seed, n=40, top_p=top_p)
        drafter = {
            "right": lambda: PredictionDrafter(plain),
            "wrong": lambda: PredictionDrafter([(t + 1) % VOCAB for t in plain]),
            "partly right": lambda: PredictionDrafter(plain[:10] + [(t + 5) % VOCAB for t in plain[10:14]] + plain[14:]),
            "lookup 2": lambda: PromptLookupDrafter(LookupConfig(num_tokens=2, growth=0)),
            "lookup 8": lambda: PromptLookupDrafter(LookupConfig(num_tokens=8, growth=0, short_ngram=1)),
        }[drafts]()
        stats = Stats()
        acceptance = EXACT_SETTINGS[rule]
        assert not acceptance.lossy
        assert sampled(model, prompt, drafter, seed=seed, n=40, stats=stats, top_p=top_p, acceptance=acceptance) == plain
        assert stats.draft_tokens > 0  # drafts were verified
        if drafts == "right":
            assert stats.rejected_prediction_tokens == 0 and stats.target_passes <= 3
        if drafts == "wrong":
            assert stats.rejected_prediction_tokens > 0


def test_engine_first_token_distribution_with_a_prediction():
    # The first emitted token under a point-mass draft follows the target's processed distribution.
    model = tiny_model("qwen2")
    prompt = [7, 2, 9]
    params = SamplingParams(temperature=1.5, top_k=6)
    runner = HFRunner(model)
    runner.reset()
    runner.prefill(prompt[:-1])
    p = probs_from_logits(runner.forward(prompt[-1:]), params)[0]
    top = torch.nonzero(p).flatten()
    counts = torch.zeros_like(p)
    for seed in range(1500):
        s = SamplingParams(temperature=1.5, top_k=6, seed=seed)
        steps = generate(runner, prompt, Limits(2), PredictionDrafter([int(top[0]), int(top[1])]), sampling=s)
        counts[next(iter(steps)).tokens[0]] += 1
    expected = p[top] * counts.sum()
    stat = float(((counts[top] - expected) ** 2 / expected).sum())
    assert counts.sum() == counts[top].sum()
    assert stat < 25.74  # 5 degrees of freedom (top_k 6), p = 1e-4


# -- joint distribution of whole sequences through the engine -------------------------------------------


@pytest.mark.parametrize("drafter", ["none", "prediction right", "prediction wrong", "lookup"])
def test_joint_distribution_of_three_tokens(drafter):
    """Whole engine, sampled: the first three tokens follow the exact joint distribution of plain
    sampling from a Markov target (chi-square, significance 1e-4), whatever drafts it verifies."""
    from quickdraft.drafters.lookup import LookupConfig, PromptLookupDrafter

    g = torch.Generator().manual_seed(5)
    Vm = 4
    table = torch.randn(Vm, Vm, generator=g) * 1.5  # [V, V] logits of the next token given the current one
    params = SamplingParams(temperature=0.9, top_k=3)
    step = probs_from_logits(table, params)  # [V, V] processed transition probabilities
    prompt = [0, 1, 2, 3, 1]
    truth = torch.zeros(Vm, Vm, Vm)  # exact joint distribution of the first three tokens
    for a in range(Vm):
        for b in range(Vm):
            truth[a, b] = step[prompt[-1], a] * step[a, b] * step[b]
    runner = MarkovRunner(table)
    counts = torch.zeros(Vm, Vm, Vm)
    n = 3000  # ~110 expected per cell of the 27 with probability > 0
    for seed in range(n):
        make = {
            "none": lambda: None,
            "prediction right": lambda: PredictionDrafter([int(step[1].argmax()), 0, 0]),
            "prediction wrong": lambda: PredictionDrafter([int(step[1].argmin()), 3, 3]),
            "lookup": lambda: PromptLookupDrafter(LookupConfig(max_ngram=2, min_ngram=1, num_tokens=3, single_match_tokens=3)),
        }[drafter]
        steps = generate(runner, prompt, Limits(3), make(), sampling=SamplingParams(0.9, top_k=3, seed=seed))
        out = [t for s in steps for t in s.tokens]
        counts[out[0], out[1], out[2]] += 1
    assert_follows(counts, truth)


# -- a rated draft trimmed by the sizer stays lossless ---------------------------------------------------

Q_SURE = torch.tensor([0.95, 0.01, 0.01, 0.01, 0.01, 0.01])  # the draft model is sure of its next token
Q_UNSURE = torch.tensor([0.20, 0.20, 0.15, 0.15, 0.15, 0.15])


def test_trimming_a_sampled_draft_keeps_the_target_distribution():
    """The sizer trims a draft model's draft by its confidences (sizing.DraftSizer.trim). Under sampling the
    choice to keep token i must not depend on token i itself: here the draft model is sure of its second token
    only after drawing 4 or 5 first, and a second pass token costs nothing (t(3) = t(2)), so a trim that looked
    at the second token's confidence would keep the first token exactly when it is 4 or 5, and the first emitted
    token would lean towards what the draft model drew (its 3 would come out at 0.02 instead of 0.10)."""
    from quickdraft.sizing import DraftSizer

    sizer = DraftSizer()
    sizer.costs.record(1, 1.0)
    sizer.costs.record(2, 1.65)
    sizer.costs.record(3, 1.65)  # a second draft token costs nothing; the longest pass measured: 3 tokens
    g = torch.Generator().manual_seed(0)
    target = torch.stack([P1, P2, P2])  # [3, V]
    first, second, kept = torch.zeros(V), torch.zeros(V), 0
    for _ in range(N):
        x1 = sample(Q_FAR, g)
        q2 = Q_SURE if x1 in (4, 5) else Q_UNSURE
        x2 = sample(q2, g)
        draft = Draft((x1, x2), torch.stack([Q_FAR, q2]), source="draft-model",
                      confidence=(float(Q_FAR.max()), float(q2.max())))
        draft = sizer.trim(draft)
        kept += len(draft) > 0
        verdict = verify_sampling(Draft(draft.tokens, draft.probs if len(draft) else None), target[: len(draft) + 1], g)
        first[verdict.tokens[0]] += 1
        if len(verdict.tokens) > 1:
            second[verdict.tokens[1]] += 1
    assert kept > N // 2  # the trim does keep drafts here
    assert chi2(first, P1) < CRITICAL
    assert chi2(second, P2) < CRITICAL


def test_trimming_a_draft_that_stopped_early_keeps_the_target_distribution():
    """The draft model stops drafting when it doubts its next token (DraftModelConfig.min_confidence), and that
    doubt comes after drawing the token before it: here it goes on to a second token only after drawing 4 or 5
    first, so how long the draft is depends on its first token. The trim must not read that length: a rule that
    took the tokens after token i to be as many as were drafted would keep the first token (confidence 0.5, worth
    a pass only with a second token to come) exactly when it is 4 or 5 (its 3 came out at 0.02 instead of 0.10)."""
    from quickdraft.sizing import DraftSizer

    sizer = DraftSizer()
    sizer.costs.record(1, 1.0)
    sizer.costs.record(2, 1.65)
    sizer.costs.record(3, 1.65)  # a second draft token costs nothing; the longest pass measured: 3 tokens
    g = torch.Generator().manual_seed(0)
    first, lengths = torch.zeros(V), torch.zeros(3)
    for _ in range(N):
        x1 = sample(Q_FAR, g)
        if x1 in (4, 5):
            x2 = sample(Q_SURE, g)
            draft = Draft((x1, x2), torch.stack([Q_FAR, Q_SURE]), source="draft-model",
                          confidence=(float(Q_FAR.max()), float(Q_SURE.max())))
        else:  # its next token would be unsure: it stops after one
            draft = Draft((x1,), Q_FAR[None], source="draft-model", confidence=(float(Q_FAR.max()),))
        draft = sizer.trim(draft)
        lengths[len(draft)] += 1
        verdict = verify_sampling(Draft(draft.tokens, draft.probs if len(draft) else None),
                                  torch.stack([P1, P2, P2])[: len(draft) + 1], g)
        first[verdict.tokens[0]] += 1
    assert lengths[1:].sum() > 0  # drafts are verified here, so the trim's choice matters
    assert chi2(first, P1) < CRITICAL
