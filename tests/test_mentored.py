"""Mentored decoding: the emitted distribution stays within the KL bound, acceptance grows with the
bound and is the best any scheme with that bound can have, and D = 0 is speculative sampling.

p is the target's processed distribution, q the drafter's (as everywhere in quickdraft).

Statistical checks draw N first tokens and compare the histogram, by a chi-square test at significance
1e-4 (test_sampling.CRITICAL, 5 degrees of freedom), with the distribution the rule emits computed in
closed form here from the write-up's r and s (`emitted_by_rule`), not from the module's pi. A wrong
distribution at KL distance d from it gives a statistic near 2 N d, so N = 4000 catches d >= 0.005:
`test_emitted_distribution...` requires the same histogram to fail against the target itself.
"""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from conftest import MarkovRunner
from test_sampling import CRITICAL, P1, P2, Q_CLOSE, Q_FAR, Q_ZERO, chi2
from quickdraft.acceptance import Acceptance, verify_mentored, verify_sampling
from quickdraft.acceptance.mentored import Mentor, kl_divergence, mentor
from quickdraft.api import Generator
from quickdraft.core import Draft, Stats
from quickdraft.drafters.draft_model import DraftModelConfig, DraftModelDrafter
from quickdraft.engine import Limits, generate
from quickdraft.errors import QuickdraftError
from quickdraft.runners import ScriptedRunner
from quickdraft.sampling import SamplingParams
from quickdraft.tokenizer import ByteTokenizer

V = 6
P3 = torch.tensor([0.5, 0.3, 0.2])
Q3 = torch.tensor([0.1, 0.1, 0.8])
P_CUT = torch.tensor([0.6, 0.4, 0.0, 0.0, 0.0, 0.0])  # top-k 2 removed tokens 2..5


def onehot(x: int, n: int = V) -> torch.Tensor:
    q = torch.zeros(n)
    q[x] = 1.0
    return q


def acceptance_of(pi: torch.Tensor, q: torch.Tensor) -> float:
    """Best acceptance probability of any accept/replace scheme that emits pi from drafts ~ q."""
    return float(torch.minimum(pi.double(), q.double()).sum())


def emitted_by_rule(p: torch.Tensor, q: torch.Tensor, m: Mentor) -> torch.Tensor:
    """What "accept x ~ q with r(x), else draw from s" emits: q r + (1 - sum(q r)) s, in float64.

    r = min(1, p / (alpha q)), s proportional to max(0, p / beta - q) (r = 1 when the draft itself is
    within the bound). p, q: [V] -> [V].
    """
    p, q = p.double(), q.double()
    if m.draft_itself:
        r = torch.ones_like(q)
    else:
        r = torch.where(q > 0, torch.clamp(p / (m.alpha * torch.where(q > 0, q, 1.0)), max=1.0), 1.0)
    kept = q * r  # [V]
    residual = torch.clamp(p / m.beta - q, min=0)  # [V]
    rejected = float(1 - kept.sum())
    return kept + (rejected * residual / residual.sum() if rejected > 1e-12 else 0.0)


def kl_tolerance(p: torch.Tensor, pi: torch.Tensor, n: int, z: float = 4.0) -> float:
    """How far KL(p || empirical) may exceed KL(p || pi) for n draws from pi (delta method).

    With w = p / pi: KL(p || pi_hat) - KL(p || pi) ~ -sum w (pi_hat - pi) + 1/2 sum w (pi_hat - pi)^2 / pi.
    The linear term has mean 0 and variance Var_pi(w) / n; the quadratic one has mean
    sum w (1 - pi) / (2n) and, when pi = p, standard deviation sqrt(2 (k - 1)) / (2n). Allowed: that mean
    plus z = 4 standard deviations of each (a false alarm well under 1e-4 per check).
    """
    support = p > 0
    ps, pis = p[support].double(), pi[support].double()
    w = ps / pis
    bias = float((w * (1 - pis)).sum()) / (2 * n)
    var = max(0.0, float((pis * w * w).sum()) - 1.0)  # E_pi[w] = sum(p) = 1
    return bias + z * (math.sqrt(var / n) + math.sqrt(2 * (int(support.sum()) - 1)) / (2 * n))


