"""Lazy-snippet apply: the original file and an edit snippet whose unchanged regions are elided with a
marker (`# ... existing code ...`); the model writes the whole merged file, the original file as prediction.

Editors ask for this "fast apply" (Zed, Continue; Cursor, Morph and Relace train models for it). The
benchmark's apply workloads build their snippets here from (original, edited) pairs:

    apply_edit_eval   EditEval: the code in its surrounding file (`context`, where there is one), before and
                      after (`input`, `output`); only rows whose snippet elides something
    apply_refactor    the Aider refactor set: the edited file is qwen2.5-coder-0.5b's own greedy answer to
                      the refactor request where it wrote a whole file, kept as line edits in
                      apply_refactor_edits.jsonl beside this module (docs/results/2026-11-27-apply/
                      make_refactor_edits.py made it), else the refactor done mechanically (move_method_out)
"""

from __future__ import annotations

import ast
import json
import re
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


def move_method_out(source: str, class_name: str, method: str) -> str | None:
    """The Aider refactor request done by moving lines: `class_name.method` (a top-level class's) becomes a top-level
    function of the same name right after the class, de-indented, and every `self.method(` call `method(self, `
    (a classmethod's `cls.method(` and `Class.method(` `method(cls, ` and `method(Class, `; a staticmethod's
    `method(`, its decorator dropped; `Class.method(` of a plain method `method(`). It does not
    check that the program still works (a method found through getattr is not followed); the apply workload needs a
    plausible edited file, not a correct program.

    None where moving lines would not give valid code the same way: no such class at the file's top level or no such
    method, the class's only member, another decorator (a property), a line indented less than the def (a string's
    continuation), or a reference to the method that is not a call.
    """
    tree = ast.parse(source)
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name), None)
    fn = cls and next((n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                       and n.name == method), None)
    if fn is None or len(cls.body) == 1:
        return None
    decorators = [ast.unparse(d) for d in fn.decorator_list]
    if decorators not in ([], ["staticmethod"], ["classmethod"]):
        return None
    receiver = {(): "self", ("staticmethod",): None, ("classmethod",): "cls"}[tuple(decorators)]
    lines = source.splitlines(keepends=True)
    moved = lines[fn.lineno - 1 : fn.end_lineno]  # the def's lines, a decorator dropped
    if any(line.strip() and not line[: fn.col_offset].isspace() for line in moved):
        return None
    function = "".join(line[fn.col_offset :] if line.strip() else "\n" for line in moved)
    start, end = min([fn.lineno, *(d.lineno for d in fn.decorator_list)]) - 1, fn.end_lineno
    while end < len(lines) and not lines[end].strip() and start > 0 and not lines[start - 1].strip():
        end += 1  # one blank line stays between the neighbours
    rest = lines[:start] + lines[end:]
    try:
        cls_end = next(n.end_lineno for n in ast.parse("".join(rest)).body
                       if isinstance(n, ast.ClassDef) and n.name == class_name)
    except SyntaxError:
        return None
    after = "".join(rest[cls_end:]).lstrip("\n")
    edited = "".join(rest[:cls_end]) + "\n\n" + function + ("\n\n" + after if after else "")
    name, owner = re.escape(method), re.escape(class_name)
    if receiver is None:
        edited = re.sub(rf"\b(self|cls|{owner})\.{name}\(", f"{method}(", edited)
    else:
        edited = re.sub(rf"\b{owner}\.{name}\(", f"{method}(", edited) if receiver == "self" else edited
        for caller, first in ((receiver, receiver), (owner, class_name)):  # self.m(x) -> m(self, x); Class.m(x) of
            edited = re.sub(rf"\b{caller}\.{name}\(\s*\)", f"{method}({first})", edited)
            edited = re.sub(rf"\b{caller}\.{name}\(", f"{method}({first}, ", edited)  # a classmethod: m(Class, x)
    if re.search(rf"\b(self|cls|{owner})\.{name}\b", edited):
        return None
    try:
        ast.parse(edited)
    except SyntaxError:
        return None
    return edited


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
    """Refactor tasks, smallest file first: the model's recorded whole-file answer where there is one (edits_file;
    edits null: the answer was not one), else the refactor done mechanically (move_method_out), where it can be."""
    edits = {e["task_id"]: e["edits"] for e in _jsonl(edits_file) if e["edits"] is not None}
    rows = sorted(_jsonl(data / "aider_refactor" / "refactor_tasks.jsonl"), key=lambda r: r["original_chars"])
    for r in rows:
        if r["task_id"] in edits:
            edited = apply_line_edits(r["original_code"], [tuple(e) for e in edits[r["task_id"]]])
        else:
            edited = move_method_out(r["original_code"], r["class_name"], r["method"])
        case = None if edited is None else _case(f"apply-{r['task_id']}", r["filename"], r["original_code"], edited)
        if case is not None:
            yield case
