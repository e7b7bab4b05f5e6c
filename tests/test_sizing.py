"""Draft sizing (sizing.py): the cap from pass costs and acceptance, and that it never changes output."""

from __future__ import annotations

import math
import random

import pytest
import torch

from quickdraft.api import Generator
from quickdraft.core import Draft
from quickdraft.drafters.base import NoDrafter
from quickdraft.drafters.lookup import LookupConfig, PromptLookupDrafter
from quickdraft.drafters.prediction import PredictionConfig, PredictionDrafter
from quickdraft.engine import Limits, generate
from quickdraft.errors import QuickdraftError
from quickdraft.runners.hf import HFRunner
from quickdraft.sizing import DraftSizer, PassCosts, best_length, block_fit, sizing_for
from quickdraft.tokenizer import ByteTokenizer

from conftest import MarkovRunner


def sizer_with(a: float | None, ratio: float | None, source: str = "lookup", weight: int = 1,
               one_rate: bool = False) -> DraftSizer:
    """A sizer (no decay) that has seen acceptance rate a for source and passes costing 1 + ratio * (n - 1).
    one_rate: every source sized by one rate (no DraftSizer.two_phase), so that `a` alone decides the cap."""
    s = DraftSizer(decay=1.0, min_evidence=1.0, **({"two_phase": frozenset()} if one_rate else {}))

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
    for n in (11, 25, 41):  # measured, interpolated, extended past the largest size
        assert s.costs.seconds(n) / s.costs.seconds(1) == pytest.approx(1 + ratio * (n - 1), rel=1e-6)
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
            assert got == brute_force_cap(s.acceptance("lookup"), ratio, budget)


def test_no_cap_before_there_is_evidence():
    assert DraftSizer().cap("lookup", 24) == 24
    assert sizer_with(None, 0.65).cap("lookup", 24) == 24  # costs known, this source never drafted
    one_size = DraftSizer(decay=1.0, min_evidence=1.0)
    one_size.record("lookup", 10, 2, 11, 0.5)  # one pass size only: the slope is unknown
    assert one_size.costs.seconds(1) is None and one_size.cap("lookup", 24) == 24
    assert DraftSizer().cap("lookup", 0) == 0 and DraftSizer().cap("lookup", -3) == 0


def test_short_matches_are_capped_at_their_prior_before_any_evidence():
    """Prompt lookup's short matches ("lookup-short") start at their prior rate (0.3), other sources uncapped: where a
    pass of 5 tokens costs 3.6 single-token passes (llama.cpp-like) none is sent; where it costs about one, a few are;
    once its own tries count, its own rate decides."""
    steep, flat = sizer_with(None, 0.65), sizer_with(None, 0.01)
    assert steep.cap("lookup-short", 4) == 0 and steep.cap("lookup", 24) == 24
    assert 2 <= flat.cap("lookup-short", 4) <= 4
    for _ in range(10):
        steep.record("lookup-short", 4, 4, 5, 1.0 + 0.65 * 4)
    assert steep.acceptance("lookup-short") == 1.0 and steep.cap("lookup-short", 4) == 4
    assert DraftSizer(priors={}).acceptance("lookup-short") is None
    one_size = DraftSizer()
    one_size.record("none", 0, 0, 1, 1.0)  # one pass size measured: no cost curve yet, so no cap, prior or not
    assert one_size.cap("lookup-short", 4) == 4


def test_a_source_capped_to_nothing_is_probed_with_one_token():
    s = sizer_with(0.3, 0.65)
    caps = [s.cap("lookup", 24) for _ in range(24)]
    assert caps == ([0] * 7 + [1]) * 3