# -- the rule in closed form --------------------------------------------------------------------


def test_worked_example():
    # D = 0.1 caps token 2 (q/p = 4 > 1/alpha) and raises tokens 0, 1 (q/p = 0.2, 0.33 < 1/beta):
    # pi = (0.5/beta, 0.3/beta, 0.2/alpha) with 0.8/beta + 0.2/alpha = 1 and
    # KL(p || pi) = 0.8 log(beta) + 0.2 log(alpha) = 0.1. Solved to 30 digits with mpmath:
    # alpha = 0.487837, beta = 1.355870; r = (1, 1, 0.2 / (alpha 0.8)) = (1, 1, 0.512466);
    # s = (0.5/beta - 0.1, 0.3/beta - 0.1, 0) / 0.390027 = (0.689098, 0.310902, 0).
    m = mentor(P3, Q3, 0.1)
    a, u = 1 / m.alpha, 1 / m.beta
    assert 0.8 * u + 0.2 * a == pytest.approx(1.0, abs=1e-6)  # float32 inputs
    assert -0.8 * math.log(u) - 0.2 * math.log(a) == pytest.approx(0.1, abs=1e-6)
    assert (m.alpha, m.beta) == (pytest.approx(0.487837, abs=1e-5), pytest.approx(1.355870, abs=1e-5))
    r = torch.clamp(P3.double() / (m.alpha * Q3.double()), max=1.0)
    assert r.tolist() == pytest.approx([1.0, 1.0, 0.512466], abs=1e-5)
    residual = torch.clamp(P3.double() / m.beta - Q3.double(), min=0)
    assert float(residual.sum()) == pytest.approx(1 - float((Q3.double() * r).sum()), abs=1e-6)  # = rejection mass
    assert (residual / residual.sum()).tolist() == pytest.approx([0.689098, 0.310902, 0.0], abs=1e-5)
    pi = m.pi(P3.double(), Q3.double())
    assert pi.tolist() == pytest.approx([0.368767, 0.221260, 0.409973], abs=1e-5)
    assert emitted_by_rule(P3, Q3, m).tolist() == pytest.approx(pi.tolist(), abs=1e-6)
    assert kl_divergence(P3, pi) == pytest.approx(0.1, abs=1e-9) and m.kl == pytest.approx(0.1, abs=1e-9)
    assert acceptance_of(pi, Q3) == pytest.approx(0.609973, abs=1e-5)  # exact rule: sum min(p, q) = 0.4
    assert m.acceptance(P3.double(), Q3.double()) == pytest.approx(0.609973, abs=1e-5)  # what the study plots
    assert mentor(P3, Q3, 0.0).acceptance(P3, Q3) == pytest.approx(0.4, abs=1e-6)


def test_worked_example_through_verify():
    # Draft token 2 (q = 0.8, p = 0.2): the exact rule accepts iff u < 0.25, mentored iff u < r(2) = 0.512466.
    target = torch.stack([P3, P3])
    outcomes = set()
    for seed in range(200):
        u = float(torch.rand(1, generator=torch.Generator().manual_seed(seed)))
        if abs(u - 0.512466) < 1e-4:
            continue
        v = verify_mentored(Draft((2,), Q3[None]), target, torch.Generator().manual_seed(seed), 0.1)
        assert v.accepted == (u < 0.512466) and v.kl == pytest.approx(0.1, abs=1e-6)
        if not v.accepted:
            assert v.tokens[0] in (0, 1)  # s is zero on token 2
        outcomes.add((u < 0.25, v.accepted))
    assert outcomes == {(True, True), (False, True), (False, False)}  # incl. accepted where exact rejects


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


DRAFT_ROWS = {"close": Q_CLOSE, "far": Q_FAR, "zeros": Q_ZERO, "point right": onehot(0), "point wrong": onehot(5)}


