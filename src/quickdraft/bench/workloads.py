"""Benchmark prompts from the shared data sets (../shared/data beside the checkout, or $QUICKDRAFT_DATA).

Each workload yields Tasks: the user turns of one conversation, an optional prediction, and an id.
Prompts are built the way a user would send them: one user message per turn (the harness applies the
model's chat template), edit requests as `quickdraft generate --edit` words them (prompts.py).

Workloads (`WORKLOADS`, with the file each one reads under the data folder):

    mt_bench, translation, summarization, qa, math_reasoning, rag   Spec-Bench (spec_bench/question.jsonl);
        mt_bench is Spec-Bench's name for its 80 MT-bench questions (8 categories, 2 turns each)
    humaneval    HumanEval prompts, as a request to complete the function
    edit_eval    EditEval code edits; prediction = the code before the edit
    refactor     Aider refactor set, whole files, smallest first; prediction = the original file
    apply_edit_eval, apply_refactor   a lazy edit snippet to merge into the file (bench/apply.py), from
                 EditEval's edits and refactors (the model's own answers, else the method moved by
                 apply.move_method_out); prediction = the merge the snippet describes
"""

from __future__ import annotations

import gzip
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from ..errors import QuickdraftError
from ..prompts import apply_request, edit_request
from . import apply

SPEC_BENCH_CATEGORIES = ("mt_bench", "translation", "summarization", "qa", "math_reasoning", "rag")
MT_BENCH_CATEGORIES = ("writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem", "humanities")


@dataclass(frozen=True)
class Task:
    """One benchmark conversation.

    messages: the first request (chat messages). followups: later user turns, each sent after the
    model's own answer to the previous one (MT-bench has two turns). prediction: the text the output
    is expected to resemble (edits only), drafted from by the prediction methods.
    """

    id: str
    messages: list[dict[str, str]]
    prediction: str | None = None
    followups: tuple[str, ...] = ()
    reference: Any = None  # what the first answer is scored against (bench/scoring.py): text(s) or a problem

    @property
    def turns(self) -> int:
        return 1 + len(self.followups)


def data_dir(override: str | None = None) -> Path:
    """The data folder: `override`, else $QUICKDRAFT_DATA, else ../shared/data beside the checkout."""
    if override is not None:
        if not Path(override).is_dir():
            raise QuickdraftError(f"benchmark data folder not found: {override!r} (--data must name the shared/data folder)")
        return Path(override)
    env = os.environ.get("QUICKDRAFT_DATA")
    if env:
        if not Path(env).is_dir():
            raise QuickdraftError(f"QUICKDRAFT_DATA={env!r} is not a folder: point it at the shared/data folder")
        return Path(env)
    default = Path(__file__).resolve().parents[4] / "shared" / "data"
    if default.is_dir():
        return default
    raise QuickdraftError("benchmark data not found: pass --data DIR or set QUICKDRAFT_DATA to the shared/data folder")


def _jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def refactor(data: Path, limit: int | None = None) -> Iterator[Task]:
    """The Aider refactor set, smallest files first; prediction = the original file."""
    rows = sorted(_jsonl(data / "aider_refactor" / "refactor_tasks.jsonl"), key=lambda r: r["original_chars"])
    for r in rows[:limit]:
        message, prediction = edit_request(r["instruction"], r["original_code"], r["filename"])
        yield Task(r["task_id"], [{"role": "user", "content": message}], prediction)


def spec_bench(data: Path, category: str, limit: int | None = None) -> Iterator[Task]:
    """Spec-Bench questions of one category, every turn (mt_bench: the 8 MT-bench categories, 2 turns)."""
    wanted = set(MT_BENCH_CATEGORIES) if category == "mt_bench" else {category}
    rows = [r for r in _jsonl(data / "spec_bench" / "question.jsonl") if r["category"] in wanted]
    if not rows:
        raise QuickdraftError(f"no Spec-Bench questions in category {category!r}")
    for r in rows[:limit]:
        turns = r["turns"]
        reference = r["reference"][0] if r.get("reference") else None  # the first turn's (a text, or rag's list)
        yield Task(f"{category}-{r['question_id']}", [{"role": "user", "content": turns[0]}], followups=tuple(turns[1:]),
                   reference=reference)


