"""Mentored decoding: the emitted distribution stays within the KL bound, acceptance grows with the
bound and is the best any scheme with that bound can have, and D = 0 is speculative sampling.

p is the target's processed distribution, q the drafter's (as everywhere in quickdraft).
"""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from conftest import MarkovRunner
from test_sampling import CRITICAL, P1, P2, Q_CLOSE, Q_FAR, chi2
from quickdraft.acceptance import Acceptance, verify_mentored, verify_sampling
from quickdraft.acceptance.mentored import kl_divergence, mentor
from quickdraft.api import Generator
from quickdraft.core import Draft, Stats
from quickdraft.drafters.draft_model import DraftModelConfig, DraftModelDrafter
from quickdraft.engine import Limits, generate
from quickdraft.errors import QuickdraftError
from quickdraft.runners import ScriptedRunner
from quickdraft.sampling import SamplingParams, probs_from_logits
from quickdraft.tokenizer import ByteTokenizer

P3 = torch.tensor([0.5, 0.3, 0.2])
Q3 = torch.tensor([0.1, 0.1, 0.8])


def acceptance_of(pi: torch.Tensor, q: torch.Tensor) -> float:
    """Best acceptance probability of any accept/replace scheme that emits pi from drafts ~ q."""
    return float(torch.minimum(pi.double(), q.double()).sum())


def test_worked_example():
    # D = 0.1 caps token 2 (q/p = 4 > 1/alpha) and raises tokens 0, 1 (q/p = 0.2, 0.33 < 1/beta):
    # pi = (0.5/beta, 0.3/beta, 0.2/alpha) with 0.8/beta + 0.2/alpha = 1 and
    # KL(p || pi) = 0.8 log(beta) - 0.2 log(1/alpha) = 0.1.
    m = mentor(P3, Q3, 0.1)
    a, u = 1 / m.alpha, 1 / m.beta
    assert 0.8 * u + 0.2 * a == pytest.approx(1.0, abs=1e-6)  # float32 inputs
    assert -0.8 * math.log(u) - 0.2 * math.log(a) == pytest.approx(0.1, abs=1e-6)
    assert (m.alpha, m.beta) == (pytest.approx(0.48784, abs=1e-4), pytest.approx(1.35587, abs=1e-4))
    pi = m.pi(P3.double(), Q3.double())
    assert pi.tolist() == pytest.approx([0.36877, 0.22126, 0.40997], abs=1e-4)
    assert kl_divergence(P3, pi) == pytest.approx(0.1, abs=1e-9) and m.kl == pytest.approx(0.1, abs=1e-9)
    assert acceptance_of(pi, Q3) == pytest.approx(0.60997, abs=1e-4)  # exact rule: sum min(p, q) = 0.4


@pytest.mark.parametrize("bound", [0.02, 0.1, 0.3])
def test_no_distribution_within_the_bound_accepts_more(bound):
    """Brute force over a grid of the 3-token simplex: nothing within KL <= D beats mentor's pi."""
    m = mentor(P3, Q3, bound)
    best = acceptance_of(m.pi(P3.double(), Q3.double()), Q3)
    steps = 200
    grid_best = 0.0
    for i, j in itertools.product(range(1, steps), repeat=2):
        if i + j >= steps:
            continue
        pi = torch.tensor([i / steps, j / steps, (steps - i - j) / steps], dtype=torch.float64)
        if kl_divergence(P3, pi) <= bound:
            grid_best = max(grid_best, acceptance_of(pi, Q3))
    assert best >= grid_best - 1e-9
    assert best <= grid_best + 0.02  # and the grid gets close to it: the bound is really binding