@pytest.mark.parametrize("name", list(DRAFT_ROWS))
def test_closed_form_properties(name):
    q = DRAFT_ROWS[name]
    last = -1.0
    for bound in [0.0, 0.001, 0.01, 0.05, 0.2, 0.5, 2.0]:
        m = mentor(P1, q, bound)
        pi = emitted_by_rule(P1, q, m)
        assert float(pi.sum()) == pytest.approx(1.0, abs=1e-6)  # float32 inputs
        assert torch.allclose(pi, m.pi(P1.double(), q.double()), atol=1e-6)  # the module's pi is what r, s emit
        assert kl_divergence(P1, pi) <= bound + 1e-6 and m.kl == pytest.approx(kl_divergence(P1, pi), abs=1e-6)
        acc = acceptance_of(pi, q)
        assert acc >= last - 1e-12  # acceptance never falls as the bound grows
        last = acc
    exact = acceptance_of(P1, q)
    assert acceptance_of(mentor(P1, q, 0.2).pi(P1.double(), q.double()), q) > exact + 0.05
    if kl_divergence(P1, q) <= 2.0:  # within the bound, the draft distribution itself is allowed
        assert mentor(P1, q, 2.0).draft_itself and last == pytest.approx(1.0)


def bernoulli_kl(a: float, b: float) -> float:
    return a * math.log(a / b) + (1 - a) * math.log((1 - a) / (1 - b))


@pytest.mark.parametrize("x", [0, 3, 5])
@pytest.mark.parametrize("bound", [0.01, 0.1, 0.5])
def test_point_mass_has_a_one_dimensional_solution(x, bound):
    # q = onehot(x): pi(x) = t, the largest t in [p(x), 1] with KL(Bernoulli(p(x)) || Bernoulli(t)) <= D,
    # and the other tokens keep p's proportions. Found here by plain bisection on t.
    px = float(P1[x])
    lo, hi = px, 1.0
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if bernoulli_kl(px, mid) <= bound else (lo, mid)
    pi = emitted_by_rule(P1, onehot(x), mentor(P1, onehot(x), bound))
    assert float(pi[x]) == pytest.approx(lo, abs=1e-6)  # the acceptance probability
    others = [y for y in range(V) if y != x]
    assert pi[others].tolist() == pytest.approx((P1[others].double() * (1 - lo) / (1 - px)).tolist(), abs=1e-6)


@pytest.mark.parametrize("gap", [20.0, 36.0, 40.0, 60.0])
@pytest.mark.parametrize("bound", [1e-6, 0.01, 0.1])
@pytest.mark.parametrize("point", [False, True])
def test_the_bound_holds_where_the_target_all_but_rules_out_the_draft(gap, bound, point):
    """A draft token the target gives e^-gap (1e-16 and less: below the rounding of a sum of p near 1) is capped
    at p(x) / alpha like any other; its mass once vanished from the capped group's sum, the search ran alpha down
    to p(x) / q(x), and the token was emitted nearly always, KL reported 0 (a model drafting a token its target
    rules out, or a prediction holding one)."""
    logits_p = torch.zeros(V)
    logits_p[1], logits_p[2:] = -gap, torch.linspace(-2, -8, V - 2)
    p = torch.softmax(logits_p, -1)
    q = onehot(1) if point else torch.softmax(torch.where(torch.arange(V) == 1, 0.0, -12.0), -1)
    m = mentor(p, q, bound)
    pi = emitted_by_rule(p, q, m)  # [V] float64
    assert float(pi.sum()) == pytest.approx(1.0, abs=1e-9)
    assert kl_divergence(p, pi) <= bound * (1 + 1e-6) and m.kl == pytest.approx(kl_divergence(p, pi), rel=1e-4)
    assert float(pi[1]) <= 1 - math.exp(-bound) + 1e-6  # about what any pi within the bound may give the token
    assert float(pi[1]) >= 0.9 * (1 - math.exp(-bound))  # and the rule still uses most of the room


# -- the sampler ------------------------------------------------------------------------------------


