"""Draft sizing (sizing.py): the cap from pass costs and acceptance, and that it never changes output."""

from __future__ import annotations

import random

import pytest

from quickdraft.api import Generator
from quickdraft.drafters.ngram import LookupConfig, PromptLookupDrafter
from quickdraft.drafters.prediction import PredictionConfig, PredictionDrafter
from quickdraft.engine import Limits, generate
from quickdraft.errors import QuickdraftError
from quickdraft.runners.hf import HFRunner
from quickdraft.sizing import DraftSizer, sizing_for
from quickdraft.tokenizer import ByteTokenizer


def sizer_with(a: float | None, ratio: float | None, source: str = "lookup", weight: int = 1) -> DraftSizer:
    """A sizer (no decay) that has seen acceptance rate a for source and passes costing 1 + ratio * (n - 1)."""
    s = DraftSizer(decay=1.0, min_evidence=1.0)

    def record(src: str, drafted: int, accepted: int) -> None:  # every pass costs what the line says
        s.record(src, drafted, accepted, drafted + 1, 1.0 + (ratio or 0.0) * drafted if ratio is not None else 1.0)

    if ratio is not None:
        for _ in range(weight):
            record("none", 0, 0)
            record("none", 10, 0)
    if a is not None:  # 1000 tries: A accepted tokens, R rejections (one per pass that had one); needs ratio
        assert ratio is not None
        A = round(a * 1000)
        R = 1000 - A
        for _ in range(weight):
            if R == 0:
                record(source, 1000, 1000)
            for i in range(R):
                n = A // R + (i < A % R)
                record(source, n + 1, n)
    return s


def brute_force_cap(a: float, ratio: float, budget: int) -> int:
    values = [sum(a ** i for i in range(k + 1)) / (1 + ratio * k) for k in range(budget + 1)]
    return max(range(budget + 1), key=lambda k: (values[k], -k))


@pytest.mark.parametrize("a, ratio, want", [(0.5, 0.65, 0), (0.9, 0.65, 2), (0.99, 0.65, 9), (0.9, 0.06, 12),
                                             (1.0, 0.65, 40)])
def test_worked_examples_of_the_docstring(a, ratio, want):
    s = sizer_with(a, ratio)
    assert s.acceptance("lookup") == pytest.approx(a, abs=1e-3)
    assert s.cost_ratio() == pytest.approx(ratio, rel=1e-3)
    assert s.cap("lookup", 40) == want


def test_cap_is_the_best_length_by_brute_force():
    rng = random.Random(0)
    for _ in range(300):
        a, ratio, budget = rng.choice([0.0, 0.3, 0.7, 0.9, 0.97, 0.999]), rng.uniform(0.0, 1.2), rng.randint(1, 64)
        s = sizer_with(a, ratio)
        got = s.cap("lookup", budget)
        if brute_force_cap(a, ratio, budget) == 0:
            assert got in (0, 1)  # 1 only as a probe
        else:
            assert got == brute_force_cap(s.acceptance("lookup"), s.cost_ratio(), budget)


def test_no_cap_before_there_is_evidence():
    assert DraftSizer().cap("lookup", 24) == 24
    assert sizer_with(None, 0.65).cap("lookup", 24) == 24  # costs known, this source never drafted
    one_size = DraftSizer(decay=1.0, min_evidence=1.0)
    one_size.record("lookup", 10, 2, 11, 0.5)  # one pass size only: the slope is unknown
    assert one_size.cost_ratio() is None and one_size.cap("lookup", 24) == 24
    assert DraftSizer().cap("lookup", 0) == 0 and DraftSizer().cap("lookup", -3) == 0


def test_a_source_capped_to_nothing_is_probed_with_one_token():
    s = sizer_with(0.3, 0.65)
    caps = [s.cap("lookup", 24) for _ in range(24)]
    assert caps == ([0] * 7 + [1]) * 3


def test_cost_fit_follows_the_runner_and_decays():
    s = DraftSizer(decay=0.9, min_evidence=1.0)
    for n in (1, 5, 17, 1, 9, 33) * 5:
        s.record("x", 0, 0, n, 0.02 + 0.01 * (n - 1))
    assert s.cost_ratio() == pytest.approx(0.5, rel=1e-6)
    for n in (1, 5, 17, 1, 9, 33) * 40:  # the machine got busy: passes cost twice as much per extra token
        s.record("x", 0, 0, n, 0.02 + 0.02 * (n - 1))
    assert s.cost_ratio() == pytest.approx(1.0, rel=1e-3)


def test_acceptance_counts_a_rejection_as_one_failed_try():
    s = DraftSizer(decay=1.0, min_evidence=1.0)
    s.record("p", 8, 8, 9, 0.1)  # all 8 accepted: 8 tries, 8 successes
    s.record("p", 8, 3, 9, 0.1)  # 3 accepted then a rejection: 4 tries
    assert s.acceptance("p") == pytest.approx(11 / 12)
    s.record("p", 0, 0, 1, 0.1)  # an empty draft says nothing about acceptance
    assert s.acceptance("p") == pytest.approx(11 / 12)


def test_bad_choice_is_refused():
    with pytest.raises(QuickdraftError, match="draft_sizing must be one of auto, cost, off; got 'fast'"):
        sizing_for(object(), "fast")
    assert sizing_for(object(), "auto") is False and sizing_for(object(), "cost") is True


# -- through the engine -----------------------------------------------------------------------------

class RecordingRunner(HFRunner):
    """Remembers the length of every pass (draft + 1)."""

    def forward(self, tokens):
        self.passes.append(len(tokens))
        return super().forward(tokens)


@pytest.mark.parametrize("a, ratio, most", [(0.3, 0.65, 1), (0.9, 0.65, 2), (0.999, 0.0, 64)])
def test_capped_drafts_keep_the_output_exact(tiny, a, ratio, most):
    runner = RecordingRunner(tiny)
    prompt = [5, 6, 7, 8] * 6 + list(range(20, 60)) + [5, 6, 7]
    runner.passes = []
    plain = [t for step in generate(runner, prompt, Limits(60)) for t in step.tokens]
    prediction = plain[:20] + [1] + plain[21:]
    for drafter in (PromptLookupDrafter(LookupConfig(num_tokens=24, single_match_tokens=8)),
                    PredictionDrafter(prediction, PredictionConfig())):
        source = "lookup" if isinstance(drafter, PromptLookupDrafter) else "prediction"
        sizer = sizer_with(a, ratio, source=source, weight=1000)  # the timings of this run barely move it
        runner.passes = []
        out = [t for step in generate(runner, prompt, Limits(60), drafter, sizer=sizer) for t in step.tokens]
        assert out == plain
        assert max(runner.passes) - 1 <= most, (source, runner.passes)
        assert max(runner.passes) > 1  # it did draft (at least the probes)


def test_auto_sizing_follows_the_runner(tiny):
    gen = Generator(HFRunner(tiny), ByteTokenizer(), name="tiny")
    assert gen.stream("abc", max_new_tokens=2).sizer is None
    assert gen.stream("abc", max_new_tokens=2, draft_sizing="cost").sizer is not None
    gen.runner.draft_sizing = "cost"
    s = gen.stream("abc", max_new_tokens=2)
    assert s.sizer is not None and s.sizer.cost is gen.pass_cost  # costs are kept across requests
    with pytest.raises(QuickdraftError, match="draft_sizing must be one of"):
        gen.stream("abc", draft_sizing="sometimes")