def test_pass_costs_measured_interpolated_and_extended():
    c = PassCosts(decay=1.0)
    assert c.seconds(1) is None
    c.record(4, 0.4)
    assert c.seconds(4) == 0.4 and c.seconds(1) is None  # one size: nothing to interpolate from
    c.record(4, 0.6)
    c.record(8, 1.3)
    c.record(16, 1.5)
    assert c.seconds(4) == pytest.approx(0.5)  # the mean of its passes
    assert c.seconds(6) == pytest.approx(0.9)  # between 4 and 8
    assert c.seconds(12) == pytest.approx(1.4)
    assert c.seconds(32) == pytest.approx(1.9)  # the slope of 8..16, extended
    # below the smallest size the line of 4..8 would give 0.3 and 0.1: never cheaper than in proportion to t(4)
    assert c.seconds(3) == pytest.approx(0.375) and c.seconds(2) == pytest.approx(0.25)
    flat = PassCosts(decay=1.0)
    flat.record(4, 1.0)
    flat.record(8, 1.2)
    assert flat.seconds(2) == pytest.approx(0.9)  # the line, above the proportional 0.5
    falling = PassCosts(decay=1.0)
    falling.record(1, 1.0)
    falling.record(2, 3.0)
    falling.record(4, 2.0)
    assert falling.seconds(3) == pytest.approx(2.5) and falling.seconds(8) == pytest.approx(2.0)  # never cheaper past 4


def test_tree_passes_are_costed_apart_from_linear_ones():
    c = PassCosts(decay=1.0)
    c.record(1, 1.0)
    c.record(17, 2.0)
    assert c.seconds(17, tree=True) == pytest.approx(2.0)  # no tree measured yet: a linear pass's cost
    c.record(17, 3.0, tree=True)
    assert c.seconds(17, tree=True) == pytest.approx(3.0) and c.seconds(17) == pytest.approx(2.0)
    assert c.seconds(9, tree=True) == pytest.approx(1.5)  # one tree size: other sizes still linear
    c.record(9, 2.0, tree=True)
    assert c.seconds(13, tree=True) == pytest.approx(2.5)  # two tree sizes: their own line
    assert c.seconds(13) == pytest.approx(1.75)


def test_pass_costs_decay_follows_the_machine():
    c = PassCosts(decay=0.9)
    for _ in range(5):
        for n in (1, 5, 17):
            c.record(n, 0.02 + 0.01 * (n - 1))
    assert c.seconds(17) / c.seconds(1) == pytest.approx(9.0)
    for _ in range(60):  # the machine got busy: passes cost twice as much per extra token
        for n in (1, 5, 17):
            c.record(n, 0.02 + 0.02 * (n - 1))
    assert c.seconds(17) / c.seconds(1) == pytest.approx(17.0, rel=1e-2)


# What qwen2.5-coder-0.5B passes cost on this project's AMD machine in float32 (transformers), relative to one token
AMD = {1: 1.0, 2: 1.94, 3: 3.05, 4: 2.42, 5: 2.39, 8: 2.43, 11: 3.04, 16: 3.08, 25: 3.75, 33: 3.97}


@pytest.mark.parametrize("a, want", [(0.5, 0), (0.6, 7), (0.9, 15), (0.999, 32)])
def test_cap_follows_measured_costs_that_are_not_a_line(a, want):
    """The docstring's AMD example: 2 draft tokens (a pass of 3) cost more than 3 to 7 do."""
    s = DraftSizer(decay=1.0, min_evidence=1.0, costs=PassCosts(decay=1.0))
    for n, t in AMD.items():
        s.costs.record(n, t)
    s._acceptance["lookup"] = [1000 * a, 1000.0]  # 1000 tries, as counted by record()
    values = {k: sum(a ** i for i in range(k + 1)) / s.costs.seconds(k + 1) for k in range(0, 33)}
    assert values[2] < values[0] < values[3] or a != 0.9
    assert s.cap("lookup", 32) == want == max(values, key=lambda k: (values[k], -k))


@pytest.mark.parametrize("a, d, want", [(0.9, 0.0, 15), (0.9, 0.03, 15), (0.9, 0.15, 7), (0.6, 0.0, 7), (0.6, 0.03, 0)])
def test_drafting_time_counts_against_the_draft(a, d, want):
    """A draft model's tokens are not free: each costs d (in units of a one-token pass), measured from
    the drafter's time per draft token. With AMD pass costs, a = 0.6: 7 free tokens barely pay
    (2.46 / 2.43 = 1.01), at 0.03 each they do not (2.46 / 2.64 = 0.93); a = 0.9: 0.15 per token halves
    the best length."""
    s = DraftSizer(decay=1.0, min_evidence=1.0, costs=PassCosts(decay=1.0))
    for n, t in AMD.items():
        s.costs.record(n, t)
    s._acceptance["draft-model"] = [1000 * a, 1000.0]
    s._drafting["draft-model"] = [100.0, 100 * d]
    assert s.draft_seconds("draft-model") == pytest.approx(d)
    values = {k: sum(a ** i for i in range(k + 1)) / (s.costs.seconds(k + 1) + k * d) for k in range(0, 33)}
    assert s.cap("draft-model", 32) == want == max(values, key=lambda k: (values[k], -k))


