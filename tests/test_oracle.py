"""bench/oracle.py: the fewest passes a prediction drafter could need, and where a drafter's passes go beyond it."""

import math

import pytest

from quickdraft.bench.oracle import (CAUSES, Plan, classify, diff_sources, edit_kind, gap, longest_runs, oracle,
                                     passes_only)
from quickdraft.drafters.prediction import PredictionConfig, PredictionDrafter
from quickdraft.engine import Limits, generate
from quickdraft.runners.scripted import TimedScriptedRunner


def steep(n: int) -> float:
    return 1.0 + 0.1 * (n - 1)  # a pass of n tokens: 1 + 0.1 per extra token


def test_longest_runs_find_the_output_anywhere_in_the_prediction():
    assert longest_runs([1, 2, 9, 4, 5, 6], [1, 2, 3, 4, 5, 6]) == [2, 1, 0, 3, 2, 1]
    assert longest_runs([4, 5, 1, 2], [1, 2, 3, 4, 5]) == [2, 1, 2, 1]  # moved text: found where it is
    assert longest_runs([1, 2], []) == [0, 0]
    assert longest_runs([], [1]) == []


def test_identical_prediction_needs_the_fewest_passes_the_curve_allows():
    out = list(range(10, 110))  # 100 tokens
    runs = longest_runs(out, out)
    assert passes_only(runs).drafts == (99,)  # one pass: 99 drafted + the bonus
    assert passes_only(runs, max_draft=31).drafts == (31, 31, 31, 3)  # 32 tokens a pass, then 4
    flat = oracle(runs, lambda n: 1.0 + 0.001 * n)
    assert flat.passes == 1 and flat.cost == pytest.approx(1.1)
    # a pass of up to 16 tokens costs 1, every token past 16 a pass more: passes of 16 tokens are the cheapest
    capped = oracle(runs, lambda n: 1.0 + max(0, n - 16))
    assert capped.passes == math.ceil(100 / 16) and capped.cost == pytest.approx(7.0)
    assert sum(k + 1 for k in capped.drafts) == 100


def test_no_overlap_costs_one_pass_a_token():
    out, pred = [1, 2, 3, 4, 5], [7, 8, 9]
    runs = longest_runs(out, pred)
    plan = oracle(runs, steep)
    assert plan == Plan((0, 0, 0, 0, 0), 5.0) and passes_only(runs).passes == 5
    assert classify([(0, 0)] * 5, runs, diff_sources(out, pred)) == ["insertion"] * 5


def test_one_insertion_costs_one_pass():
    pred = list(range(1, 21))  # 20 tokens
    out = pred[:10] + [99] + pred[10:]  # 99 inserted after 10 tokens
    runs = longest_runs(out, pred)
    plan = passes_only(runs)
    assert plan.drafts == (10, 9)  # 10 drafted + 99 as bonus; then the other 10 (9 drafted + bonus)
    assert classify([(k, k) for k in plan.drafts], runs, diff_sources(out, pred)) == ["insertion", "short while right"]


def test_one_deletion_costs_one_pass():
    pred = list(range(1, 31))
    out = pred[:10] + pred[20:]  # 11..20 deleted
    runs = longest_runs(out, pred)
    assert runs[9] == 1 and runs[10] == 10
    plan = passes_only(runs)
    assert plan.drafts == (10, 8)  # 1..10 drafted, 21 as bonus (no run holds 10 then 21); then 22..29 and 30
    src = diff_sources(out, pred)
    assert edit_kind(src, 10) == "deletion"
    assert classify([(k, k) for k in plan.drafts], runs, src) == ["deletion", "short while right"]


def test_edit_kind_reads_the_diff():
    pred, out = [1, 2, 3, 4, 5, 6], [1, 2, 9, 4, 6]
    src = diff_sources(out, pred)
    assert src == [0, 1, -1, 3, 5]
    assert [edit_kind(src, t) for t in range(5)] == ["wrong place", "wrong place", "change", "change", "deletion"]


def test_classify_names_why_each_pass_stopped():
    pred = list(range(1, 41))
    out = pred[:10] + pred[15:]  # 6..15 of pred's ids deleted: 35 tokens
    runs, src = longest_runs(out, pred), diff_sources(out, pred)
    # drafted pred[0:16] (miss at out[10]: the drafter followed the deleted text), then quiet, then a re-anchored
    # draft of 4 all right, then a long one to the end (the last pass emits out[34] as bonus)
    steps = [(16, 10), (0, 0), (4, 4), (17, 17)]
    assert sum(a + 1 for _, a in steps) == len(out)
    assert classify(steps, runs, src) == ["deletion", "after a miss", "after a miss", "short while right"]
    g = gap(steps, passes_only(runs), runs, src, steep)
    assert (g.passes, g.oracle_passes) == (4, 2)
    assert sum(g.passes_by_cause.values()) == g.passes - g.oracle_passes
    assert g.passes_by_cause["after a miss"] == 2 and g.passes_by_cause["deletion"] == 0
    assert sum(g.time_by_cause.values()) == pytest.approx(g.time - g.oracle_time)
    # a wrong draft at a token the output keeps in order: the drafter was aligned elsewhere
    assert classify([(3, 0), (33, 33)], runs, src)[0] == "wrong place"
    # a draft that runs out where the prediction's run does, the output skipping to later text
    assert classify([(5, 5)], [5] * 6 + [4], [0, 1, 2, 3, 4, 9, 10])[0] == "deletion"
    assert set(CAUSES) >= set(classify(steps, runs, src))


def test_oracle_never_loses_to_the_engine():
    """A real replay of the prediction drafter through the engine on a scripted target never beats the oracle, in
    passes or in modelled time, and its gap splits exactly by cause."""
    pred = [1 + (i * 7) % 50 for i in range(200)]
    out = pred[:40] + [90, 91] + pred[40:70] + pred[90:150] + [92] + pred[151:200]
    runs, src = longest_runs(out, pred), diff_sources(out, pred)
    runner = TimedScriptedRunner(out, 100, 99, steep)
    steps = [(len(s.verdict.draft), s.verdict.accepted)
             for s in generate(runner, [0], Limits(len(out)), PredictionDrafter(pred, PredictionConfig()),
                               clock=runner.clock)]
    assert sum(a + 1 for _, a in steps) == len(out)
    fastest, fewest = oracle(runs, steep), passes_only(runs)
    assert fewest.passes <= fastest.passes <= len(steps) and fastest.cost <= runner.now + 1e-9
    g = gap(steps, fastest, runs, src, steep)
    assert g.time == pytest.approx(runner.now)
    assert sum(g.passes_by_cause.values()) == len(steps) - fastest.passes
    assert g.passes_by_cause["insertion"] == 0  # every method pays its insertions
