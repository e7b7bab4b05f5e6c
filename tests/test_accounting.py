"""Accounting (accepted / rejected / passes / completion tokens) on a scripted target.

The ScriptedRunner's greedy output is a fixed token script followed by EOS, so which draft tokens the
target agrees with is known in advance and every count below is worked out by hand from the rules
in drafters/prediction.py (anchor, realignment, the two policies) and engine.py (one pass emits the
accepted prefix plus one bonus token; the bonus is a generated token, in neither prediction count).

Conventions used in the comments: the script is s = 1..58 (s[i] = i + 1, all tokens distinct),
P is the prediction, "pass n: d16 a12 r4 +30" reads "pass n drafts 16 tokens, 12 are accepted,
4 rejected, the bonus token is 30". The last pass of every run ends with the EOS bonus (not output).
Default policy draft lengths: k = clamp(2 run, 8, 128), run += k + 1 after a fully accepted pass, run 8
on a fresh prediction and run = L (the backward match, 1 here) after a re-anchor: so 16, 50, 128 on a fresh
prediction and 8, 20, 62, 128 after a re-anchor. Right at a departure from an anchor that 8 or more output
tokens followed, the drafter goes on at the place a same-length replacement leaves it (hint), over
one-token matches elsewhere. The openai policy always drafts 16 and re-anchors only when
the last 32 output tokens equal 32 consecutive prediction tokens.
"""

from __future__ import annotations

import random

import pytest

from conftest import check_invariants, run_scripted

from quickdraft.api import Generator
from quickdraft.core import Stats
from quickdraft.drafters.base import FirstOf
from quickdraft.drafters.lookup import PromptLookupDrafter
from quickdraft.drafters.prediction import PredictionConfig, PredictionDrafter
from quickdraft.runners.scripted import ScriptedRunner
from quickdraft.tokenizer import ByteTokenizer

S58 = list(range(1, 59))
X = 200  # tokens >= 200 never appear in a script: edit material


def counts(stats: Stats) -> tuple[int, int, int, int]:
    return stats.accepted_prediction_tokens, stats.rejected_prediction_tokens, stats.target_passes, stats.completion_tokens


def drafts(steps) -> list[int]:
    return [len(s.verdict.draft) for s in steps]


def edited(seq: list[int], kind: str, at: int, size: int = 1) -> list[int]:
    """seq with `size` tokens inserted before index `at`, missing from `at`, or replaced from `at`."""
    junk = [X + i for i in range(size)]
    if kind == "insert":
        return seq[:at] + junk + seq[at:]
    if kind == "missing":
        return seq[:at] + seq[at + size :]
    assert kind == "replace"
    return seq[:at] + junk + seq[at + size :]


# -- a right prediction ---------------------------------------------------------------------------


def test_right_prediction_openai_matches_published_shape():
    # 16 draft tokens per pass, each pass emits 16 accepted + 1 bonus = 17 tokens:
    # pass 1: P[0:16]  d16 a16 +17 | pass 2: P[17:33] d16 a16 +34 | pass 3: P[34:50] d16 a16 +51
    # pass 4: P[51:58] d7 a7, bonus = EOS (the script is over).
    # accepted 16*3 + 7 = 55; generated = the 3 bonus tokens 17, 34, 51; rejected 0: OpenAI's numbers.
    stats, steps, out = run_scripted(S58, S58, "openai")
    assert out == S58
    assert drafts(steps) == [16, 16, 16, 7]
    assert counts(stats) == (55, 0, 4, 58)
    assert stats.completion_tokens - stats.accepted_prediction_tokens == 3
    assert [t for s in steps for t, f in zip(s.tokens, s.from_draft) if not f] == [17, 34, 51]
    assert steps[-1].finish_reason == "stop"
    check_invariants(stats, steps, out)