def test_drafting_time_is_measured_per_draft_token():
    s = DraftSizer(decay=1.0, min_evidence=1.0)
    assert s.draft_seconds("draft-model") == 0.0  # nothing drafted yet: no cost known
    s.record("draft-model", 8, 8, 9, 0.5, draft_seconds=0.4)
    s.record("draft-model", 2, 0, 3, 0.3, draft_seconds=0.2)
    s.record("draft-model", 0, 0, 1, 0.1, draft_seconds=0.05)  # nothing drafted: not a per-token cost
    assert s.draft_seconds("draft-model") == pytest.approx(0.6 / 10)
    assert s.draft_seconds("lookup") == 0.0


def test_acceptance_counts_a_rejection_as_one_failed_try():
    s = DraftSizer(decay=1.0, min_evidence=1.0)
    s.record("p", 8, 8, 9, 0.1)  # all 8 accepted: 8 tries, 8 successes
    s.record("p", 8, 3, 9, 0.1)  # 3 accepted then a rejection: 4 tries
    assert s.acceptance("p") == pytest.approx(11 / 12)
    s.record("p", 0, 0, 1, 0.1)  # an empty draft says nothing about acceptance
    assert s.acceptance("p") == pytest.approx(11 / 12)


def test_a_prediction_is_sized_by_two_rates():
    """A prediction's drafts are right or wrong in runs: after drafts wholly right the cap follows P(later), not the
    one rate that its wrong drafts pull down. Passes cost 1 + 0.06 (n - 1); history: drafts of 8 wholly wrong or
    right, runs of 40 right tokens in full, and one run that broke after 60. One rate: 236 of 239 tokens tried
    accepted (0.987) -> cap 44; two rates after a draft right in full: P(first) 4 of 5 such drafts, P(later) 229
    of 230 -> cap 78."""
    def sizer(two_phase: frozenset[str]) -> DraftSizer:
        s = DraftSizer(decay=1.0, min_evidence=1.0, two_phase=two_phase, costs=PassCosts(decay=1.0))
        for n in (1, 11, 41):
            s.costs.record(n, 1 + 0.06 * (n - 1))
        for drafted, accepted in [(8, 0), (8, 8), (40, 40), (8, 0), (8, 8), (40, 40), (80, 60), (40, 40), (40, 40)]:
            s.record("prediction", drafted, accepted, drafted + 1, 1 + 0.06 * drafted)
        return s

    t = lambda k: 1 + 0.06 * k  # noqa: E731  a pass with a k-token draft
    one, two = sizer(frozenset()), sizer(frozenset({"prediction"}))
    a = one.acceptance("prediction")
    assert a == pytest.approx(236 / 239)
    assert one.cap("prediction", 128) == best_length([a] * 128, t) == 44
    rates = two._phases["prediction"][0].rates(True)  # the last draft was right in full: running
    assert rates == pytest.approx((0.8, 229 / 230))
    assert two.cap("prediction", 128) == best_count(draft_gains(rates, 128), t) == 78
    assert two.cap("lookup", 128) == 128  # another source: one rate, none measured yet


def test_bad_choice_is_refused():
    with pytest.raises(QuickdraftError, match="draft_sizing must be one of auto, cost, off; got 'fast'"):
        sizing_for(object(), "fast")
    assert sizing_for(object(), "auto") is True and sizing_for(object(), "cost") is True
    assert sizing_for(object(), "off") is False


# -- drafts rated by their drafter (a draft model's confidences) -------------------------------------

def rated(confidence, source="draft-model", sampled=False) -> Draft:
    """A draft with these confidences; sampled: with distributions (Draft.probs), as under sampling."""
    import torch

    n = len(confidence)
    return Draft(tokens=tuple(range(10, 10 + n)), probs=torch.full((n, 32), 1 / 32) if sampled else None,
                 source=source, forwards=n + 1, confidence=tuple(confidence))