def first_token_histogram(q_row: torch.Tensor, bound: float, n: int, seed: int = 0):
    """Histogram of the first emitted token, and the acceptance rate, when a draft token drawn from q_row
    (a point mass: a deterministic drafter) is verified against P1."""
    g = torch.Generator().manual_seed(seed)
    target = torch.stack([P1, P2])
    counts, accepted = torch.zeros(V), 0
    point = bool(q_row.max() == 1)
    for _ in range(n):
        x = int(torch.multinomial(q_row, 1, generator=g))
        v = verify_mentored(Draft((x,), None if point else q_row[None]), target, g, bound)
        counts[v.tokens[0]] += 1
        accepted += v.accepted
    return counts, accepted / n


SAMPLED = [("close", 0.01), ("far", 0.05), ("far", 0.2), ("zeros", 0.1), ("point right", 0.05), ("point wrong", 0.2)]


@pytest.mark.parametrize("name,bound", SAMPLED)
def test_emitted_distribution_matches_the_closed_form_and_the_bound(name, bound):
    q, n = DRAFT_ROWS[name], 4000
    m = mentor(P1, q, bound)
    pi = emitted_by_rule(P1, q, m)  # [V] float64
    assert kl_divergence(P1, pi) <= bound + 1e-6
    counts, rate = first_token_histogram(q, bound, n)
    assert chi2(counts, pi) < CRITICAL  # the sampler emits exactly what r and s say
    assert chi2(counts, P1) > CRITICAL  # ... which the test can tell from the target: the rule is lossy here
    assert kl_divergence(P1, counts / n) <= bound + kl_tolerance(P1, pi, n)
    expected = acceptance_of(pi, q)
    assert abs(rate - expected) <= 4 * math.sqrt(expected * (1 - expected) / n) + 1e-9
    assert expected > acceptance_of(P1, q) + 0.02  # and accepts more than the exact rule


D0_CASES = {  # (target rows, draft rows or None for point masses)
    "draft model": (torch.stack([P1, P2, P2, P1]), torch.stack([Q_FAR, Q_CLOSE, Q_FAR])),
    "draft probs with zeros": (torch.stack([P1, P2, P2, P1]), torch.stack([Q_ZERO, Q_FAR, Q_ZERO])),
    "target cut by top-k": (torch.stack([P_CUT, P1, P_CUT, P2]), torch.stack([Q_FAR, Q_ZERO, Q_CLOSE])),
    "point masses": (torch.stack([P1, P2, P_CUT, P1]), None),
}


@pytest.mark.parametrize("case", list(D0_CASES))
def test_zero_bound_is_speculative_sampling_with_the_same_random_numbers(case):
    target, rows = D0_CASES[case]
    ga, gb, gd = (torch.Generator().manual_seed(s) for s in (11, 11, 12))
    for _ in range(1500):
        k = int(torch.randint(0, 4, (1,), generator=gd))  # draft lengths 0..3
        if rows is None:
            draft = Draft(tuple(torch.randint(0, V, (k,), generator=gd).tolist()))  # right, wrong and cut tokens
        else:
            draft = Draft(tuple(int(torch.multinomial(rows[i], 1, generator=gd)) for i in range(k)), rows[:k])
        a = verify_sampling(draft, target[: k + 1], ga)
        b = verify_mentored(draft, target[: k + 1], gb, 0.0)
        assert b.draft is a.draft and (b.accepted, b.tokens, b.kl) == (a.accepted, a.tokens, 0.0)
        assert torch.equal(ga.get_state(), gb.get_state())


def test_random_numbers_are_consumed_as_in_speculative_sampling_for_any_bound():
    # k uniforms, then one sample: a lossy verdict leaves the generator where the exact one would.
    target = torch.stack([P1, P2, P2])
    ga, gb, gd = (torch.Generator().manual_seed(s) for s in (3, 3, 4))
    differ = 0
    for _ in range(500):
        draft = Draft(tuple(int(torch.multinomial(Q_FAR, 1, generator=gd)) for _ in range(2)), torch.stack([Q_FAR] * 2))
        a = verify_sampling(draft, target, ga)
        b = verify_mentored(draft, target, gb, 0.3)
        assert torch.equal(ga.get_state(), gb.get_state())
        differ += a.tokens != b.tokens
    assert differ > 50