@pytest.mark.parametrize("q", [Q_CLOSE, Q_FAR, torch.tensor([0.0, 0.0, 0.0, 0.0, 0.0, 1.0])], ids=["close", "far", "point"])
def test_closed_form_properties(q):
    last = -1.0
    for bound in [0.0, 0.001, 0.01, 0.05, 0.2, 0.5, 2.0]:
        m = mentor(P1, q, bound)
        pi = m.pi(P1.double(), q.double())
        assert float(pi.sum()) == pytest.approx(1.0, abs=1e-6)  # float32 inputs
        assert kl_divergence(P1, pi) <= bound + 1e-9
        acc = acceptance_of(pi, q)
        assert acc >= last - 1e-12  # acceptance never falls as the bound grows
        last = acc
    exact = acceptance_of(P1, q)
    assert acceptance_of(mentor(P1, q, 0.2).pi(P1.double(), q.double()), q) > exact + 0.05
    if kl_divergence(P1, q) <= 2.0:  # within the bound, the draft distribution itself is allowed
        assert mentor(P1, q, 2.0).draft_itself and last == pytest.approx(1.0)


def test_target_support_is_kept():
    p = torch.tensor([0.6, 0.4, 0.0, 0.0])  # top-k removed tokens 2 and 3
    q = torch.tensor([0.1, 0.1, 0.5, 0.3])
    pi = mentor(p, q, 5.0).pi(p.double(), q.double())
    assert pi[2:].tolist() == [0.0, 0.0] and float(pi.sum()) == pytest.approx(1.0)
    g = torch.Generator().manual_seed(0)
    for _ in range(300):
        v = verify_mentored(Draft((2,)), torch.stack([p, p]), g, 5.0)
        assert v.accepted == 0 and v.tokens[0] in (0, 1)


@pytest.mark.parametrize("kind", ["draft model", "point mass"])
def test_zero_bound_is_speculative_sampling_with_the_same_random_numbers(kind):
    target = torch.stack([P1, P2, P2])
    ga, gb, gd = (torch.Generator().manual_seed(s) for s in (11, 11, 12))
    probs = torch.stack([Q_FAR, Q_CLOSE])
    for _ in range(2000):
        tokens = tuple(int(torch.multinomial(probs[i], 1, generator=gd)) for i in range(2))
        draft = Draft(tokens, probs if kind == "draft model" else None)
        a = verify_sampling(draft, target, ga)
        b = verify_mentored(draft, target, gb, 0.0)
        assert (a.accepted, a.tokens) == (b.accepted, b.tokens) and b.kl == 0.0


def first_token_histogram(q_row, bound, n, seed=0):
    """Histogram of the first emitted token when a draft ~ q_row (or a point mass) is verified."""
    g = torch.Generator().manual_seed(seed)
    target = torch.stack([P1, P2])
    counts, accepted = torch.zeros(6), 0
    point = q_row.max() == 1
    m = mentor(P1, q_row, bound)  # what the rule emits at that position, computed once for speed
    for _ in range(n):
        x = int(torch.multinomial(q_row, 1, generator=g))
        v = verify_mentored(Draft((x,), None if point else q_row[None]), target, g, bound)
        counts[v.tokens[0]] += 1
        accepted += v.accepted
    return counts, accepted / n, m


@pytest.mark.parametrize("q", [Q_CLOSE, Q_FAR, torch.tensor([0.0, 0.0, 0.0, 0.0, 1.0, 0.0])], ids=["close", "far", "point"])
def test_emitted_distribution_is_pi_and_within_the_bound(q):
    n = 6000
    rates = []
    for bound in (0.0, 0.05, 0.2):
        counts, rate, m = first_token_histogram(q, bound, n)
        pi = m.pi(P1.double(), q.double()).float()
        assert chi2(counts, pi) < CRITICAL  # the sampler emits exactly pi (chi-square, p = 1e-4)
        empirical = counts / n
        # KL(p || empirical) concentrates around KL(p || pi) + (k - 1) / (2n) (the chi-square bias);
        # allow 4 standard deviations of that estimate on top of the bound.
        assert kl_divergence(P1, empirical) <= bound + 5 / (2 * n) + 4 * math.sqrt(2 * 5) / (2 * n) + 0.01
        rates.append(rate)
    assert rates[0] <= rates[1] + 0.02 and rates[1] <= rates[2] + 0.02
    assert rates[2] > rates[0] + 0.05  # the bound buys acceptance