def brute_force_trim(confidence, ratio: float) -> int:
    """sizer_with measures passes of 1 and 11 tokens: past 11 a pass is priced as one of 11 (optimistic)."""
    values = [sum(math.prod(confidence[:j]) for j in range(k + 1)) / (1 + ratio * min(k, 10))
              for k in range(len(confidence) + 1)]
    return max(range(len(values)), key=lambda k: (values[k], -k))


def test_trim_worked_example():
    s = sizer_with(None, 0.65)
    # E/t: k=1 1.95/1.65 = 1.18, k=2 2.805/2.3 = 1.22, k=3 2.976/2.95 = 1.01
    d = s.trim(rated([0.95, 0.9, 0.2]))
    assert d.tokens == (10, 11) and d.confidence == (0.95, 0.9) and d.source == "draft-model"


def test_trim_is_the_best_prefix_by_brute_force():
    rng = random.Random(1)
    for _ in range(300):
        ratio = rng.choice([0.06, 0.3, 0.65, 1.0])
        confidence = [rng.random() ** rng.choice([0.1, 0.5, 1.0]) for _ in range(rng.randint(1, 20))]
        s = sizer_with(None, ratio)
        assert len(s.trim(rated(confidence))) == brute_force_trim(confidence, ratio), (ratio, confidence)


def test_causal_length_worked_example_of_its_docstring():
    from quickdraft.sizing import causal_length

    def seconds(k: int) -> float:  # t(1) = 1, t(2) = t(3) = 1.65
        return 1.0 if k == 0 else 1.65

    assert causal_length([0.5], seconds, horizon=1) == 0
    assert causal_length([0.5], seconds, horizon=2) == 1
    assert causal_length([0.5, 0.1], seconds, horizon=2) == 1  # the first token kept, the doubtful second cut


def test_a_sampled_draft_is_trimmed_by_a_horizon_that_its_length_does_not_set():
    """Under sampling the trim looks ahead as far as the longest pass measured, whether the draft model
    drafted 1 token or 5: the kept prefix of a draft is the same as that of the same draft cut shorter."""
    s = DraftSizer()
    for n, t in ((1, 1.0), (2, 1.65), (6, 1.65)):
        s.costs.record(n, t)
    for confidence in ([0.5, 0.5, 0.5, 0.5, 0.5], [0.6, 0.3, 0.9, 0.2, 0.8], [0.3] * 5, [0.9] * 5):
        whole = len(s.trim(rated(confidence, sampled=True)))
        for n in range(1, len(confidence) + 1):
            assert len(s.trim(rated(confidence[:n], sampled=True))) == min(whole, n), (confidence, n)


def test_trim_waits_for_measured_costs():
    d = rated([0.1, 0.1])
    assert DraftSizer().trim(d) is d
    assert sizer_with(None, 0.65).trim(Draft((5, 6), source="lookup")).tokens == (5, 6)  # not rated: not trimmed


def test_a_draft_worth_nothing_is_dropped_and_its_source_paused():
    s = sizer_with(None, 0.65)
    pauses = []
    for _ in range(6):
        d = s.trim(rated([0.3, 0.9]))  # E(1) = 1.3 < t(2) = 1.65, E(2) = 1.57 < t(3) = 2.3
        assert len(d) == 0 and d.source == "draft-model" and d.forwards == 3  # its forwards were spent
        caps = []
        while (cap := s.cap("draft-model", 10)) == 0:
            caps.append(cap)
        assert cap == 10
        pauses.append(len(caps))
    assert pauses == [1, 2, 4, 8, 8, 8]
    assert len(s.trim(rated([0.99] * 5))) == 5  # worth sending: the pause starts again from 1
    s.trim(rated([0.1]))
    assert [s.cap("draft-model", 10) for _ in range(2)] == [0, 10]


def test_a_rated_source_is_not_capped_beforehand():
    s = sizer_with(0.3, 0.65, source="draft-model")
    s.min_yield_evidence = math.inf  # its passes' measured yield is another rule (tested below)
    assert s.cap("draft-model", 10) == 0  # by its rate over the request, nothing pays
    s.trim(rated([0.99] * 8))
    assert s.cap("draft-model", 10) == 10  # rated drafts are trimmed afterwards instead