def test_verdict_kl_sums_the_positions_decided():
    target = torch.stack([P1, P2, P1, P2])
    draft = Draft((3, 4, 0))  # point masses
    per_position = [mentor(target[i], onehot(x), 0.1).kl for i, x in enumerate(draft.tokens)]
    assert all(0 < kl <= 0.1 + 1e-9 for kl in per_position)
    g = torch.Generator().manual_seed(0)
    seen = set()
    for _ in range(300):
        v = verify_mentored(draft, target, g, 0.1)
        decided = min(v.accepted + 1, len(draft))  # accepted positions + the rejected one; the bonus adds 0
        assert v.kl == pytest.approx(sum(per_position[:decided]), abs=1e-9)
        seen.add(v.accepted)
    assert seen == {0, 1, 2, 3}


# -- edge cases ---------------------------------------------------------------------------------------


def test_target_support_is_kept():
    # top-k removed tokens 2 and 3; KL(p || q) = 1.6 <= 5, but q's mass there must not be emitted
    p = torch.tensor([0.6, 0.4, 0.0, 0.0])
    q = torch.tensor([0.1, 0.1, 0.5, 0.3])
    m = mentor(p, q, 5.0)
    assert not m.draft_itself
    pi = m.pi(p.double(), q.double())
    assert pi[2:].tolist() == [0.0, 0.0] and float(pi.sum()) == pytest.approx(1.0)
    g = torch.Generator().manual_seed(0)
    for _ in range(300):
        v = verify_mentored(Draft((2,), q[None]), torch.stack([p, p]), g, 5.0)
        assert v.accepted == 0 and v.tokens[0] in (0, 1)
        v = verify_mentored(Draft((3,)), torch.stack([p, p]), g, 5.0)  # a point mass on a removed token
        assert v.accepted == 0 and v.tokens[0] in (0, 1) and v.kl == 0.0


def test_draft_token_with_zero_draft_probability_is_accepted_where_the_target_allows_it():
    # Q_ZERO gives token 0 no probability; the ratio p/q is infinite, so it is accepted whatever D
    g = torch.Generator().manual_seed(0)
    for bound in (0.0, 0.1):
        for _ in range(100):
            assert verify_mentored(Draft((0,), Q_ZERO[None]), torch.stack([P1, P2]), g, bound).accepted == 1


def test_zero_residual_falls_back_to_the_emitted_distribution():
    # p == q, and the draft token is outside both supports: rejected, and max(0, pi - q) is zero
    p = torch.tensor([0.5, 0.5, 0.0, 0.0])
    g = torch.Generator().manual_seed(0)
    tokens = set()
    for bound in (0.0, 0.1):
        for _ in range(100):
            v = verify_mentored(Draft((2,), p[None]), torch.stack([p, p]), g, bound)
            assert v.accepted == 0 and v.kl == 0.0
            tokens.add(v.tokens[0])
    assert tokens == {0, 1}


@pytest.mark.parametrize("bound", [-0.5, -1e-9, float("nan"), float("inf"), float("-inf"), True, "0.1", None])
def test_verify_mentored_rejects_a_bad_bound_before_any_work(bound):
    g = torch.Generator().manual_seed(0)
    state = g.get_state()
    with pytest.raises(QuickdraftError, match="finite number >= 0"):
        verify_mentored(Draft((0,)), torch.stack([P1, P1]), g, bound)
    assert torch.equal(g.get_state(), state)  # no random number drawn


# -- through the engine, API and CLI -----------------------------------------------------------------