def test_engine_and_api():
    # Whole engine, Markov target and draft: mentored reports the KL it used, within the bound per token,
    # accepts more than exact, and with D = 0 gives the same tokens as exact under the same seed.
    g = torch.Generator().manual_seed(5)
    V = 5
    table = torch.randn(V, V, generator=g) * 1.5
    other = table + torch.randn(V, V, generator=g) * 2.0
    prompt = [0, 1, 2]

    def run(acceptance, seed):
        s = SamplingParams(temperature=1.0, seed=seed)
        d = DraftModelDrafter(MarkovRunner(other), V, s, DraftModelConfig(k=4, min_confidence=0))
        stats = Stats()
        out = [t for st in generate(MarkovRunner(table), prompt, Limits(40), d, stats=stats, sampling=s,
                                    acceptance=acceptance) for t in st.tokens]
        return out, stats

    exact_acc = lossy_acc = 0
    for seed in range(40):
        out_exact, s_exact = run(Acceptance(), seed)
        out_zero, s_zero = run(Acceptance("mentored", 0.0), seed)
        assert out_zero == out_exact and s_zero.kl == 0.0
        _, s_lossy = run(Acceptance("mentored", 0.3), seed)
        assert 0 < s_lossy.kl_per_token <= 0.3 and s_lossy.as_dict()["lossy"] is True
        exact_acc += s_exact.accepted_prediction_tokens
        lossy_acc += s_lossy.accepted_prediction_tokens
    assert lossy_acc > 1.2 * exact_acc


@pytest.mark.parametrize(
    "options,message",
    [
        ({"acceptance": "mentored", "kl_bound": 0.1}, "with greedy decoding"),
        ({"acceptance": "mentored", "sampling": SamplingParams(1.0)}, "needs kl_bound"),
        ({"acceptance": "mentored", "kl_bound": -1, "sampling": SamplingParams(1.0)}, "kl_bound must be a finite number >= 0"),
        ({"acceptance": "mentored", "kl_bound": float("nan"), "sampling": SamplingParams(1.0)}, "finite"),
        ({"acceptance": "lossy", "sampling": SamplingParams(1.0)}, "acceptance must be one of exact, mentored"),
        ({"kl_bound": 0.2, "sampling": SamplingParams(1.0)}, "applies to acceptance 'mentored' only"),
    ],
)
def test_bad_acceptance_options_fail_before_any_work(options, message):
    tok = ByteTokenizer()
    gen = Generator(ScriptedRunner(tok.encode("abc"), 257, tok.eos), tok)
    with pytest.raises(QuickdraftError, match=message):
        gen.stream("hi", **options)
    assert gen.runner.passes == 0


def test_verify_mentored_rejects_a_bad_bound():
    with pytest.raises(QuickdraftError, match="finite number >= 0"):
        verify_mentored(Draft((0,)), torch.stack([P1, P1]), torch.Generator(), -0.5)


def test_cli_mentored(tiny_folder, capsys):
    from test_api_cli import run_cli

    code, out, err = run_cli(capsys, "generate", "--model", str(tiny_folder), "--draft-model", str(tiny_folder),
                             "--draft-precision", "fp32", "--temperature", "0.9", "--seed", "1", "--acceptance",
                             "mentored", "--kl-bound", "0.05", "--max-new-tokens", "20", "zzz")
    assert code == 0, err
    assert "LOSSY: mentored" in err
    code, _, err = run_cli(capsys, "generate", "--model", str(tiny_folder), "--acceptance", "mentored", "zzz")
    assert code == 2 and "needs --kl-bound" in err
    code, _, err = run_cli(capsys, "generate", "--model", str(tiny_folder), "--acceptance", "mentored",
                           "--kl-bound", "0.1", "zzz")
    assert code == 2 and "with greedy decoding" in err


def test_probs_helper_matches():  # the engine verifies mentored on the same processed distribution
    logits = torch.log(torch.stack([P1, P2]))
    assert torch.allclose(probs_from_logits(logits, SamplingParams(1.0)), torch.stack([P1, P2]), atol=1e-6)