def test_a_rated_source_whose_passes_yield_less_than_plain_ones_is_skipped():
    """Measured yield: confident drafts that keep being rejected while the draft model's forwards cost real
    time yield 1 token per 2.1 s against 1 per second plainly: the source is skipped 1, 2, 4, 8, 8 passes at a
    time (trim alone would keep sending them: their confidences say they pay); one long accepted draft puts
    its yield back above and it drafts on every pass again."""
    s = sizer_with(None, 0.05)  # passes of 1 token cost 1 s, 11 tokens 1.5 s
    assert len(s.trim(rated([0.95] * 4))) == 4  # worth a pass by its confidences
    for _ in range(3):  # three such passes: all rejected, 1 s of drafting each
        s.record("draft-model", 4, 0, 5, 1.1, draft_seconds=1.0)
    skips = []
    for _ in range(5):
        run = 0
        while s.cap("draft-model", 10) == 0:
            run += 1
        skips.append(run)
        s.record("draft-model", 4, 0, 5, 1.1, draft_seconds=1.0)  # drafted again: rejected again
    assert skips == [1, 2, 4, 8, 8]
    s.record("draft-model", 16, 16, 17, 1.5, draft_seconds=2.0)  # 8 + 17 tokens in 16.8 + 3.5 s
    assert [s.cap("draft-model", 10) for _ in range(3)] == [10, 10, 10]


def test_a_rated_source_that_pays_is_never_skipped():
    s = sizer_with(None, 0.05)
    s.trim(rated([0.95] * 4))
    for _ in range(20):
        s.record("draft-model", 4, 2, 5, 1.1, draft_seconds=0.6)  # 3 tokens in 1.7 s: pays
        assert s.cap("draft-model", 10) == 10


def test_a_costly_always_wrong_draft_model_stops_costing_through_the_engine():
    """Through the engine on a virtual clock: a drafter sure of tokens the target never takes, whose
    drafts take 1.5 single-token passes to make, is asked for few drafts once its passes show they lose (at
    most one pass in 9 once skipped for backoff_max = 8 passes at a time); the output is the target's, and the
    run ends within 25 % of plain decoding's time (2.6x without the rule)."""
    from quickdraft.core import EMPTY_DRAFT
    from quickdraft.runners.scripted import TimedScriptedRunner

    script = [1 + (i * 7) % 40 for i in range(200)]

    class Doubtless:
        def __init__(self, runner):
            self.runner, self.drafts = runner, 0

        def begin(self, prompt):
            pass

        def propose(self, context, budget):
            if budget <= 0:
                return EMPTY_DRAFT
            self.runner.now += 1.5  # three draft-model forwards at half a target pass each
            self.drafts += 1
            return Draft(tokens=(60,) * min(3, budget), source="draft-model", forwards=3, confidence=(0.99,) * min(3, budget))

        def observe(self, context, verdict):
            pass

    def run(sizer):
        runner = TimedScriptedRunner(script, 64, 63, lambda n: 1.0 + 0.05 * (n - 1))
        drafter = Doubtless(runner)
        out = [t for st in generate(runner, [0, 1, 2], Limits(len(script)), drafter, sizer=sizer, clock=runner.clock)
               for t in st.tokens]
        assert out == script
        return runner.now, drafter.drafts

    seconds, drafts = run(DraftSizer())
    assert drafts < len(script) / 6 and seconds < 1.25 * len(script)
    seconds_without, drafts_without = run(DraftSizer(min_yield_evidence=float("inf")))  # the rule off
    assert drafts_without >= len(script) - 1 and seconds_without > 2.5 * len(script)  # all but the last pass


