"""Property tests of the drafters' alignment logic (hypothesis), on the scripted target.

Small alphabets (tokens 1..6) make repeats, and so ambiguous re-anchoring, common; distinct tokens
(range(1, 200)) make the re-anchoring point unique where a test needs to know it.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import check_invariants, run_scripted

from quickdraft.drafters.lookup import LookupConfig, PromptLookupDrafter
from quickdraft.drafters.prediction import POLICIES as PREDICTION_POLICIES
from quickdraft.drafters.prediction import PredictionConfig, PredictionDrafter

POLICIES = st.sampled_from(list(PREDICTION_POLICIES))
FAST = settings(max_examples=200, deadline=None)


@st.composite
def edited(draw, base, alphabet=st.integers(0, 7), max_edits=4, max_size=5):
    """base with up to max_edits random insertions, deletions or replacements of 1..max_size tokens."""
    pred = list(base)
    for _ in range(draw(st.integers(0, max_edits))):
        at = draw(st.integers(0, len(pred)))
        size = draw(st.integers(1, max_size))
        kind = draw(st.sampled_from(["insert", "delete", "replace"]))
        junk = draw(st.lists(alphabet, min_size=size, max_size=size))
        if kind == "insert":
            pred = pred[:at] + junk + pred[at:]
        elif kind == "delete":
            pred = pred[:at] + pred[at + size :]
        else:
            pred = pred[:at] + junk + pred[at + size :]
    return pred


scripts = st.lists(st.integers(1, 6), max_size=90)


@st.composite
def script_and_prediction(draw):
    script = draw(scripts)
    if draw(st.booleans()):
        prediction = draw(st.lists(st.integers(0, 6), max_size=90))  # 0 = EOS may appear in it
    else:
        prediction = draw(edited(script))
    return script, prediction


# -- exactness and accounting for any prediction ------------------------------------------------------


@FAST
@given(case=script_and_prediction(), policy=POLICIES, max_new=st.integers(1, 100))
def test_output_is_the_script_for_any_prediction(case, policy, max_new):
    script, prediction = case
    stats, steps, out = run_scripted(script, prediction, policy, max_new)
    assert out == script[:max_new]
    check_invariants(stats, steps, out)
    assert steps[-1].finish_reason == ("length" if len(script) >= max_new else "stop")
    # a pass never drafts past the token limit: it emits at most len(draft) + 1 tokens
    emitted = 0
    for s in steps:
        assert emitted + len(s.verdict.draft) + 1 <= max_new
        emitted += len(s.tokens)


# -- a right prediction -------------------------------------------------------------------------------


@FAST
@given(body=st.lists(st.integers(1, 6), max_size=300), policy=POLICIES)
def test_right_prediction_rejects_nothing(body, policy):
    # The script ends with a token seen nowhere else (9): once the output has used up the prediction
    # no earlier place in it can look like a re-entry. (See also the regression tests below.)
    script = body + [9]
    stats, steps, out = run_scripted(script, script, policy)
    assert out == script
    assert stats.rejected_prediction_tokens == 0
    check_invariants(stats, steps, out)
    n = len(script)
    if policy == "default":
        # drafts 16, 50, 128, 128, ...: passes emit 17, 51, 129, 129, ... tokens (17, 68, 197, 326, ...);
        # the pass that drafts the end of the prediction emits EOS as its bonus.
        assert stats.target_passes <= 3 + -(-max(0, n - 197) // 129) + 1
        if n >= 100:
            assert stats.target_passes * 15 <= n
    else:
        # 16 draft tokens + 1 bonus per pass; the pass that drafts the rest also yields EOS
        assert stats.target_passes == n // 17 + 1


# Regression tests: after the alignment is lost, or the prediction is used up, only output produced
# since then counts as evidence for a re-anchor. Measuring the backward match over the whole output
# let a shifted copy of the old evidence win in repetitive text, so the drafter re-anchored where it
# had just failed and proposed the same wrong tokens pass after pass.


@pytest.mark.parametrize(
    "policy,script",
    [
        # pass 1 drafts P[0:16], its bonus P[16] uses the prediction up exactly; then _realign
        # re-anchors at j = 16 (L = 16) and drafts P[16] = 1 again: rejected by EOS.
        ("default", [1] * 17),
        # ends like it began: same, re-anchors at j = 7 (L = 3: 5, 6, 7) and drafts 8, 9, 10.
        ("default", list(range(1, 15)) + [5, 6, 7]),
        # openai: the third pass's bonus uses up P; j = 50 has L = 32 (capped): drafts P[50] again.
        ("openai", [1] * 51),
    ],
)
def test_right_prediction_with_a_repeated_tail_rejects_nothing(policy, script):
    stats, steps, out = run_scripted(script, script, policy)
    assert out == script
    assert stats.rejected_prediction_tokens == 0


@pytest.mark.parametrize("policy,limit", [("openai", 16), ("default", 64)])
def test_one_replaced_token_in_a_repeated_run_costs_one_draft(policy, limit):
    # One token replaced (2 for 1) inside a run of 1s. Today every pass after the miss re-anchors at
    # j = 50 (the 1s before it give the largest L) and drafts P[50] = 2 again: openai rejects 800
    # tokens, default 2500, for a 100-token output.
    script = [1] * 100
    prediction = [1] * 50 + [2] + [1] * 50
    stats, steps, out = run_scripted(script, prediction, policy)
    assert out == script
    assert stats.rejected_prediction_tokens <= limit


# -- default policy: substitutions learned from one-token replacements ---------------------------------


def test_substitution_docstring_example():
    """prediction.py's example: the first Y (8 for 9) misses, b (2) confirms the replacement, and the rest is drafted
    with 8 for every 9, in one pass."""
    script, prediction = [1, 8, 2, 3, 8, 4, 5, 8, 6], [1, 9, 2, 3, 9, 4, 5, 9, 6]
    stats, steps, out = run_scripted(script, prediction)
    assert out == script
    assert [s.verdict.draft.tokens for s in steps] == [tuple(prediction), (), (3, 8, 4, 5, 8, 6)]


def indented(indent: int, lines: range) -> list[int]:
    """Lines of 5 distinct tokens, each led by the indentation token `indent`."""
    return [t for i in lines for t in (indent, *range(10 + 5 * i, 15 + 5 * i))]


def test_a_reindented_block_misses_once():
    """Every line of the output has indentation 2 where the prediction has 1: with substitutions the first line's
    miss is the only one; without, every line misses."""
    from quickdraft.drafters.prediction import PredictionConfig, PredictionDrafter

    prediction, script = indented(1, range(30)), indented(2, range(30))
    misses = {}
    for substitute in (True, False):
        drafter = PredictionDrafter(prediction, PredictionConfig(substitute=substitute))
        stats, steps, out = run_scripted(script, prediction, drafter=drafter)
        assert out == script
        misses[substitute] = sum(s.verdict.accepted < len(s.verdict.draft) for s in steps)
    assert misses[True] == 1 < 20 < misses[False]


def test_a_substitution_ends_where_the_output_keeps_the_token():
    """The first 10 lines re-indented (2 for 1), the last 10 not: the first line of the second half misses (8 drafted
    as 2, written as 1), the drafter drops 1 -> 2 and keeps its place: no re-anchoring, no further miss."""
    from quickdraft.drafters.prediction import PredictionDrafter

    prediction = indented(1, range(20))
    script = indented(2, range(10)) + indented(1, range(10, 20))
    drafter = PredictionDrafter(prediction)
    stats, steps, out = run_scripted(script, prediction, drafter=drafter)
    assert out == script
    second = next(i for i, s in enumerate(steps) if s.verdict.accepted < len(s.verdict.draft) and s.tokens[-1] == 1)
    assert sum(s.verdict.accepted < len(s.verdict.draft) for s in steps) == 2
    assert drafter.subs == {} and steps[second + 1].verdict.draft.tokens[:2] == (10 + 5 * 10, 11 + 5 * 10)
    assert drafter.realignments == 1  # only after the first miss


def test_openai_policy_learns_no_substitution():
    from quickdraft.drafters.prediction import PredictionConfig, PredictionDrafter

    drafter = PredictionDrafter(indented(1, range(30)), PredictionConfig.for_policy("openai"))
    stats, steps, out = run_scripted(indented(2, range(30)), drafter.prediction, drafter=drafter)
    assert out == indented(2, range(30)) and drafter.subs == {}


# -- default policy: re-anchoring after an edit ----------------------------------------------------------


@FAST
@given(length=st.integers(120, 199), size=st.integers(1, 8), kind=st.sampled_from(["insert", "delete", "replace"]), data=st.data())
def test_default_reanchors_after_an_edit(length, size, kind, data):
    # distinct tokens, >= 40 matching tokens before the edit and >= 40 after it
    at = data.draw(st.integers(40, length - size - 40), label="at")
    script = list(range(1, length + 1))
    junk = list(range(200, 200 + size))
    if kind == "insert":
        prediction = script[:at] + junk + script[at:]
    elif kind == "delete":
        prediction = script[:at] + script[at + size :]
    else:
        prediction = script[:at] + junk + script[at + size :]
    stats, steps, out = run_scripted(script, prediction, "default")
    assert out == script
    check_invariants(stats, steps, out)
    # The output departs from P at output index `at`; only the pass that emits it may reject anything
    # (none when `at` falls on its bonus), at most the 128 it drafted, and the pass after it, which drafts
    # min_draft tokens where a same-length replacement would leave the drafter (right for a one-token
    # replacement; not tried where the output re-enters P next to that place: a one-token insertion);
    # after that the re-anchor is unique (distinct tokens) and right.
    starts = [0]
    for s in steps:
        starts.append(starts[-1] + len(s.tokens))
    departing = next(i for i, s in enumerate(steps) if starts[i] <= at < starts[i + 1])
    assert departing < 3
    wrong = [i for i, s in enumerate(steps) if s.verdict.accepted < len(s.verdict.draft)]
    assert set(wrong) <= {departing, departing + 1}
    assert departing + 1 not in wrong or len(steps[departing + 1].verdict.draft) == 8
    if kind == "replace" and size == 1 or kind == "insert" and size == 1:
        assert wrong in ([], [departing])
    assert stats.rejected_prediction_tokens <= 128 + 8
    # Passes: before the edit the drafts are 16, 50, 128 (17, 68, 197 tokens; at <= 158) so the
    # departing pass is at most the 3rd. Then the output tokens of the edit that are not in P come one
    # per pass: the departing pass's bonus covers the first, the replacement's draft the second, so
    # `size - 1` more plain passes for a replacement or a deletion (the last of them yields the token that
    # re-enters P), none for an insertion (whose replacement draft, for size >= 2, is one more pass).
    # The re-anchored run ramps 8, 20, 62, 128 (9, 30, 93, 222 tokens) over < 160 tokens: at most
    # 4 passes, the last one ends with EOS (or a separate plain EOS pass: one more).
    plain = 0 if kind == "insert" else size - 1
    assert stats.target_passes <= 3 + plain + 1 + 4 + 1
    # every output token is accepted except one bonus per pass (the EOS bonus is not output)
    assert stats.accepted_prediction_tokens == len(script) - (stats.target_passes - 1)
    assert stats.accepted_prediction_tokens >= len(script) - plain - 9
    after = steps[departing + 1 :]
    eos_pass = not after[-1].verdict.draft and after[-1].tokens == ()  # prediction used up by a bonus
    assert sum(1 for s in after if not s.verdict.draft) == plain + eos_pass


@pytest.mark.parametrize("window", [PredictionConfig().window, 64])
def test_a_long_insertion_reanchors_on_two_tokens_anywhere(window):
    # The output inserts 40 new tokens into a right prediction of distinct tokens. Where it comes back, the
    # prediction's place is 40 tokens before hint (where a same-length replacement would be), beyond the default
    # one-token window (24): the first token back is decoded plainly, then two agreeing tokens re-anchor through
    # the far index (strong_ngram 2). A window of 64 takes the one token.
    P = list(range(1, 121))
    script = P[:40] + list(range(200, 240)) + P[40:]
    config = PredictionConfig(window=window)
    stats, steps, out = run_scripted(script, P, drafter=PredictionDrafter(P, config))
    assert out == script
    check_invariants(stats, steps, out)
    starts = [0]
    for s in steps:
        starts.append(starts[-1] + len(s.tokens))
    plain_back = [starts[i] for i, s in enumerate(steps) if not s.verdict.draft and starts[i] >= 80]
    assert plain_back == ([80, 81] if window < 40 else [80])
    back = next(i for i, s in enumerate(steps) if starts[i] > plain_back[-1])
    assert steps[back].verdict.accepted == len(steps[back].verdict.draft) > 0  # drafts P[42:] and is right


# -- openai policy: bounded drafts and the recovery threshold ----------------------------------------------


def draft_is_justified(done, draft, prediction, threshold=32):
    """A draft may follow the initial run (output == P[:len(output)]), or 32 output tokens that equal
    the 32 prediction tokens right before the drafted ones."""
    k = len(draft)
    if done == prediction[: len(done)] and list(draft) == prediction[len(done) : len(done) + k]:
        return True
    if len(done) < threshold:
        return False
    tail = done[-threshold:]
    return any(
        prediction[j - threshold : j] == tail and list(draft) == prediction[j : j + k]
        for j in range(threshold, len(prediction))
    )


@FAST
@given(case=script_and_prediction(), max_new=st.integers(1, 100))
def test_openai_drafts_at_most_16_and_only_after_32_matching(case, max_new):
    script, prediction = case
    stats, steps, out = run_scripted(script, prediction, "openai", max_new)
    assert out == script[:max_new]
    check_invariants(stats, steps, out)
    done: list[int] = []
    for s in steps:
        d = s.verdict.draft.tokens
        assert len(d) <= 16
        assert len(d) - sum(s.from_draft) <= 16  # what one departure can cost
        if d:
            assert draft_is_justified(done, d, prediction), (done, d)
        done.extend(s.tokens)


@FAST
@given(
    script=st.lists(st.integers(1, 6), min_size=40, max_size=150),
    edits=st.data(),
)
def test_openai_rejects_at_most_16_per_departure(script, edits):
    prediction = edits.draw(edited(script, max_edits=3))
    stats, steps, out = run_scripted(script, prediction, "openai")
    assert out == script
    # a departure: a pass that kept fewer draft tokens than it drafted (an accepted EOS in the
    # prediction is not output either, so it counts as rejected)
    departures = sum(1 for s in steps if sum(s.from_draft) < len(s.verdict.draft))
    assert stats.rejected_prediction_tokens <= 16 * departures
    assert all(len(s.verdict.draft) - sum(s.from_draft) <= 16 for s in steps)


# -- prompt lookup: the incremental index equals a slow full scan --------------------------------------------


def lookup_reference(context, max_ngram, min_ngram, k, k_single, prefer, budget, growth=0, max_tokens=128,
                     short_ngram=0, short_tokens=4):
    """(draft, source): the earlier occurrence of the longest suffix n-gram (n = max..min, then down to short_ngram
    where that is > 0) that prefer names (longest: the one the context's last tokens copy longest, among the first and
    the 16 latest; first; latest); its continuation, num_tokens long after a match of >= 2 tokens (or growth x the
    copy's length m, the longest run of the context's last tokens that also ends there, counted up to
    ceil(max_tokens / growth), if that is more, at most max_tokens), single_match_tokens after 1; short_tokens, as
    "lookup-short", after a match shorter than min_ngram; at most budget."""
    T = len(context)
    shortest = min(min_ngram, short_ngram) if short_ngram else min_ngram
    for n in range(min(max_ngram, T), shortest - 1, -1):
        suffix = context[T - n :]
        ends = [end for end in range(n, T) if context[end - n : end] == suffix]  # ending before T
        if ends:
            cap = -(-max_tokens // growth) if growth else max_tokens

            def copied(end):  # the longest run of the context's last tokens that also ends at `end`, up to cap
                m = n
                while m < min(cap, end) and context[end - m - 1 : end] == context[T - m - 1 :]:
                    m += 1
                return m

            if prefer == "longest":  # among the first and the 16 latest occurrences; ties: the earliest
                kept = sorted({ends[0], *ends[-16:]})
                end = max(kept, key=lambda e: (copied(e), -e))
            else:
                end = ends[0] if prefer == "first" else ends[-1]
            length, source = (k if n >= 2 else k_single), "lookup"
            if n >= 2 and growth:
                length = max(length, min(max_tokens, growth * copied(end)))
            if n < min_ngram:
                length, source = short_tokens, "lookup-short"
            length = min(length, budget)
            return (tuple(context[end : end + length]), source) if length > 0 else ((), None)
    return (), None


@FAST
@given(
    prompt=st.lists(st.integers(1, 4), min_size=1, max_size=30),
    chunks=st.lists(st.lists(st.integers(1, 5), min_size=1, max_size=6), max_size=20),
    sizes=st.tuples(st.integers(1, 4), st.integers(0, 3), st.integers(1, 8), st.integers(0, 3)),
    budgets=st.lists(st.integers(-1, 12), min_size=21, max_size=21),
    prefer=st.sampled_from(["longest", "first", "latest"]),
    growth=st.tuples(st.integers(0, 3), st.integers(1, 12)),
    short=st.tuples(st.integers(0, 4), st.integers(1, 6)),
)
def test_prompt_lookup_equals_full_scan(prompt, chunks, sizes, budgets, prefer, growth, short):
    max_ngram, extra, num_tokens, single = sizes
    min_ngram = max(1, max_ngram - extra)
    config = LookupConfig(max_ngram=max_ngram, min_ngram=min_ngram, num_tokens=num_tokens,
                          single_match_tokens=single, prefer=prefer, growth=growth[0], max_tokens=growth[1],
                          short_ngram=short[0], short_tokens=short[1])
    drafter = PromptLookupDrafter(config)
    drafter.begin(prompt)
    context = list(prompt)
    for i, chunk in enumerate([[]] + chunks):
        context.extend(chunk)
        draft = drafter.propose(context, budgets[i])
        b = max(0, budgets[i])
        tokens, source = lookup_reference(context, max_ngram, min_ngram, num_tokens, single, prefer, b, *growth, *short)
        assert draft.tokens == tokens
        if draft.tokens:
            assert draft.source == source
    # begin() starts afresh: a new request is looked up in its own context only
    drafter.begin([9, 8])
    assert drafter.propose([9, 8], 5).tokens == ()


def test_prompt_lookup_docstring_example():
    # max_ngram 2, num_tokens 3: [1, 2, 3, 4, 1, 2] ends with (1, 2), which first ended at index 2:
    # the draft is context[2:5] = (3, 4, 1).
    drafter = PromptLookupDrafter(LookupConfig(max_ngram=2, min_ngram=1, num_tokens=3, single_match_tokens=3, prefer="latest",
                                               growth=0))
    drafter.begin([1, 2, 3, 4, 1, 2])
    draft = drafter.propose([1, 2, 3, 4, 1, 2], budget=10)
    assert draft.tokens == (3, 4, 1) and draft.source == "lookup"
    # growth 2: the copy (1, 2) is 2 tokens long, so it drafts 4
    grown = PromptLookupDrafter(LookupConfig(max_ngram=2, min_ngram=1, num_tokens=3))
    grown.begin([1, 2, 3, 4, 1, 2])
    assert grown.propose([1, 2, 3, 4, 1, 2], budget=10).tokens == (3, 4, 1, 2)
    # the budget caps it; a suffix never seen before gives nothing
    assert drafter.propose([1, 2, 3, 4, 1, 2], budget=2).tokens == (3, 4)
    assert drafter.propose([1, 2, 3, 4, 1, 2, 7], budget=5).tokens == ()
    # only the 1-gram (2,) matches now: it last ended at index 6, before the new suffix
    assert drafter.propose([1, 2, 3, 4, 1, 2, 7, 5, 2], budget=5).tokens == (7, 5, 2)
    # first occurrence, 2 tokens after a single-token match: it ended first at 2
    first = PromptLookupDrafter(LookupConfig(min_ngram=1))
    first.begin([1, 2, 3, 4, 1, 2, 7, 5, 2])
    assert first.propose([1, 2, 3, 4, 1, 2, 7, 5, 2], budget=5).tokens == (3, 4)
    # the defaults draft after 3-gram matches, else short_tokens (4) after a shorter one as "lookup-short": (7, 5, 2)
    # and (5, 2) were not seen before; (2,) was, ending at 2 and 6, each copied 1 token long: the earliest
    default = PromptLookupDrafter()
    default.begin([1, 2, 3, 4, 1, 2, 7, 5, 2])
    short = default.propose([1, 2, 3, 4, 1, 2, 7, 5, 2], budget=5)
    assert short.tokens == (3, 4, 1, 2) and short.source == "lookup-short"
    quiet = PromptLookupDrafter(LookupConfig(short_ngram=0))  # short matches off: 3-gram matches only
    quiet.begin([1, 2, 3, 4, 1, 2, 7, 5, 2])
    assert quiet.propose([1, 2, 3, 4, 1, 2, 7, 5, 2], budget=5).tokens == ()
    again = PromptLookupDrafter()
    again.begin([3, 4, 1, 2, 7, 3, 4, 1])
    assert again.propose([3, 4, 1, 2, 7, 3, 4, 1], budget=3).tokens == (2, 7, 3)


def test_auto_with_a_prediction_is_prediction_and_lookup_except_under_openai():
    """drafter "auto" with a prediction: prediction+lookup under the default policy, the prediction alone under
    "openai" (OpenAI's service drafts nothing else); without one, the draft model where loaded, else lookup. The
    library's requests get the same (api.Generator.make_drafter)."""
    from quickdraft.drafters.build import PredictionOrLookup, build_drafter, resolve_auto

    assert resolve_auto("auto", True, True) == "prediction+lookup"
    assert resolve_auto("auto", True, False, "openai") == "prediction"
    assert resolve_auto("auto", False, True, "openai") == "draft-model"
    assert resolve_auto("auto", False, False) == "lookup"
    assert resolve_auto("prediction", True, False) == "prediction"  # a name asked for is kept
    assert isinstance(build_drafter("auto", [5, 6, 7]), PredictionOrLookup)
    openai = build_drafter("auto", [5, 6, 7], policy="openai")
    assert type(openai) is PredictionDrafter and openai.config.policy == "openai"
    assert isinstance(build_drafter("auto", None), PromptLookupDrafter)


def test_prediction_or_lookup_takes_lookup_after_a_weak_reanchor():
    """prediction+lookup (build.PredictionOrLookup): after the output leaves the prediction for text the prompt holds,
    and the prediction re-anchors on a single token of it (9), lookup's 3-gram match (60 61 9) drafts the prompt's
    continuation; FirstOf would have drafted the prediction's (10 11 ...). The output is the script either way."""
    from quickdraft.drafters.base import FirstOf
    from quickdraft.drafters.build import PredictionOrLookup, build_drafter
    from quickdraft.drafters.prediction import PredictionDrafter
    from quickdraft.engine import Limits, generate
    from quickdraft.runners.scripted import ScriptedRunner

    prompt = [40, 41, 60, 61, 9, 62, 63, 64, 65, 66, 42]
    prediction = list(range(1, 31))
    script = [1, 2, 3, 4, 5, 60, 61, 9, 62, 63, 64, 65, 66, 7, 8]
    assert isinstance(build_drafter("prediction+lookup", prediction), PredictionOrLookup)
    sources = {}
    three = LookupConfig(short_ngram=0)  # 3-gram matches only: the passes fall as this docstring says
    for name, drafter in (("either", PredictionOrLookup(PredictionDrafter(prediction), PromptLookupDrafter(three))),
                          ("first", FirstOf([PredictionDrafter(prediction), PromptLookupDrafter(three)]))):
        steps = list(generate(ScriptedRunner(script, 100, 99), prompt, Limits(100, frozenset({99})), drafter))
        assert [t for s in steps for t in s.tokens] == script
        after_nine = next(i for i, s in enumerate(steps) if s.tokens[-1] == 9) + 1  # the pass after 9 was written
        sources[name] = steps[after_nine].verdict.draft
    assert sources["either"].source == "lookup" and sources["either"].tokens[:5] == (62, 63, 64, 65, 66)
    assert sources["first"].source == "prediction" and sources["first"].tokens[0] == 10


def test_short_matches_draft_under_greedy_decoding_and_sampling():
    """Through a Generator, a lookup request drafts short matches by default, greedy or sampled, and none with
    short_ngram 0."""
    from quickdraft.api import Generator
    from quickdraft.drafters.lookup import LookupConfig
    from quickdraft.runners.scripted import ScriptedRunner
    from quickdraft.sampling import SamplingParams
    from quickdraft.tokenizer import ByteTokenizer

    tok = ByteTokenizer()
    text = "abcabdabeabfabgabh"  # 2-token matches ("ab") everywhere, no 3-gram that repeats
    g = Generator(ScriptedRunner(tok.encode(text), 257, tok.eos, max_context=64), tok)
    sampled = SamplingParams(temperature=0.7, seed=1)
    for sampling in (SamplingParams(), sampled):
        r = g.generate("x", drafter="lookup", draft_sizing="off", sampling=sampling)
        assert "lookup-short" in r.stats.by_source
    r = g.generate("x", drafter="lookup", draft_sizing="off", sampling=sampled, lookup=LookupConfig(short_ngram=0))
    assert "lookup-short" not in r.stats.by_source


def test_prediction_or_lookup_short_matches_only_where_both_have_nothing():
    """prediction+lookup with lookup's short matches: right after a weak re-anchor a short match does not replace the
    prediction's draft (it is no more evidence), and where the prediction has nothing, a short match drafts."""
    from quickdraft.core import EMPTY_DRAFT, Draft, Verdict
    from quickdraft.drafters.build import PredictionOrLookup
    from quickdraft.drafters.prediction import PredictionDrafter

    prompt = [40, 9, 50, 51, 52, 53]
    drafter = PredictionOrLookup(PredictionDrafter(list(range(1, 31))), PromptLookupDrafter())
    drafter.begin(prompt)
    context = prompt + [1, 2, 3, 70]  # left the prediction at 70 ...
    drafter.observe(context, Verdict(draft=Draft(tokens=(1, 2, 3, 4, 5)), accepted=3, tokens=(1, 2, 3, 70)))
    context = context + [9]  # ... then wrote 9: a one-token re-anchor, at 10
    drafter.observe(context, Verdict(draft=EMPTY_DRAFT, accepted=0, tokens=(9,)))
    assert drafter.prediction.anchor == 9 and drafter.prediction.agreed == 0
    assert drafter.lookup.propose(context, 8).source == "lookup-short"  # (9,) was seen in the prompt
    draft = drafter.propose(context, 8)
    assert draft.source == "prediction" and draft.tokens[0] == 10
    lost = PredictionOrLookup(PredictionDrafter([100, 101, 102]), PromptLookupDrafter())
    lost.begin(prompt)
    context = prompt + [9]
    lost.observe(context, Verdict(draft=Draft(tokens=(100, 101, 102)), accepted=0, tokens=(9,)))
    assert lost.prediction.anchor is None
    draft = lost.propose(context, 8)
    assert draft.source == "lookup-short" and draft.tokens == (50, 51, 52, 53)