def test_engine_and_api():
    # Whole engine, Markov target and draft: mentored reports the KL it used, within the bound per token,
    # accepts more than exact, and with D = 0 gives the same tokens as exact under the same seed.
    g = torch.Generator().manual_seed(5)
    Vm = 5
    table = torch.randn(Vm, Vm, generator=g) * 1.5
    other = table + torch.randn(Vm, Vm, generator=g) * 2.0
    prompt = [0, 1, 2]

    def run(acceptance, seed):
        s = SamplingParams(temperature=1.0, seed=seed)
        d = DraftModelDrafter(MarkovRunner(other), Vm, s, DraftModelConfig(k=4, min_confidence=0, min_joint=0))
        stats = Stats()
        out = [t for st in generate(MarkovRunner(table), prompt, Limits(40), d, stats=stats, sampling=s,
                                    acceptance=acceptance) for t in st.tokens]
        return out, stats

    exact_acc = lossy_acc = 0
    for seed in range(25):
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
        ({"acceptance": "mentored", "kl_bound": -1, "sampling": SamplingParams(1.0)},
         "kl_bound must be a finite number >= 0"),
        ({"acceptance": "mentored", "kl_bound": float("nan"), "sampling": SamplingParams(1.0)}, "finite"),
        ({"acceptance": "lossy", "sampling": SamplingParams(1.0)}, "acceptance must be one of exact, mentored, typical"),
        ({"kl_bound": 0.2, "sampling": SamplingParams(1.0)}, "applies to acceptance 'mentored' only"),
    ],
)
def test_bad_acceptance_options_fail_before_any_work(options, message):
    tok = ByteTokenizer()
    gen = Generator(ScriptedRunner(tok.encode("abc"), 257, tok.eos), tok)
    with pytest.raises(QuickdraftError, match=message):
        gen.stream("hi", **options)
    assert gen.runner.passes == 0


def test_cli_mentored(tiny_folder, capsys):
    from test_api_cli import run_cli

    code, out, err = run_cli(capsys, "generate", "--model", str(tiny_folder), "--draft-model", str(tiny_folder),
                             "--draft-precision", "fp32", "--temperature", "0.9", "--seed", "1", "--acceptance",
                             "mentored", "--kl-bound", "0.05", "--max-new-tokens", "20", "zzz")
    assert code == 0, err
    assert "LOSSY: mentored" in err
    code, _, err = run_cli(capsys, "generate", "--model", str(tiny_folder), "--acceptance", "mentored", "zzz")
    assert code == 2 and "needs kl_bound (CLI: --kl-bound D)" in err
    code, _, err = run_cli(capsys, "generate", "--model", str(tiny_folder), "--acceptance", "mentored",
                           "--kl-bound", "0.1", "zzz")
    assert code == 2 and "with greedy decoding" in err


def test_kl_counts_only_the_positions_emitted():
    """A draft accepted past EOS (drafts never run past the token limit): the positions after it are not the
    output's, nor is their KL. The stats count the emitted tokens' positions alone, so the KL per output token stays
    within the bound even for the shortest answers (summed over every decided position, a 1-token answer ended by
    EOS inside a 4-token accepted draft could report up to 4 D)."""
    g = torch.Generator().manual_seed(3)
    Vm, bound = 5, 0.3
    table = torch.randn(Vm, Vm, generator=g) * 1.5
    other = table + torch.randn(Vm, Vm, generator=g) * 2.0
    spent = []
    for seed in range(60):
        s = SamplingParams(temperature=1.0, seed=seed)
        d = DraftModelDrafter(MarkovRunner(other), Vm, s, DraftModelConfig(k=4, min_confidence=0, min_joint=0))
        stats, kls = Stats(), []
        for st in generate(MarkovRunner(table), [0, 1, 2], Limits(40, frozenset({4})), d, stats=stats, sampling=s,
                           acceptance=Acceptance("mentored", bound)):
            kls.append(sum(st.verdict.kls[: len(st.tokens)]))
            spent.append(sum(st.verdict.kls) - kls[-1])
        assert stats.kl == pytest.approx(sum(kls), abs=1e-12)
        assert stats.kl <= bound * stats.completion_tokens + 1e-9
    assert max(spent) > bound  # decided positions past the end did spend KL, which the stats leave out