def test_a_chain_drafter_is_cut_to_its_own_cap_not_the_last_drafters():
    """Through the engine: a chain whose first drafter guesses wrong (its cap falls to 0) and whose second copies the
    script (cap high) takes turns. Each copy is sent whole: the cap of the drafter that drafted last does not cut the
    next one's draft, and the guesses are cut to their own cap (a 1-token probe now and then)."""
    from quickdraft.core import EMPTY_DRAFT
    from quickdraft.runners.scripted import TimedScriptedRunner

    script = [1 + (i * 7) % 40 for i in range(120)]
    prompt = [0, 1, 2]
    sizer = sizer_with(0.05, 0.1, source="guess", one_rate=True)
    for _ in range(200):
        sizer.record("copy", 6, 6, 7, 1.6)

    class TakingTurns:
        def __init__(self):
            self.sent = []

        def begin(self, prompt):
            self.turn = 0

        def propose(self, context, budget):
            self.turn += 1
            out = list(context[len(prompt):])
            if budget <= 0:
                return EMPTY_DRAFT
            if self.turn % 2:
                return Draft(tokens=(60,) * min(4, budget), source="guess")
            return Draft(tokens=tuple(script[len(out) : len(out) + min(6, budget)]), source="copy")

        def observe(self, context, verdict):
            pass

    runner = TimedScriptedRunner(script, 64, 63, lambda n: 1.0 + 0.1 * (n - 1))
    steps = list(generate(runner, prompt, Limits(len(script)), TakingTurns(), sizer=sizer, clock=runner.clock))
    assert [t for st in steps for t in st.tokens] == script
    drafts = [st.verdict.draft for st in steps]
    copies = [len(d) for d in drafts if d.source == "copy"]
    guesses = [len(d) for d in drafts if d.source == "guess"]
    assert len(copies) >= 10 and all(n == 6 for n in copies[:-1])  # the last one may meet the end of the script
    assert guesses and max(guesses) <= 1 and sum(guesses) <= len(guesses) / 4


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
    for drafter in (PromptLookupDrafter(LookupConfig(min_ngram=1, num_tokens=24, single_match_tokens=8)),
                    PredictionDrafter(prediction, PredictionConfig())):
        source = "lookup" if isinstance(drafter, PromptLookupDrafter) else "prediction"
        # the timings of this run barely move it; one rate for predictions too, so that `a` sets the cap
        sizer = sizer_with(a, ratio, source=source, weight=1000, one_rate=True)
        runner.passes = []
        out = [t for step in generate(runner, prompt, Limits(60), drafter, sizer=sizer) for t in step.tokens]
        assert out == plain
        assert max(runner.passes) - 1 <= most, (source, runner.passes)
        assert max(runner.passes) > 1  # it did draft (at least the probes)


def test_auto_sizing_follows_the_runner(tiny):
    gen = Generator(HFRunner(tiny), ByteTokenizer(), name="tiny", draft_runner=HFRunner(tiny))
    s = gen.stream("abc", max_new_tokens=2, drafter="lookup")
    assert s.sizer is not None and s.sizer.costs is gen.pass_costs  # costs are kept across requests
    assert gen.stream("abc", max_new_tokens=2, drafter="draft-model").sizer is not None  # trims its rated drafts
    assert gen.stream("abc", max_new_tokens=2, drafter="ouroboros").sizer is None  # sizes its drafts itself
    assert gen.stream("abc", max_new_tokens=2, drafter="ouroboros", draft_sizing="cost").sizer is not None
    assert gen.stream("abc", max_new_tokens=2, drafter="lookup", draft_sizing="off").sizer is None
    gen.runner.draft_sizing = "cost"  # a runner's preference (llama.cpp: every draft) comes first
    assert gen.stream("abc", max_new_tokens=2, drafter="ouroboros").sizer is not None
    gen.runner.draft_sizing = "off"
    assert gen.stream("abc", max_new_tokens=2, drafter="lookup").sizer is None
    with pytest.raises(QuickdraftError, match="draft_sizing must be one of"):
        gen.stream("abc", draft_sizing="sometimes")



def test_trim_tries_sizes_larger_than_any_measured():
    """Measured only at 1, 2 and 3 tokens (2.1 and 3.2 passes of one, as on transformers), a line would
    price a 17-token pass at 19 passes of one; a confident draft is sent whole, so that it gets measured."""
    s = DraftSizer()
    for n, t in ((1, 1.0), (2, 2.07), (3, 3.19)):
        s.costs.record(n, t)
    assert s.costs.seconds(17) == pytest.approx(3.19 + 1.12 * 14)  # the cap's view: the line
    assert s.costs.seconds(17, optimistic=True) == pytest.approx(3.19)
    assert len(s.trim(rated([0.97] * 16))) == 16
    assert len(s.trim(rated([0.3] * 16))) == 0


