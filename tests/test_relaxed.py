"""The lossy acceptance rules people use today (acceptance/relaxed.py): typical acceptance (Medusa) and
acceptance thresholds (SGLang), on worked examples, statistically where they draw, and marked lossy."""

from __future__ import annotations

import math

import pytest
import torch

from conftest import MarkovRunner, assert_follows
from quickdraft.acceptance import Acceptance, verify, verify_sampling, verify_threshold, verify_typical
from quickdraft.acceptance.relaxed import typical_threshold
from quickdraft.core import Draft, Stats
from quickdraft.drafters.draft_model import DraftModelConfig, DraftModelDrafter
from quickdraft.engine import Limits, generate
from quickdraft.errors import QuickdraftError
from quickdraft.sampling import SamplingParams

N = 20000


def test_typical_threshold_worked_examples():
    assert typical_threshold(torch.full((4,), 0.25), 0.09, 0.3) == pytest.approx(0.075)  # 0.3 / 4
    peaked = torch.tensor([0.97, 0.01, 0.01, 0.01])
    h = -(0.97 * math.log(0.97) + 3 * 0.01 * math.log(0.01))
    assert typical_threshold(peaked, 0.09, 0.3) == pytest.approx(min(0.09, 0.3 * math.exp(-h)))
    assert typical_threshold(torch.tensor([1.0, 0.0]), 0.09, 0.3) == pytest.approx(0.09)  # H = 0: epsilon


def test_typical_keeps_plausible_tokens_the_exact_rule_would_often_reject():
    # p = (0.2, 0.3, 0.5): H = 1.03, threshold min(0.09, 0.3 e^-1.03 = 0.107) = 0.09. Token 0 (p 0.2)
    # drafted by a draft that was sure of it (q = 1): the exact rule keeps it 20 % of the time, typical always.
    p = torch.tensor([[0.2, 0.3, 0.5], [0.6, 0.2, 0.2]])
    draft = Draft((0,), probs=torch.tensor([[1.0, 0.0, 0.0]]))
    g = torch.Generator().manual_seed(0)
    assert all(verify_typical(draft, p, g, 0.09, 0.3).accepted == 1 for _ in range(200))
    exact = sum(verify_sampling(draft, p, g).accepted for _ in range(2000)) / 2000
    assert 0.15 < exact < 0.25


def test_typical_rejects_below_the_threshold_and_draws_the_bonus_from_the_target():
    p = torch.tensor([[0.05, 0.45, 0.5], [1 / 3, 1 / 3, 1 / 3]])  # threshold 0.09 at row 0: token 0 rejected
    draft = Draft((0,))
    g = torch.Generator().manual_seed(1)
    counts = torch.zeros(3)
    for _ in range(N):
        v = verify_typical(draft, p, g, 0.09, 0.3)
        assert v.accepted == 0
        counts[v.bonus] += 1
    assert_follows(counts, p[0])  # p itself, the rejected token included (not the exact rule's residual)


def test_threshold_with_no_relaxation_is_speculative_sampling_with_the_same_random_numbers():
    g = torch.Generator().manual_seed(2)
    for case in range(200):
        k, V = 3, 6
        p = torch.softmax(torch.randn(k + 1, V, generator=g) * 2, -1)
        q = torch.softmax(torch.randn(k, V, generator=g) * 2, -1)
        tokens = tuple(int(torch.multinomial(q[i], 1, generator=g)) for i in range(k))
        draft = Draft(tokens, probs=q)
        a = verify_sampling(draft, p, torch.Generator().manual_seed(case))
        b = verify_threshold(draft, p, torch.Generator().manual_seed(case), 1.0, 1.0)
        assert (a.accepted, a.tokens) == (b.accepted, b.tokens)


def test_threshold_single_and_relaxed_ratio():
    p = torch.tensor([[0.55, 0.25, 0.2], [0.5, 0.5, 0.0]])
    sure = Draft((0,), probs=torch.tensor([[1.0, 0.0, 0.0]]))  # exact: kept 55 % of the time
    g = torch.Generator().manual_seed(3)
    assert all(verify_threshold(sure, p, g, 0.5, 1.0).accepted == 1 for _ in range(200))  # p(0) >= t_single
    unsure = Draft((1,), probs=torch.tensor([[0.0, 1.0, 0.0]]))  # p(1) = 0.25: exact 25 %, t_acc 0.5 -> 50 %
    rate = sum(verify_threshold(unsure, p, g, 1.0, 0.5).accepted for _ in range(N)) / N
    assert abs(rate - 0.5) < 4 * math.sqrt(0.25 / N)


def test_acceptance_options_are_checked():
    assert Acceptance("typical").lossy and Acceptance("threshold", t_single=0.5).lossy
    assert not Acceptance("threshold").lossy and not Acceptance().lossy  # thresholds at 1: speculative sampling
    for kwargs, message in [({"rule": "typical", "kl_bound": 0.1}, "kl_bound applies to acceptance 'mentored'"),
                            ({"rule": "exact", "epsilon": 0.2}, "epsilon applies to acceptance 'typical'"),
                            ({"rule": "threshold", "t_acc": 0.0}, r"t_acc must be in \(0, 1\]"),
                            ({"rule": "threshold", "t_acc": 1.5}, r"t_acc must be in \(0, 1\]"),
                            ({"rule": "typical", "delta": -1.0}, "delta must be a finite number >= 0")]:
        with pytest.raises(QuickdraftError, match=message):
            Acceptance(**kwargs)
    for rule in ("typical", "threshold"):
        with pytest.raises(QuickdraftError, match="with greedy decoding"):
            Acceptance(rule).check(SamplingParams())
    with pytest.raises(QuickdraftError, match="linear drafts only"):
        verify(Draft((1, 2), parents=(-1, -1)), torch.zeros(3, 4), SamplingParams(1.0), Acceptance("typical"), None)


@pytest.mark.parametrize("rule", ["typical", "threshold"])
def test_engine_marks_the_run_lossy_and_accepts_more(rule):
    g = torch.Generator().manual_seed(5)
    V = 5
    table = torch.randn(V, V, generator=g) * 1.5
    other = table + torch.randn(V, V, generator=g) * 2.0
    acceptance = Acceptance("typical") if rule == "typical" else Acceptance("threshold", t_single=0.3, t_acc=0.5)

    def run(a, seed):
        s = SamplingParams(temperature=1.0, seed=seed)
        d = DraftModelDrafter(MarkovRunner(other), V, s, DraftModelConfig(k=4, min_confidence=0, min_joint=0))
        stats = Stats()
        list(generate(MarkovRunner(table), [0, 1, 2], Limits(40), d, stats=stats, sampling=s, acceptance=a))
        return stats

    exact = sum(run(Acceptance(), seed).accepted_prediction_tokens for seed in range(20))
    stats = [run(acceptance, seed) for seed in range(20)]
    assert all(s.as_dict()["lossy"] is True and s.as_dict()["acceptance"] == rule for s in stats)
    assert sum(s.accepted_prediction_tokens for s in stats) > 1.1 * exact
