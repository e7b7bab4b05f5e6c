"""The files of a benchmark run: runs.jsonl (one row per run, appended and flushed as each one ends) and run.json
(the options, machines, versions and models of every invocation).

A row is keyed by (workload, task, method, repeat); a resumed run skips the keys already there without an error.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from ..errors import QuickdraftError

RUNS_FILE, META_FILE = "runs.jsonl", "run.json"
SCHEMA = 1


def read_meta(out: Path) -> dict:
    path = Path(out) / META_FILE
    if not path.is_file():
        return {}
    try:
        meta = json.loads(path.read_bytes())
    except ValueError as e:  # JSONDecodeError, UnicodeDecodeError
        raise QuickdraftError(f"{path} is not valid JSON ({e}): move it away, or use another --out") from None
    if not isinstance(meta, dict):
        raise QuickdraftError(f"{path} holds a JSON {type(meta).__name__}, not a run's record: use another --out")
    return meta


def write_meta(out: Path, meta: dict) -> None:
    path = Path(out) / META_FILE
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def read_runs(out: Path) -> list[dict]:
    """Rows of runs.jsonl; a last line cut short by a crash is ignored, any other line that is not a row is skipped
    with a warning."""
    path = Path(out) / RUNS_FILE
    if not path.is_file():
        return []
    rows, bad = [], []
    with open(path, "rb") as f:
        lines = f.read().split(b"\n")
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:  # JSONDecodeError, UnicodeDecodeError
            row = None
        if isinstance(row, dict) and all(k in row for k in ("workload", "task", "method", "repeat")):
            rows.append(row)
        elif i < len(lines):  # a whole line (the last piece, with no newline after it, is one a crash cut short)
            bad.append(i)
    if bad:
        print(f"warning: {path}: line(s) {', '.join(map(str, bad[:5]))} are not runs; skipped", file=sys.stderr)
    return rows


def end_at_a_line(out: Path) -> None:
    """Cut runs.jsonl back to its last complete line, so that rows appended next start on a line of their own
    (a run killed mid-write leaves a partial row)."""
    path = Path(out) / RUNS_FILE
    if not path.is_file():
        return
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        with open(path, "r+b") as f:
            f.truncate(data.rfind(b"\n") + 1)


def row_key(row: dict) -> tuple[str, str, str, int]:
    return row["workload"], row["task"], row["method"], row["repeat"]