# -- a batch of requests (the vLLM proposer) ---------------------------------------------------------

from quickdraft.batch_sizing import StepCosts, batch_lengths  # noqa: E402
from quickdraft.sizing import DraftRates, best_count, draft_gains  # noqa: E402


def test_best_count_is_the_best_prefix_by_brute_force():
    rng = random.Random(3)
    for _ in range(200):
        gains = sorted((rng.random() for _ in range(rng.randrange(0, 12))), reverse=True)
        base, a, b = rng.choice([1, 4, 16]), rng.uniform(0.5, 2), rng.uniform(0, 0.5)
        values = [(base + sum(gains[:n])) / (a + b * n) for n in range(len(gains) + 1)]
        want = max(range(len(values)), key=lambda n: (values[n], -n))
        assert best_count(gains, lambda n: a + b * n, base) == want


def test_batch_lengths_worked_examples_of_the_module():
    line = (70.0, 5.6)  # ms: t(T) = 70 + 5.6 T
    assert batch_lengths([draft_gains((0.9, 0.9), 32)], [32], line) == [11]
    mixed = [draft_gains((0.9, 0.9), 32)] + [draft_gains((0.5, 0.5), 32)] * 15
    assert batch_lengths(mixed, [32] * 16, line) == [5] + [0] * 15
    assert batch_lengths([draft_gains((0.97, 0.97), 32)] * 16, [32] * 16, line) == [6] * 16


def test_batch_lengths_keep_prefixes_and_trust_unknown_rows():
    line = (10.0, 1.0)
    # a row without rates keeps its whole draft; its tokens count as certain output in the others' sums
    keep = batch_lengths([None, draft_gains((0.6, 0.6), 8)], [8, 8], line)
    assert keep[0] == 8 and keep[1] <= 8
    assert batch_lengths([draft_gains((0.6, 0.6), 8)], [8], None) == [8]  # costs unknown: nothing is cut
    assert batch_lengths([draft_gains((0.0, 0.0), 8)], [8], line) == [0]
    assert batch_lengths([draft_gains((1.0, 1.0), 8)], [3], (10.0, 0.0)) == [3]  # flat costs: all, never more


def test_step_costs_fit_a_line_once_the_sizes_vary():
    c = StepCosts(decay=1.0)
    for _ in range(5):
        c.record(17, 0.2)
    assert c.line() is None  # one size: no slope yet
    for T, t in ((1, 0.1), (33, 0.3), (9, 0.15)):
        for _ in range(3):
            c.record(T, t)
    a, b = c.line()
    assert 0.08 < a < 0.11 and 0.005 < b < 0.007
    flat = StepCosts(decay=1.0)
    for T, t in ((1, 0.2), (30, 0.1)):
        flat.record(T, t)
    assert flat.line()[1] == 0.0  # a falling line (noise) reads as flat


def test_draft_rates_count_first_and_later_tokens_by_phase():
    r = DraftRates(decay=1.0, min_evidence=1.0)
    assert r.rates(False) is None
    r.record(False, 8, 0)  # fresh: first token wrong
    r.record(False, 8, 8)  # fresh: all right (7 later tokens tried, 7 accepted)
    r.record(True, 8, 3)  # running: first right, later: 2 of 3 tried
    assert r.rates(False) == (0.5, 9 / 10) and r.rates(True) == (1.0, 9 / 10)
    r.record(True, 0, 0)  # nothing drafted: nothing counted
    assert r.rates(True) == (1.0, 0.9)
    assert draft_gains((0.5, 0.9), 3) == pytest.approx([0.5, 0.45, 0.405])


