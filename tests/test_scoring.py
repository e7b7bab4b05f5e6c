"""The benchmark's quality scorers (bench/scoring.py) on known inputs: HumanEval's own tests on passing,
failing, looping and misbehaving completions; chrF and BLEU against sacrebleu's published example;
ROUGE-L worked out by hand; final-number extraction on tricky formats; the bootstrap interval."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

from quickdraft.bench import scoring

DATA = Path(os.environ.get("QUICKDRAFT_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


@pytest.fixture(scope="module")
def problems():
    with gzip.open(DATA / "humaneval" / "HumanEval.jsonl.gz", "rt") as f:
        return {p["task_id"]: p for p in map(json.loads, f)}


def test_humaneval_canonical_solution_passes_and_a_wrong_one_fails(problems):
    p = problems["HumanEval/0"]
    assert scoring.run_humaneval(p, p["canonical_solution"]) == scoring.ExecResult(True, "passed")
    whole = "Here it is:\n```python\nfrom typing import List\n\ndef has_close_elements(numbers, threshold):\n" \
            "    return any(abs(a - b) < threshold for i, a in enumerate(numbers) for b in numbers[i + 1:])\n```\n"
    assert scoring.run_humaneval(p, whole).passed  # a chat answer with the whole function in a fence
    wrong = scoring.run_humaneval(p, "    return False\n")
    assert not wrong.passed and wrong.status.startswith("failed: AssertionError")
    broken = scoring.run_humaneval(p, "    return (\n")
    assert not broken.passed and "SyntaxError" in broken.status


def test_an_infinite_loop_is_killed_by_the_time_limit(problems):
    r = scoring.run_humaneval(problems["HumanEval/0"], "    while True:\n        pass\n", timeout=2.0)
    assert r == scoring.ExecResult(False, "timed out")


def test_sockets_processes_and_writes_outside_the_folder_fail_safely(problems, tmp_path):
    p = problems["HumanEval/0"]
    outside = tmp_path / "written-by-a-completion.txt"
    for body in ("    import socket\n    socket.create_connection(('127.0.0.1', 9))\n",
                 "    import urllib.request\n    urllib.request.urlopen('http://127.0.0.1:9/')\n",
                 f"    open({str(outside)!r}, 'w').write('x')\n",
                 f"    import os\n    os.close(os.open({str(outside)!r}, os.O_WRONLY | os.O_CREAT))\n",
                 "    import os\n    os.system('true')\n",
                 "    import subprocess\n    subprocess.run(['true'])\n"):
        r = scoring.run_humaneval(p, body + "    return False\n")
        assert not r.passed and "quickdraft sandbox" in r.status, (body, r)
    assert not outside.exists()
    # its own folder is writable: a completion that writes a scratch file there still passes
    assert scoring.run_humaneval(p, "    open('scratch.txt', 'w').write('fine')\n" + p["canonical_solution"]).passed


def test_chrf_and_bleu_match_sacrebleus_published_example():
    # sacrebleu's README: BLEU = 48.53 and chrF2 = 59.73 for this corpus; per sentence, as the bench scores
    refs = [["The dog bit the man.", "It was not unexpected.", "The man bit him first."],
            ["The dog had bit the man.", "No one was surprised.", "The man had bitten the dog."]]
    hyps = ["The dog bit the man.", "It wasn't surprising.", "The man had just bitten him."]
    import sacrebleu

    assert round(sacrebleu.corpus_bleu(hyps, refs).score, 2) == 48.53
    assert round(sacrebleu.corpus_chrf(hyps, refs).score, 2) == 59.73
    assert scoring.bleu(hyps[0], [refs[0][0], refs[1][0]]) == pytest.approx(100.0)
    assert scoring.chrf(hyps[0], [refs[0][0]]) == pytest.approx(100.0)
    assert 0 < scoring.chrf(hyps[1], [refs[0][1], refs[1][1]]) < 60
    assert scoring.score("translation", hyps[2], [refs[0][2], refs[1][2]]).keys() == {"chrF", "BLEU"}


def test_rouge_l_by_hand():
    # LCS of "the quick brown fox jumps over the lazy dog" and "the quick brown dog jumps on the log" is 5
    # tokens (the quick brown jumps the): precision 5/8, recall 5/9, F1 = 2PR / (P + R) = 10/17
    assert scoring.rouge_l("The quick brown dog jumps on the log.", ["The quick brown fox jumps over the lazy dog"]) \
        == pytest.approx(100 * 10 / 17)
    assert scoring.rouge_l("a b c", ["x y z", "a b c"]) == pytest.approx(100.0)  # the best reference counts


@pytest.mark.parametrize("text, number", [
    ("He pays 200 more.\nSo it cost 600+400=$<<600+400=1000>>1000\n#### 1000", 1000),
    ("The answer is $1,234.50.", 1234.5),
    ("So the total is 12 apples, and 3 were left: the answer: 15", 15),
    ("We get \\boxed{-7} after all.", -7),
    ("First 3, then 4, finally 42%", 42),
    ("She had .5 of it", 0.5),
    ("no digits here", None),
])
def test_final_number(text, number):
    assert scoring.final_number(text) == number


def test_math_correct_compares_values():
    ref = "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n#### 72"
    assert scoring.math_correct("48 + 24 = 72 clips. The answer is 72.", ref)
    assert scoring.math_correct("In total 72.0", ref)
    assert not scoring.math_correct("The answer is 70.", ref) and not scoring.math_correct("none", ref)
    assert scoring.score("math_reasoning", "answer: 72", [ref]) == {"accuracy": 100.0}


def test_bootstrap_interval_covers_the_mean_and_narrows_with_more_tasks():
    small = [1.0, 0.0] * 5
    large = small * 20
    m, lo, hi = scoring.bootstrap(small)
    assert m == 0.5 and lo < 0.5 < hi
    m2, lo2, hi2 = scoring.bootstrap(large)
    assert m2 == 0.5 and (hi2 - lo2) < (hi - lo) / 2
    assert scoring.bootstrap([3.0, 3.0]) == (3.0, 3.0, 3.0)
    with pytest.raises(ValueError):
        scoring.bootstrap([])


def test_no_scorer_no_scores():
    assert scoring.score("qa", "anything", None) == {} and scoring.score("mt_bench", "x", "y") == {}