def test_right_prediction_default():
    # pass 1: d16 a16 +17 (run 8 -> 25) | pass 2: 50 asked, P[17:58] has 41: d41 a41 + EOS.
    # accepted 57, 1 bonus token, 2 passes.
    stats, steps, out = run_scripted(S58, S58, "default")
    assert out == S58
    assert drafts(steps) == [16, 41]
    assert counts(stats) == (57, 0, 2, 58)
    check_invariants(stats, steps, out)


def test_right_prediction_cut_by_max_tokens():
    # openai with max_new_tokens 58: the budget of pass 4 is 58 - 51 - 1 = 6, so it drafts s[51:57]
    # (6, all accepted) and its bonus 58 is the 58th token: finish "length", accepted 54, not 55.
    stats, steps, out = run_scripted(S58, S58, "openai", max_new_tokens=58)
    assert out == S58
    assert drafts(steps) == [16, 16, 16, 6]
    assert counts(stats) == (54, 0, 4, 58)
    assert steps[-1].finish_reason == "length"


# -- one token inserted, missing or replaced, at the start, the middle and the end ----------------
# Positions: at = 0 (start), 29 (middle), 57 (the last token). X = 200 is the inserted/replacing token.
# (policy, kind, at): (accepted, rejected, passes, completion, draft length per pass)