def humaneval(data: Path, limit: int | None = None) -> Iterator[Task]:
    """HumanEval prompts as a chat request to complete the function (no prediction)."""
    with gzip.open(data / "humaneval" / "HumanEval.jsonl.gz", "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    for r in rows[:limit]:
        message = ("Complete the following Python function. Reply with the whole function in one code block.\n"
                   f"```python\n{r['prompt'].rstrip()}\n```")
        yield Task(r["task_id"], [{"role": "user", "content": message}], reference=r)  # scored by its own tests


def edit_eval(data: Path, limit: int | None = None) -> Iterator[Task]:
    """EditEval: edit a piece of code; prediction = the code before the edit, fenced as the answer is.

    Where the data set gives the surrounding file (`context`, with a {{Code}} placeholder), it is
    shown first, the placeholder marking where the code sits, so the model sees what the code uses.
    """
    for r in _jsonl(data / "edit_eval" / "edit_eval.jsonl")[:limit]:
        message, prediction = edit_request(r["instruction"], r["input"], "code.py")
        context = (r.get("context") or "").strip()
        if context:
            shown = context.replace("{{Code}}", "# ... the code to edit goes here ...")
            message = f"The code below sits in this file:\n```python\n{shown}\n```\n\nThe code to edit:\n{message}"
        yield Task(r["task_id"], [{"role": "user", "content": message}], prediction)


def _apply_tasks(cases: Iterator[apply.ApplyCase], limit: int | None) -> Iterator[Task]:
    for case in list(cases)[:limit]:
        message, prediction = apply_request(case.original, case.snippet, case.filename)
        yield Task(case.id, [{"role": "user", "content": message}], prediction)


def apply_edit_eval(data: Path, limit: int | None = None) -> Iterator[Task]:
    """EditEval edits as lazy snippets to merge into the file (bench/apply.py); prediction = the merge the snippet
    describes."""
    return _apply_tasks(apply.edit_eval_cases(data), limit)


def apply_refactor(data: Path, limit: int | None = None) -> Iterator[Task]:
    """Refactors (the model's own answers, else moved by apply.move_method_out) as lazy snippets to merge, smallest
    file first; prediction = the merge the snippet describes."""
    return _apply_tasks(apply.refactor_cases(data), limit)


def _spec(category: str) -> Callable[[Path, int | None], Iterator[Task]]:
    return lambda data, limit=None: spec_bench(data, category, limit)


@dataclass(frozen=True)
class Workload:
    name: str
    file: str  # relative to the data folder
    load: Callable[[Path, int | None], Iterator[Task]]
    has_prediction: bool = False


WORKLOADS: dict[str, Workload] = {w.name: w for w in (
    *(Workload(c, "spec_bench/question.jsonl", _spec(c)) for c in SPEC_BENCH_CATEGORIES),
    Workload("humaneval", "humaneval/HumanEval.jsonl.gz", humaneval),
    Workload("edit_eval", "edit_eval/edit_eval.jsonl", edit_eval, has_prediction=True),
    Workload("refactor", "aider_refactor/refactor_tasks.jsonl", refactor, has_prediction=True),
    Workload("apply_edit_eval", "edit_eval/edit_eval.jsonl", apply_edit_eval, has_prediction=True),
    Workload("apply_refactor", "aider_refactor/refactor_tasks.jsonl", apply_refactor, has_prediction=True),
)}
GROUPS = {"spec_bench": SPEC_BENCH_CATEGORIES, "all": tuple(WORKLOADS)}


def expand_names(names: str | list[str], known, groups: dict, what: str) -> list[str]:
    """Names from a comma-separated list (or a list), groups expanded, duplicates dropped, in order.

    Example: expand_names("a,g", {"a", "b", "c"}, {"g": ("b", "a")}, "x") -> ["a", "b"].
    """
    items = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
    out: list[str] = []
    for n in items:
        for e in groups.get(n, (n,)) if n else ():
            if e not in known:
                raise QuickdraftError(f"unknown {what} {e!r}: choose from {', '.join(known)} "
                                      f"(or the groups {', '.join(groups)})")
            if e not in out:
                out.append(e)
    if not out:
        raise QuickdraftError(f"no {what} given: pass --{what}s with one or more of " + ", ".join(known))
    return out


def select(names: str | list[str]) -> list[str]:
    """Workload names from a comma-separated list (groups: spec_bench, all), in the order given.

    >>> select("refactor,spec_bench")[:3]
    ['refactor', 'mt_bench', 'translation']
    """
    return expand_names(names, WORKLOADS, GROUPS, "workload")


def check_files(data: Path, names: list[str]) -> None:
    """Fail before any model loads if a selected workload's file is missing."""
    for n in names:
        path = data / WORKLOADS[n].file
        if not path.is_file():
            raise QuickdraftError(f"workload {n!r} needs {path}, which does not exist: is {data} the shared/data folder?")
