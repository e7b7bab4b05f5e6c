"""Phrase pool (Ouroboros): LRU bookkeeping, prefix redundancy, seeding, and harvesting phrases
from a verification pass (checked against a brute-force reference on random cases)."""

from __future__ import annotations

import random

import pytest

from quickdraft.drafters.phrase_pool import PhrasePool, PoolConfig, harvest
from quickdraft.errors import QuickdraftError


def pool(**kw) -> PhrasePool:
    return PhrasePool(PoolConfig(**kw))


# ---- pool ----

def test_insert_and_lookup_most_recent_first():
    p = pool()
    assert p.add((1, 2, 3)) is True
    assert p.add([1, 4]) is True
    assert p.add((2, 5)) is True
    assert len(p) == 3
    assert p.lookup(1, 5) == [(1, 4), (1, 2, 3)]
    assert p.lookup(1, 1) == [(1, 4)]
    assert p.lookup(1, 0) == []
    assert p.lookup(2, 5) == [(2, 5)]
    assert p.lookup(7, 5) == []


def test_too_short_phrases_are_ignored():
    p = pool()
    assert p.add((1,)) is False
    assert p.add(()) is False
    assert len(p) == 0


def test_duplicate_refreshes_recency_without_duplicating():
    p = pool()
    p.add((1, 2))
    p.add((1, 3))
    assert p.lookup(1, 5) == [(1, 3), (1, 2)]
    assert p.add((1, 2)) is False
    assert len(p) == 2
    assert p.lookup(1, 5) == [(1, 2), (1, 3)]


def test_prefix_of_kept_phrase_is_redundant():
    p = pool()
    p.add((5, 6, 7))
    p.add((5, 9))
    assert p.add((5, 6)) is False
    assert len(p) == 2
    assert p.lookup(5, 5) == [(5, 9), (5, 6, 7)]  # recency unchanged too


def test_kept_prefix_is_replaced_by_longer_phrase():
    p = pool()
    p.add((5, 6))
    p.add((5, 9))
    assert p.add((5, 6, 7)) is True
    assert len(p) == 2
    assert p.lookup(5, 5) == [(5, 6, 7), (5, 9)]
    # a phrase with another first token is not a prefix match
    assert p.add((6, 7)) is True
    assert p.lookup(5, 5) == [(5, 6, 7), (5, 9)]


def test_truncation_to_phrase_length():
    p = pool(phrase_length=3)
    assert p.add((5, 6, 7, 8, 9)) is True
    assert p.lookup(5, 5) == [(5, 6, 7)]
    assert p.add((5, 6, 7, 1)) is False  # truncates to the same phrase
    assert len(p) == 1


def test_module_docstring_example():
    p = pool(phrase_length=3, per_token=2)
    assert p.add((5, 6, 7, 8)) is True
    assert p.add((5, 6)) is False
    assert p.add((5, 9)) is True
    assert p.add((5, 4, 4)) is True
    assert p.lookup(5, 8) == [(5, 4, 4), (5, 9)]


def test_per_token_eviction_drops_that_tokens_least_recently_used():
    p = pool(per_token=2)
    p.add((1, 2))
    p.add((9, 9))  # globally older than (1, 3), but another first token
    p.add((1, 3))
    p.touch((1, 2))  # now (1, 3) is the least recently used after 1
    assert p.add((1, 4)) is True
    assert p.lookup(1, 5) == [(1, 4), (1, 2)]
    assert p.lookup(9, 5) == [(9, 9)]
    assert len(p) == 3


def test_global_eviction_drops_globally_least_recently_used():
    p = pool(max_phrases=3)
    p.add((1, 2))
    p.add((2, 3))
    p.add((3, 4))
    assert p.add((4, 5)) is True
    assert len(p) == 3
    assert p.lookup(1, 5) == []
    assert p.lookup(2, 5) == [(2, 3)]
    assert p.lookup(4, 5) == [(4, 5)]


def test_touch_saves_a_phrase_from_global_eviction():
    p = pool(max_phrases=3)
    p.add((1, 2))
    p.add((2, 3))
    p.add((3, 4))
    p.touch((1, 2))
    p.touch((8, 8))  # absent: no effect
    p.add((4, 5))
    assert len(p) == 3
    assert p.lookup(1, 5) == [(1, 2)]
    assert p.lookup(2, 5) == []  # (2, 3) was the least recently used


def test_lookup_does_not_change_recency():
    p = pool(max_phrases=2)
    p.add((1, 2))
    p.add((2, 3))
    assert p.lookup(1, 5) == [(1, 2)]  # speculative look: must not refresh (1, 2)
    p.add((3, 4))
    assert p.lookup(1, 5) == []
    assert p.lookup(2, 5) == [(2, 3)]


def test_clear():
    p = pool()
    p.add((1, 2))
    p.clear()
    assert len(p) == 0
    assert p.lookup(1, 5) == []
    assert p.add((1, 2)) is True


def test_add_from_short_sequence():
    p = pool(phrase_length=3)
    assert p.add_from([1, 2, 3, 1, 2, 4]) == 5
    assert sorted(p.lookup(1, 9) + p.lookup(2, 9) + p.lookup(3, 9)) == sorted(
        [(1, 2, 3), (2, 3, 1), (3, 1, 2), (1, 2, 4), (2, 4)])
    assert len(p) == 5