EDIT_CASES = {
    # ---- openai ----
    # insert@0, P = X,1..58: pass 1 d16 a0 r16 +1. Out 1..n re-enters P at j = n+1 with L = n
    # (P[j-1-i] = n-i back to P[1] = 1); L >= 32 first at n = 32: passes 2..32 plain (tokens 2..32),
    # pass 33: P[33:49] d16 a16 +49, pass 34: P[50:59] d9 a9 + EOS. a 25, r 16, 34 passes.
    ("openai", "insert", 0): (25, 16, 34, 58, [16] + [0] * 31 + [16, 9]),
    # missing@0, P = 2..58: pass 1 d16 a0 r16 +1 (1 is not in P). Out 1..n re-enters at j = n-1 with
    # L = n-1; L = 32 at n = 33: passes 2..33 plain, pass 34: P[32:48] = 34..49 a16 +50,
    # pass 35: P[49:57] d8 a8 + EOS. a 24, r 16, 35 passes.
    ("openai", "missing", 0): (24, 16, 35, 58, [16] + [0] * 32 + [16, 8]),
    # replace@0, P = X,2..58: as missing@0 (L = n-1, since out[0] = 1 != X): j = n = 33,
    # pass 34: P[33:49] a16 +50, pass 35: P[50:58] d8 a8 + EOS. a 24, r 16, 35 passes.
    ("openai", "replace", 0): (24, 16, 35, 58, [16] + [0] * 32 + [16, 8]),
    # middle: pass 1 d16 a16 +17; pass 2 drafts P[17:33] whose 13th token is the edit: a12 r4 +30.
    # After it the output can match at most 58 - 30 = 28 (insert: 29) tokens of P after the edit,
    # never 32: the 28 tokens 31..58 are generated one per pass, then one EOS pass.
    # a 16+12 = 28, r 4, passes 2 + 28 + 1 = 31, for all three kinds.
    ("openai", "insert", 29): (28, 4, 31, 58, [16, 16] + [0] * 29),
    ("openai", "missing", 29): (28, 4, 31, 58, [16, 16] + [0] * 29),
    ("openai", "replace", 29): (28, 4, 31, 58, [16, 16] + [0] * 29),
    # end: passes 1-3 as for a right prediction (a48, output 1..51), pass 4 drafts what P has left
    # from index 51; the output is then complete and pass 5 is plain and yields EOS.
    # insert@57, P[51:59] = 52..57,X,58: d8 a6 r2 +58. a 54, r 2, 5 passes.
    ("openai", "insert", 57): (54, 2, 5, 58, [16, 16, 16, 8, 0]),
    # missing@57, P[51:57] = 52..57: d6 a6 +58 (P used up, nothing rejected). a 54, r 0, 5 passes.
    ("openai", "missing", 57): (54, 0, 5, 58, [16, 16, 16, 6, 0]),
    # replace@57, P[51:58] = 52..57,X: d7 a6 r1 +58. a 54, r 1, 5 passes.
    ("openai", "replace", 57): (54, 1, 5, 58, [16, 16, 16, 7, 0]),
    # ---- default ----
    # A draft after a re-anchor is max(min_draft 8, 2 run) long; each fully accepted pass adds its length + 1
    # to the run, so the ramp goes 8, 20, 62 ... until P runs out.
    # insert@0, P = X,1..58: pass 1 d16 a0 r16 +1 (no token agreed yet: no replacement); 1 = P[1], near
    # hint 1: re-anchor j = 2, run = L = 1. ramp: d8 +10, d20 +31, then 62 asked but P[32:59] has 27: d27 a27
    # + EOS. a 8+20+27 = 55, r 16, 4 passes.
    ("default", "insert", 0): (55, 16, 4, 58, [16, 8, 20, 27]),
    # missing@0, P = 2..58: pass 1 d16 a0 r16 +1 (not in P); pass 2 plain +2; 2 = P[0]: anchor 1, run 1.
    # ramp: d8 +11, d20 +32, then P[31:57] d26 a26 + EOS. a 54, r 16, 5 passes.
    ("default", "missing", 0): (54, 16, 5, 58, [16, 0, 8, 20, 26]),
    # replace@0, P = X,2..58: pass 1 d16 a0 r16 +1 (not in P); pass 2 plain +2; 2 = P[1]: anchor 2.
    # ramp: d8 +11, d20 +32, then P[32:58] d26 a26 + EOS. a 54, r 16, 5 passes.
    ("default", "replace", 0): (54, 16, 5, 58, [16, 0, 8, 20, 26]),
    # middle: pass 1 d16 a16 +17 (run 25); pass 2 asks 50, its 13th token is the edit: a12 +30, 28 agreed
    # tokens so far: the drafter goes on at hint = 17 + 13 = 30 (a same-length replacement).
    # insert@29, P = 1..29,X,30..58: pass 2 d42 r30. 30 = P[30] next to hint (j = 31, one token dropped)
    # wins over the replacement: anchor 31. ramp: d8 +39, then P[40:59] d19 a19 + EOS.
    # a 16+12+8+19 = 55, r 30, 4 passes.
    ("default", "insert", 29): (55, 30, 4, 58, [16, 42, 8, 19]),
    # missing@29, P = 1..29,31..58: pass 2 d40 r28. 30 is not in P; hint 30: pass 3 P[30:38] = 32..39 d8 a0
    # r8 +31; 31 = P[29]: anchor 30. ramp: d8 +40, then P[39:57] d18 a18 + EOS. a 54, r 36, 5 passes.
    ("default", "missing", 29): (54, 36, 5, 58, [16, 40, 8, 8, 18]),
    # replace@29, P = 1..29,X,31..58: pass 2 d41 r29. hint 30: P[30] = 31 is right. ramp: d8 +39,
    # then P[39:58] d19 a19 + EOS. a 16+12+8+19 = 55, r 29, 4 passes.
    ("default", "replace", 29): (55, 29, 4, 58, [16, 41, 8, 19]),
    # end: pass 1 d16 +17, pass 2 asks 50 from P[17:], 40 accepted (18..57), +58; then EOS.
    # insert@57: P[17:59] = 18..57,X,58 d42 a40 r2 +58; hint 58: pass 3 drafts P[58] = 58, d1 r1 + EOS.
    # a 56, r 3, 3 passes.
    ("default", "insert", 57): (56, 3, 3, 58, [16, 42, 1]),
    # missing@57: P[17:57] = 18..57 d40 a40 +58 (P used up, hint 58 past its end); pass 3 plain EOS.
    # a 56, r 0, 3 passes.
    ("default", "missing", 57): (56, 0, 3, 58, [16, 40, 0]),
    # replace@57: P[17:58] = 18..57,X d41 a40 r1 +58 (hint 58 = len(P)); pass 3 plain EOS. a 56, r 1, 3 passes.
    ("default", "replace", 57): (56, 1, 3, 58, [16, 41, 0]),
}