def test_replays_run_the_engine_on_a_virtual_clock():
    """TimedScriptedRunner: the engine itself replays a drafter on a known output with modelled pass costs
    (what scripts/draft_replay.py does): the clock, the stats and the sizer's costs are the modelled ones."""
    from quickdraft.core import Stats
    from quickdraft.drafters.lookup import LookupConfig, PromptLookupDrafter
    from quickdraft.engine import Limits, generate
    from quickdraft.runners.scripted import TimedScriptedRunner

    script = [1 + (i * 7) % 40 for i in range(120)]
    prompt = [0, *script]  # the prompt holds the whole output: prompt lookup can draft all of it

    def replay(cost):
        runner, costs, stats = TimedScriptedRunner(script, 64, 63, cost), PassCosts(), Stats()
        steps = list(generate(runner, prompt, Limits(len(script)), PromptLookupDrafter(LookupConfig()), stats=stats,
                              sizer=DraftSizer(costs=costs), clock=runner.clock))
        assert [t for s in steps for t in s.tokens] == script
        assert runner.now == pytest.approx(sum(cost(len(s.verdict.draft) + 1) for s in steps))
        assert stats.decode_s == pytest.approx(runner.now) and stats.prefill_s == 0.0
        assert all(w[1] / w[0] == pytest.approx(cost(n)) for n, w in costs._sums.items())
        return stats

    flat, steep = replay(lambda n: 1.0 + 0.02 * (n - 1)), replay(lambda n: float(n))
    assert flat.decode_s < steep.decode_s / 10  # the same passes, priced by each machine's costs


def test_keeps_is_the_causal_trim_asked_token_by_token():
    """DraftSizer.keeps(rates[:i]) is True for exactly the tokens that trim keeps of a sampled draft, up to its first
    cut: the drafter may ask it while drafting and stop where the trim would cut."""
    rng = random.Random(4)
    for ratio in (0.05, 0.3, 0.7):
        costs = PassCosts(decay=1.0)
        for n in range(1, 34):
            costs.record(n, 1.0 + ratio * (n - 1))
        sizer = DraftSizer(costs=costs)
        for _ in range(200):
            rates = [rng.choice([0.2, 0.5, 0.8, 0.95, 0.99]) for _ in range(rng.randint(1, 12))]
            draft = Draft(tokens=tuple(range(len(rates))), probs=torch.ones(len(rates), 2), source="draft-model",
                          confidence=tuple(rates))
            kept = len(sizer.trim(draft).tokens)
            asked = next((i - 1 for i in range(1, len(rates) + 1) if not sizer.keeps(rates[:i])), len(rates))
            assert asked == kept, (ratio, rates)


def test_keeps_everything_before_passes_are_priced():
    assert DraftSizer().keeps([0.01])  # trim sends an unpriced draft whole; the drafter must not stop either


def test_a_draft_is_kept_from_spilling_a_few_rows_into_another_block():
    """sizing.block_fit: with 32-row blocks a 64-token draft (65 rows, 1 row into a third block) is cut to 63,
    spills of more than a quarter block are kept, and so is anything that fits the first block or fills its last."""
    assert [block_fit(n, 32) for n in (0, 5, 31, 32, 39, 40, 63, 64, 71, 72, 95)] == [0, 5, 31, 31, 31, 40, 63, 63, 63, 72, 95]
    assert block_fit(64, None) == 64 and block_fit(64, 1) == 64


@pytest.mark.parametrize("drafter", ["prediction", "lookup"])
def test_the_engine_fits_linear_drafts_to_the_runners_row_blocks_and_output_stays_exact(drafter):
    """A runner that computes passes in 8-row blocks (row_block): no pass spills 1 or 2 rows past the first block,
    the tokens are plain decoding's, and without the attribute nothing is cut (9-row passes happen)."""
    table = torch.randn(64, 64)
    head = [1, 2, 3]

    def tokens(runner, prompt, drafter):
        return [t for s in generate(runner, prompt, Limits(60), drafter) for t in s.tokens]

    plain = tokens(MarkovRunner(table), head, NoDrafter())
    # lookup finds the continuation in its prompt; the prediction is the output itself
    prompt = head + plain[:40] + head if drafter == "lookup" else head
    ref = tokens(MarkovRunner(table), prompt, NoDrafter())
    for block in (8, None):
        runner, sizes = MarkovRunner(table), []
        runner.row_block = block
        forward = runner.forward
        runner.forward = lambda ids: sizes.append(len(ids)) or forward(ids)
        make = PredictionDrafter(plain, PredictionConfig(initial_draft=8, max_draft=8)) if drafter == "prediction" \
            else PromptLookupDrafter(LookupConfig(min_ngram=1, num_tokens=8, growth=0))
        assert tokens(runner, prompt, make) == ref
        assert (max(sizes) == 8) if block else (9 in sizes)