def test_add_from_skips_redundant_tail():
    p = pool(phrase_length=3)
    assert p.add_from((1, 2, 3, 1, 2)) == 3  # the tail (1, 2) is a prefix of (1, 2, 3)
    assert len(p) == 3
    assert p.lookup(1, 9) == [(1, 2, 3)]
    assert p.lookup(3, 9) == [(3, 1, 2)]


def test_add_from_stride():
    p = pool(phrase_length=3)
    assert p.add_from([1, 2, 3, 4, 5, 6, 7], stride=2) == 3  # (1, 2, 3), (3, 4, 5), (5, 6, 7); (7,) too short
    assert len(p) == 3
    assert p.lookup(3, 9) == [(3, 4, 5)]
    assert p.lookup(2, 9) == []
    assert p.add_from([1]) == 0
    with pytest.raises(QuickdraftError):
        p.add_from([1, 2], stride=0)


@pytest.mark.parametrize("kw", [dict(max_phrases=0), dict(phrase_length=1), dict(per_token=0)])
def test_config_validation(kw):
    with pytest.raises(QuickdraftError, match=next(iter(kw))):
        PoolConfig(**kw)


# ---- harvest ----

def test_harvest_worked_example():
    assert harvest((1, 2, 3, 4, 5, 6), (1, 9, 3, 4, 8, 6, 7), 1) == [(2, 3, 4, 8), (5, 6, 7)]


def test_harvest_all_accepted_is_empty():
    assert harvest((1, 2, 3), (1, 2, 3, 4), 3) == []
    assert harvest((), (4,), 0) == []


def test_harvest_nothing_agreeing_is_empty():
    assert harvest((1, 2, 3, 4), (5, 6, 7, 8, 9), 0) == []


def test_harvest_min_length_filter():
    draft, choices = (1, 2, 3, 4, 5, 6), (1, 9, 3, 4, 8, 6, 7)
    assert harvest(draft, choices, 1, min_length=4) == [(2, 3, 4, 8)]
    assert harvest(draft, choices, 1, min_length=5) == []


def test_harvest_run_to_end_of_draft_uses_last_choice():
    # d[0] rejected; d[1..3] agree up to the end, so the phrase ends with c[4]
    assert harvest((1, 2, 3, 4), (7, 2, 3, 4, 5), 0) == [(1, 2, 3, 4, 5)]


def test_harvest_runs_start_after_accepted_even_if_more_agree():
    # a caller may accept fewer tokens than agree (e.g. sampled acceptance): runs still start at a + 1
    assert harvest((1, 2, 3), (1, 2, 3, 4), 0) == [(1, 2, 3, 4)]
    assert harvest((1, 2, 3), (1, 2, 3, 4), 1) == [(2, 3, 4)]


def test_harvest_ignores_accepted_prefix():
    # the run 1..1 lies inside the accepted part (a = 2 means d[2] was rejected): only 3..3 counts
    assert harvest((1, 2, 3, 4), (1, 2, 9, 4, 6), 2) == [(3, 4, 6)]


@pytest.mark.parametrize("draft, choices, accepted", [
    ((1, 2), (1, 2), 0),
    ((1, 2), (1, 2, 3, 4), 0),
    ((1, 2), (1, 2, 3), 3),
    ((1, 2), (1, 2, 3), -1),
])
def test_harvest_invalid_arguments(draft, choices, accepted):
    with pytest.raises(ValueError):
        harvest(draft, choices, accepted)


def harvest_reference(draft, choices, accepted, min_length):
    """Every (i, j) with an all-agreeing span that can be extended neither left nor right."""
    k = len(draft)
    agree = [draft[m] == choices[m] for m in range(k)]
    found = []
    for i in range(accepted + 1, k):
        for j in range(i, k):
            if not all(agree[i : j + 1]):
                continue
            if i > accepted + 1 and agree[i - 1]:
                continue
            if j < k - 1 and agree[j + 1]:
                continue
            phrase = tuple(draft[i - 1 : j + 1]) + (choices[j + 1],)
            if len(phrase) >= min_length:
                found.append((i, phrase))
    return [phrase for _, phrase in sorted(found)]


def test_harvest_matches_brute_force_reference():
    rng = random.Random(1234)
    nonempty = 0
    for _ in range(200):
        vocab = rng.randint(2, 4)
        k = rng.randint(0, 10)
        choices = [rng.randrange(vocab) for _ in range(k + 1)]
        draft = [c if rng.random() < 0.6 else rng.randrange(vocab) for c in choices[:k]]
        accepted = 0
        while accepted < k and draft[accepted] == choices[accepted]:
            accepted += 1
        if rng.random() < 0.25:  # sometimes fewer accepted than agree (sampled acceptance)
            accepted = rng.randint(0, accepted)
        min_length = rng.randint(2, 5)
        got = harvest(draft, choices, accepted, min_length)
        assert got == harvest_reference(draft, choices, accepted, min_length), (draft, choices, accepted)
        nonempty += bool(got)
    assert nonempty > 20  # the cases exercise real runs, not only empty results