@pytest.mark.parametrize("policy,kind,at", list(EDIT_CASES))
def test_one_token_edit(policy, kind, at):
    accepted, rejected, passes, completion, draft_lengths = EDIT_CASES[policy, kind, at]
    stats, steps, out = run_scripted(S58, edited(S58, kind, at), policy)
    assert out == S58
    assert drafts(steps) == draft_lengths
    assert counts(stats) == (accepted, rejected, passes, completion)
    # every output token is either an accepted draft token or the bonus of its pass
    assert completion == accepted + sum(1 for s in steps for f in s.from_draft if not f)
    check_invariants(stats, steps, out)


# -- a prediction longer than the output ------------------------------------------------------------


@pytest.mark.parametrize(
    "policy,expected,draft_lengths",
    [
        # script 1..30 then EOS, P = 1..58. pass 1 d16 a16 +17. pass 2 drafts P[17:33] = 18..33:
        # 18..30 accepted (13), 31 vs EOS rejected with the 2 after it (3), the bonus is EOS.
        ("openai", (29, 3, 2, 30), [16, 16]),
        # default: pass 2 asks 50 (2 run), P[17:58] has 41: a13, r28, bonus EOS.
        ("default", (29, 28, 2, 30), [16, 41]),
    ],
)
def test_prediction_longer_than_output(policy, expected, draft_lengths):
    script = list(range(1, 31))
    stats, steps, out = run_scripted(script, S58, policy)
    assert out == script
    assert drafts(steps) == draft_lengths
    assert counts(stats) == expected
    assert steps[-1].finish_reason == "stop"
    check_invariants(stats, steps, out)


# -- unrelated text ----------------------------------------------------------------------------------


@pytest.mark.parametrize("policy", ["openai", "default"])
def test_unrelated_prediction(policy):
    # P = 200..257 shares no token with the output: no candidate ever exists to re-anchor.
    # pass 1: d16 (initial draft, both policies) a0 r16 +1; passes 2..58 plain (+2 .. +58);
    # pass 59 plain, EOS. passes = completion tokens + 1 (the EOS pass), rejected = the first draft.
    stats, steps, out = run_scripted(S58, list(range(200, 258)), policy)
    assert out == S58
    assert drafts(steps) == [16] + [0] * 58
    assert counts(stats) == (0, 16, 59, 58)
    assert stats.target_passes == stats.completion_tokens + 1
    check_invariants(stats, steps, out)


# -- openai: bounded loss per mismatch and the recovery threshold --------------------------------------


def longest_matching_suffix(out: list[int], prediction: list[int]) -> int:
    """Largest L such that out[-L:] equals some L consecutive tokens of the prediction that are
    followed by at least one more prediction token (something is left to draft)."""
    best = 0
    for j in range(1, len(prediction)):
        L = 0
        while L < len(out) and L < j and prediction[j - 1 - L] == out[-1 - L]:
            L += 1
        best = max(best, L)
    return best


