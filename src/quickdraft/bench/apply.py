"""Lazy-snippet apply: the original file and an edit snippet whose unchanged regions are elided with a
marker (`# ... existing code ...`); the model writes the whole merged file, the original file as prediction.

Editors ask for this "fast apply" (Zed, Continue; Cursor, Morph and Relace train models for it). The
benchmark's apply workloads build their snippets here from (original, edited) pairs:

    apply_edit_eval   EditEval: the code in its surrounding file (`context`, where there is one), before and
                      after (`input`, `output`); only rows whose snippet elides something
    apply_refactor    the Aider refactor set: the edited file is qwen2.5-coder-0.5b's own greedy answer to
                      the refactor request, kept as line edits in apply_refactor_edits.jsonl beside this module
                      (docs/results/2026-11-27-apply/make_refactor_edits.py made it); only whole-file answers
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from difflib import SequenceMatcher
from pathlib import Path
from typing import Iterator

from ..prompts import MARKER

# a language's comment form (prefix, suffix), by file extension; language names map to an extension
COMMENTS = {**dict.fromkeys((".py", ".sh", ".rb", ".pl", ".r", ".yaml", ".yml", ".toml"), ("#", "")),
            **dict.fromkeys((".js", ".jsx", ".ts", ".tsx", ".c", ".h", ".cc", ".cpp", ".hpp", ".java", ".go", ".rs",
                             ".cs", ".kt", ".swift", ".scala", ".php", ".dart"), ("//", "")),
            **dict.fromkeys((".sql", ".lua", ".hs"), ("--", "")),
            **dict.fromkeys((".html", ".xml", ".md", ".vue"), ("<!--", " -->")), ".css": ("/*", " */")}
LANGUAGES = {"python": ".py", "bash": ".sh", "shell": ".sh", "ruby": ".rb", "javascript": ".js", "typescript": ".ts",
             "c": ".c", "c++": ".cpp", "cpp": ".cpp", "java": ".java", "go": ".go", "rust": ".rs", "c#": ".cs",
             "kotlin": ".kt", "swift": ".swift", "php": ".php", "sql": ".sql", "lua": ".lua", "haskell": ".hs",
             "html": ".html", "xml": ".xml", "markdown": ".md", "css": ".css", "yaml": ".yaml"}


def marker_line(filename: str = "file.py", indent: str = "", language: str | None = None) -> str:
    """The marker in the file's comment form: `language` (the data's field) if given, else the extension's.

    >>> marker_line("a.py", "    "), marker_line("a.rs"), marker_line("x", language="JavaScript")
    ('    # ... existing code ...', '// ... existing code ...', '// ... existing code ...')
    """
    ext = LANGUAGES.get(language.lower(), "") if language else Path(filename).suffix.lower()
    prefix, suffix = COMMENTS.get(ext, ("#", ""))
    return f"{indent}{prefix} {MARKER}{suffix}"


def _indent(lines: list[str]) -> str:
    """The indentation of the least-indented non-blank line (what a marker standing for them is indented by)."""
    shown = [line for line in lines if line.strip()]
    return min((line[:len(line) - len(line.lstrip())] for line in shown), key=len, default="")


def lazy_snippet(original: str, edited: str, filename: str = "file.py", context: int = 2,
                 language: str | None = None) -> str:
    """The edited file with each unchanged region of more than one line, away from the changes, elided.

    A line diff (difflib) groups the changes with `context` unchanged lines on each side, as a unified diff
    does; the snippet is the edited side of each group, with one marker line for each region between groups
    (and before the first, after the last) that holds a non-blank line and more than one line. Deleted lines
    simply do not appear: the context around them says where they were. No change: the marker alone.

    Example (context 1): lines 0..19, line 10 changed to X -> `# ...`, line 9, X, line 11, `# ...`.
    """
    a, b = original.splitlines(), edited.splitlines()
    if a == b:
        return marker_line(filename, _indent(a), language)
    groups = list(SequenceMatcher(None, a, b, autojunk=False).get_grouped_opcodes(context))
    out: list[str] = []
    j_prev = 0  # where the last group ended, in the edited lines
    for group in [*groups, [("equal", len(a), len(a), len(b), len(b))]]:  # the sentinel closes the file's tail
        j1 = group[0][3]
        gap = b[j_prev:j1]  # unchanged lines between groups: the same in both files
        if len(gap) > 1 and any(line.strip() for line in gap):
            out.append(marker_line(filename, _indent(gap), language))
        else:
            out.extend(gap)
        out.extend(b[j1:group[-1][4]])
        j_prev = group[-1][4]
    return "\n".join(out)


# -- line edits: an edited file stored as changes to the original ---------------------------------------

def line_edits(original: str, edited: str) -> list[tuple[int, int, str]]:
    """(start, end, text): original lines [start, end) become `text` (lines with their newlines)."""
    a, b = original.splitlines(keepends=True), edited.splitlines(keepends=True)
    return [(i1, i2, "".join(b[j1:j2])) for op, i1, i2, j1, j2 in
            SequenceMatcher(None, a, b, autojunk=False).get_opcodes() if op != "equal"]


def apply_line_edits(original: str, edits: list[tuple[int, int, str]]) -> str:
    """The inverse of line_edits: apply_line_edits(x, line_edits(x, y)) == y."""
    a = original.splitlines(keepends=True)
    for start, end, text in sorted(edits, reverse=True):  # from the end: earlier indices stay valid
        a[start:end] = [text]
    return "".join(a)


# -- the workloads' cases ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class ApplyCase:
    """One apply task: the file before, the file the snippet describes, and the snippet."""

    id: str
    filename: str
    original: str
    edited: str
    snippet: str


def _jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _case(task_id: str, filename: str, original: str, edited: str) -> ApplyCase | None:
    """The case, or None where the snippet would elide nothing (no marker: the snippet is the whole file)."""
    snippet = lazy_snippet(original, edited, filename)
    return ApplyCase(task_id, filename, original, edited, snippet) if MARKER in snippet and original != edited else None


def edit_eval_cases(data: Path) -> Iterator[ApplyCase]:
    """EditEval rows whose snippet elides something, in file order; the code sits in its `context` file."""
    for r in _jsonl(data / "edit_eval" / "edit_eval.jsonl"):
        context = r.get("context") or ""
        place = (lambda code: context.replace("{{Code}}", code)) if "{{Code}}" in context else (lambda code: code)
        case = _case(f"apply-{r['task_id']}", "code.py", place(r["input"]), place(r["output"]))
        if case is not None:
            yield case


REFACTOR_EDITS = Path(__file__).with_name("apply_refactor_edits.jsonl")


def refactor_cases(data: Path, edits_file: Path = REFACTOR_EDITS) -> Iterator[ApplyCase]:
    """Refactor tasks with a recorded whole-file answer (edits_file; edits null: the answer was not one),
    smallest file first."""
    edits = {e["task_id"]: e["edits"] for e in _jsonl(edits_file) if e["edits"] is not None}
    rows = sorted(_jsonl(data / "aider_refactor" / "refactor_tasks.jsonl"), key=lambda r: r["original_chars"])
    for r in rows:
        if r["task_id"] in edits:
            edited = apply_line_edits(r["original_code"], [tuple(e) for e in edits[r["task_id"]]])
            case = _case(f"apply-{r['task_id']}", r["filename"], r["original_code"], edited)
            if case is not None:
                yield case
