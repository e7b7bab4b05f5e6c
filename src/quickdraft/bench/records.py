"""The files of a benchmark run: runs.jsonl (one row per run, appended and flushed as each one ends) and run.json
(the options, machines, versions and models of every invocation).

A row is keyed by (workload, task, method, repeat); a resumed run skips the keys already there without an error.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

RUNS_FILE, META_FILE = "runs.jsonl", "run.json"
SCHEMA = 1


def read_meta(out: Path) -> dict:
    path = Path(out) / META_FILE
    if not path.is_file():
        return {}
    return json.loads(path.read_text(encoding="utf-8"))


def write_meta(out: Path, meta: dict) -> None:
    path = Path(out) / META_FILE
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def read_runs(out: Path) -> list[dict]:
    """Rows of runs.jsonl; a last line cut short by a crash is ignored."""
    path = Path(out) / RUNS_FILE
    if not path.is_file():
        return []
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return rows


def row_key(row: dict) -> tuple[str, str, str, int]:
    return row["workload"], row["task"], row["method"], row["repeat"]