def test_openai_mismatch_costs_at_most_16_and_waits_for_32():
    # s = 1..120, P has s[60:65] replaced by 200..204.
    # passes 1-3: d16 a16 (output 1..51); pass 4: P[51:67], 52..60 accepted (9), 200 vs 61: r7, +61.
    # The output re-enters P with token 66 = P[65]; 32 tokens of agreement (66..97) exist once the
    # output is 1..97, so the 36 tokens 62..97 are generated one per pass (steps 4..39), step 40
    # drafts P[97:113] a16 +114, step 41 drafts P[114:120] d6 a6 + EOS.
    # accepted 48 + 9 + 16 + 6 = 79, rejected 7, 42 passes.
    script = list(range(1, 121))
    prediction = edited(script, "replace", 60, size=5)
    stats, steps, out = run_scripted(script, prediction, "openai")
    assert out == script
    assert counts(stats) == (79, 7, 42, 120)
    assert drafts(steps) == [16, 16, 16, 16] + [0] * 36 + [16, 6]
    for s in steps:
        assert len(s.verdict.draft) - s.verdict.accepted <= 16
    # The same, stated as the rule: after the departure (step 3), a draft is proposed exactly when
    # the output so far ends with 32 consecutive prediction tokens.
    done: list[int] = []
    for i, s in enumerate(steps):
        if i > 3:
            assert (len(s.verdict.draft) > 0) == (longest_matching_suffix(done, prediction) >= 32), i
        done.extend(s.tokens)
    # ... and the first draft after it comes right after 32 matching tokens: 66..97.
    first_after = next(i for i, s in enumerate(steps) if i > 3 and len(s.verdict.draft))
    before = [t for s in steps[:first_after] for t in s.tokens]
    assert before[-32:] == list(range(66, 98)) and before[-33] == 65


# -- the published "a few tokens added, missing or replaced" observation ----------------------------
# OpenAI's docs/forum report about 21 accepted and 11 rejected for a 58-token prediction with a few
# tokens changed. Under our openai policy an edit at output index m in the second pass (17 <= m < 34)
# gives 16 + (m - 17) accepted and 33 - m rejected in that pass; with m = 22 that is exactly 21 / 11.
# Recovery then needs 32 output tokens agreeing with P after the edit: replace/missing of e tokens
# re-enter at output index 22 + e, so 22 + e + 32 output tokens are needed (insert: 22 + 32 = 54);
# whatever the 58-token output has left after that is drafted in one pass and accepted.
# (kind, at, size): (accepted, rejected, passes)
FEW_EDITS = {
    # recovery at 55 tokens: 3 left (56..58), a 21 + 3 = 24; passes 2 + 32 plain (24..55) + 1 = 35
    ("replace", 22, 1): (24, 11, 35),
    # recovery at 57: 1 left, a 22; passes 2 + 34 (24..57) + 1 = 37
    ("replace", 22, 3): (22, 11, 37),
    # 22 + 5 + 32 = 59 > 58: never recovers, a 21 r 11 (the published numbers); 2 + 35 + 1 = 38
    ("replace", 22, 5): (21, 11, 38),
    ("missing", 22, 3): (22, 11, 37),
    ("missing", 22, 5): (21, 11, 38),
    # insert: recovery at 54 whatever the size, 4 left (55..58): a 25; passes 2 + 31 (24..54) + 1 = 34
    ("insert", 22, 3): (25, 11, 34),
    ("insert", 22, 5): (25, 11, 34),
    # edits in the middle (token 30): pass 2 a12 r4 and no recovery (see EDIT_CASES): 28 / 4
    ("replace", 29, 3): (28, 4, 31),
    ("missing", 29, 3): (28, 4, 31),
    ("insert", 29, 3): (28, 4, 31),
}


@pytest.mark.parametrize("kind,at,size", list(FEW_EDITS))
def test_openai_few_tokens_changed(kind, at, size):
    accepted, rejected, passes = FEW_EDITS[kind, at, size]
    stats, steps, out = run_scripted(S58, edited(S58, kind, at, size), "openai")
    assert out == S58
    assert counts(stats) == (accepted, rejected, passes, 58)
    # vs published 21 accepted / 11 rejected: equal for a >= 4-token replacement/deletion at token 23;
    # 21-25 accepted for edits there, 28 / 4 for edits in the middle (a departure later in pass 2).
    check_invariants(stats, steps, out)


# -- invariants on random cases -------------------------------------------------------------------


