"""Benchmark prompts from the shared data sets (../shared/data beside the checkout, or $QUICKDRAFT_DATA).

Each workload yields Tasks: chat messages, an optional prediction, and an id. Prompts are built
the way a user would send them: the instruction, then the file in a code block.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from ..errors import QuickdraftError
from ..prompts import edit_request


@dataclass(frozen=True)
class Task:
    id: str
    messages: list[dict[str, str]]
    prediction: str | None = None


def data_dir(override: str | None = None) -> Path:
    candidates = [override, os.environ.get("QUICKDRAFT_DATA"), Path(__file__).resolve().parents[4] / "shared" / "data"]
    for c in candidates:
        if c and Path(c).is_dir():
            return Path(c)
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
    """First-turn Spec-Bench questions of one category (no prediction)."""
    rows = [r for r in _jsonl(data / "spec_bench" / "question.jsonl") if r["category"] == category]
    if not rows:
        raise QuickdraftError(f"no Spec-Bench questions in category {category!r}")
    for r in rows[:limit]:
        yield Task(f"{category}-{r['question_id']}", [{"role": "user", "content": r["turns"][0]}])


def humaneval(data: Path, limit: int | None = None) -> Iterator[Task]:
    """HumanEval prompts as a chat request to complete the function (no prediction)."""
    import gzip

    with gzip.open(data / "humaneval" / "HumanEval.jsonl.gz", "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    for r in rows[:limit]:
        message = ("Complete the following Python function. Reply with the whole function in one code block.\n"
                   f"```python\n{r['prompt'].rstrip()}\n```")
        yield Task(r["task_id"], [{"role": "user", "content": message}])
