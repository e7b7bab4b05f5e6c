"""Task quality, for comparing lossy methods (mentored decoding, typical and threshold acceptance) with exact
ones: what a method's speed costs in answers. Libraries made for each metric, not hand-written ones:

    humaneval       pass@1: the task's own tests run against the completion in a separate process with
                    a time limit, a memory limit, its own empty folder and no sockets (run_humaneval)
    math_reasoning  the final number of the answer against GSM8K's ("#### N") (final_number)
    translation     chrF and BLEU (sacrebleu) against the reference
    summarization   ROUGE-L F1 (rouge-score) against the reference
    rag             ROUGE-L F1 against the best of the references

score(workload, output, task) gives a row's scores (a dict, empty where the workload has no scorer);
bootstrap() the confidence interval of a mean over tasks. Corpus BLEU and chrF are computed per task
(sentence level) so that every method's scores can be bootstrapped the same way.
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from typing import Any, Sequence

# -- HumanEval ------------------------------------------------------------------------------------------

TIMEOUT_S = 10.0  # wall-clock limit of one task's tests (HumanEval's own harness uses 3 s; slow CPUs here)
MEMORY_BYTES = 1 << 30  # address-space limit of the child

# Runs in the child before the program: no sockets, no processes, no writes outside its folder. Python's
# audit hooks cannot be removed once added; a completion that tries any of these gets an exception,
# which fails its tests. Not a security boundary against a hostile program (ctypes could go around it):
# it keeps a model's mistakes from touching the machine.
_GUARD = r'''
import os, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))
resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 24, 1 << 24))
HOME = os.path.realpath(os.getcwd())
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
BLOCKED = ("socket.", "subprocess.", "os.system", "os.exec", "os.posix_spawn", "os.fork", "os.kill", "os.killpg",
           "pty.", "ctypes.", "shutil.rmtree", "os.chmod", "os.chown")
def _inside(path):
    try:
        return os.path.realpath(os.fsdecode(path)).startswith(HOME + os.sep)
    except (TypeError, ValueError):
        return False
def _guard(event, args):
    if event.startswith(BLOCKED):
        raise PermissionError(f"quickdraft sandbox: {event} is not allowed")
    if event == "open":
        path, mode, flags = args
        writes = any(c in mode for c in "wax+") if isinstance(mode, str) else bool(flags & WRITE_FLAGS)
        if writes and not _inside(path):
            raise PermissionError(f"quickdraft sandbox: writing {path!r} outside the task's folder")
    if event in ("os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.truncate") and not _inside(args[0]):
        raise PermissionError(f"quickdraft sandbox: {event} outside the task's folder")
sys.addaudithook(_guard)
del _guard
'''


@dataclass(frozen=True)
class ExecResult:
    passed: bool
    status: str  # "passed", "failed: <what>", "timed out"


def extract_code(text: str) -> str:
    """The code of a chat answer: the first fenced block (```python or ```), else the text itself."""
    m = re.search(r"```[a-zA-Z0-9_+-]*\n(.*?)(?:```|$)", text, re.S)
    return m.group(1) if m else text


def humaneval_program(problem: dict[str, Any], completion: str) -> str:
    """The program that runs the task's tests on a completion: the completion's code where it defines the
    entry point itself (a chat answer with the whole function), else the prompt followed by it (a
    continuation of the function's body), then the tests and `check(entry_point)`."""
    code = extract_code(completion)
    entry = problem["entry_point"]
    defines = re.search(rf"^\s*def\s+{re.escape(entry)}\s*\(", code, re.M) is not None
    body = code if defines else problem["prompt"] + code
    if defines:  # the prompt's imports and helpers, without redefining the entry point
        header = problem["prompt"].split(f"def {entry}")[0]
        body = header + "\n" + body
    return f"{body}\n\n{problem['test']}\n\ncheck({entry})\n"


def run_humaneval(problem: dict[str, Any], completion: str, timeout: float = TIMEOUT_S) -> ExecResult:
    """Run the task's tests on the completion in a child Python (isolated mode, its own empty folder,
    limits and guard above), killed after `timeout` seconds."""
    program = humaneval_program(problem, completion)
    with tempfile.TemporaryDirectory(prefix="quickdraft-he-") as folder:
        runner = _GUARD.replace("MEMORY", str(MEMORY_BYTES)) + "\nexec(compile(PROGRAM, 'completion.py', 'exec'), {'__name__': '__main__'})\n"
        script = os.path.join(folder, "run.py")
        with open(script, "w", encoding="utf-8") as f:
            f.write(f"PROGRAM = {json.dumps(program)}\n{runner}")
        try:
            done = subprocess.run([sys.executable, "-I", "-S", script], cwd=folder, capture_output=True, text=True,
                                  timeout=timeout, env={"PATH": "/usr/bin:/bin", "HOME": folder}, start_new_session=True)
        except subprocess.TimeoutExpired:
            return ExecResult(False, "timed out")
    if done.returncode == 0:
        return ExecResult(True, "passed")
    lines = [x for x in done.stderr.strip().splitlines() if x.strip()]
    return ExecResult(False, "failed: " + (lines[-1][:200] if lines else f"exit code {done.returncode}"))


# -- math ------------------------------------------------------------------------------------------------

_NUMBER = r"-?\d[\d,]*(?:\.\d+)?|-?\.\d+"


def final_number(text: str) -> float | None:
    """The answer's final number: after GSM8K's "####", else in the last \\boxed{}, else after the last
    "answer is", else the last number in the text. Thousands separators, $ and % are dropped."""
    for pattern in (r"####\s*\$?\s*(" + _NUMBER + ")", r"\\boxed\{\s*\$?\s*(" + _NUMBER + r")",
                    r"answer(?: is|:)\s*\$?\s*(" + _NUMBER + ")"):
        hits = re.findall(pattern, text, re.I)
        if hits:
            return _number(hits[-1])
    hits = re.findall(_NUMBER, text)
    return _number(hits[-1]) if hits else None


def _number(s: str) -> float | None:
    try:
        return float(s.replace(",", ""))
    except ValueError:
        return None


def math_correct(output: str, reference: str) -> bool:
    want, got = final_number(reference), final_number(output)
    return want is not None and got is not None and math.isclose(want, got, rel_tol=1e-9, abs_tol=1e-9)


# -- text ------------------------------------------------------------------------------------------------

def chrf(hypothesis: str, references: Sequence[str]) -> float:
    import sacrebleu

    return sacrebleu.sentence_chrf(hypothesis, list(references)).score


def bleu(hypothesis: str, references: Sequence[str]) -> float:
    import sacrebleu

    return sacrebleu.sentence_bleu(hypothesis, list(references)).score


def rouge_l(hypothesis: str, references: Sequence[str]) -> float:
    """ROUGE-L F1 (0..100) against the best-matching reference."""
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(["rougeL"])
    return 100 * max(scorer.score(ref, hypothesis)["rougeL"].fmeasure for ref in references)


# -- per row, and intervals -------------------------------------------------------------------------------

def score(workload: str, output: str, reference: Any) -> dict[str, float]:
    """The scores of one answer (`output`, the method's text) for a workload: {} where there is no scorer or
    no reference. reference: a HumanEval problem dict, or the task's reference text(s)."""
    if reference is None:
        return {}
    if workload == "humaneval":
        result = run_humaneval(reference, output)
        return {"pass@1": 100.0 * result.passed}
    refs = [reference] if isinstance(reference, str) else [str(r) for r in reference]
    if workload == "math_reasoning":
        return {"accuracy": 100.0 * math_correct(output, refs[0])}
    if workload == "translation":
        return {"chrF": chrf(output, refs), "BLEU": bleu(output, refs)}
    if workload in ("summarization", "rag"):
        return {"ROUGE-L": rouge_l(output, refs)}
    return {}


def bootstrap(values: Sequence[float], samples: int = 2000, level: float = 0.95, seed: int = 0) -> tuple[float, float, float]:
    """(mean, low, high): the mean of `values` and its percentile bootstrap interval."""
    if not values:
        raise ValueError("no values to bootstrap")
    rng = random.Random(seed)
    n = len(values)
    means = sorted(sum(rng.choices(values, k=n)) / n for _ in range(samples))
    lo = means[int((1 - level) / 2 * samples)]
    hi = means[min(samples - 1, int((1 + level) / 2 * samples))]
    return sum(values) / n, lo, hi