def random_prediction(rng: random.Random, script: list[int]) -> list[int]:
    choice = rng.random()
    if choice < 0.2:
        return [rng.randint(0, 9) for _ in range(rng.randint(0, 80))]
    pred = list(script)
    for _ in range(rng.randint(0, 4)):
        at = rng.randint(0, len(pred))
        size = rng.randint(1, 6)
        junk = [rng.randint(0, 9) for _ in range(size)]
        kind = rng.choice(["insert", "missing", "replace"])
        pred = pred[:at] + junk + pred[at:] if kind == "insert" else pred[:at] + ([] if kind == "missing" else junk) + pred[at + size :]
    return pred


@pytest.mark.parametrize("seed", range(40))
def test_invariants_random(seed):
    rng = random.Random(seed)
    script = [rng.randint(1, 9) for _ in range(rng.randint(0, 90))]  # small alphabet: many repeats
    prediction = random_prediction(rng, script)
    max_new = rng.randint(1, 100)
    expected = script[:max_new]
    for policy in ("openai", "default"):
        for drafter in (
            PredictionDrafter(prediction, PredictionConfig.for_policy(policy)),
            FirstOf([PredictionDrafter(prediction, PredictionConfig.for_policy(policy)), PromptLookupDrafter()]),
        ):
            stats, steps, out = run_scripted(script, prediction, max_new_tokens=max_new, drafter=drafter)
            assert out == expected
            check_invariants(stats, steps, out)
            assert steps[-1].finish_reason == ("length" if len(script) >= max_new else "stop")
            assert all(s.finish_reason is None for s in steps[:-1])


# -- stop strings ----------------------------------------------------------------------------------

TEXT = "The quick brown fox jumps over the lazy dog."  # 44 bytes = 44 tokens of the ByteTokenizer


def byte_generator() -> Generator:
    tok = ByteTokenizer()
    return Generator(ScriptedRunner(tok.encode(TEXT), tok.vocab_size, tok.eos), tok)


@pytest.mark.parametrize(
    "policy,stop,expected",
    [
        # "lazy" = bytes 35..38: the stop string is complete with token 38, 39 tokens are kept.
        # default: pass 1 d16 a16 + byte 16; pass 2 drafts bytes 17..43 (27 < 33), all confirmed,
        # bonus EOS; the stop cuts after byte 38: 22 kept (accepted), the 5 of " dog." are rejected.
        ("default", "lazy", (38, 5, 2, 39)),
        # openai: pass 1 d16 a16 +16; pass 2 d16 (17..32) a16 +33; pass 3 drafts 34..43 (10), all
        # confirmed; 34..38 kept (a5), 39..43 cut (r5). accepted 37, rejected 5.
        ("openai", "lazy", (37, 5, 3, 39)),
        # "brown" = bytes 10..14, inside the first draft (0..15): 15 tokens kept, all accepted; byte 15
        # is cut (r1); the bonus byte 16 is cut too but it is no draft token: counted nowhere.
        ("default", "brown", (15, 1, 1, 15)),
        ("openai", "brown", (15, 1, 1, 15)),
    ],
)
def test_stop_string_inside_accepted_draft(policy, stop, expected):
    assert TEXT.index("lazy") == 35 and TEXT.index("brown") == 10
    res = byte_generator().generate("prompt", prediction=TEXT, drafter="prediction", policy=policy, stop=[stop], max_new_tokens=100)
    accepted, rejected, passes, completion = expected
    assert res.finish_reason == "stop"
    assert res.text == TEXT[: TEXT.index(stop)]
    assert res.token_ids == list(TEXT.encode())[:completion]  # the stop string's own tokens are kept
    assert counts(res.stats) == expected
    assert res.stats.draft_tokens == accepted + rejected
    assert sum(res.from_draft) == accepted and len(res.from_draft) == completion
    assert res.stats.by_source == {"prediction": [accepted, rejected]}
