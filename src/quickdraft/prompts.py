"""How an edit request is put to a model: the instruction, the file in a code block, and the file
(in the same fence) as the prediction. Shared by the CLI's --edit and the benchmark; apply_request is the
same for a lazy edit snippet (bench/apply.py builds them)."""

from __future__ import annotations

from pathlib import Path

FENCE_LANG = {".py": "python", ".js": "javascript", ".ts": "typescript", ".rs": "rust", ".go": "go", ".java": "java",
              ".c": "c", ".cpp": "cpp", ".md": "markdown", ".sh": "bash", ".json": "json", ".yaml": "yaml"}


def fence(code: str, filename: str = "file.py") -> str:
    """The code in a fenced block tagged with the file's language (the form answers take)."""
    return f"```{FENCE_LANG.get(Path(filename).suffix, '')}\n{code.rstrip()}\n```"


def edit_request(instruction: str, code: str, filename: str = "file.py") -> tuple[str, str]:
    """(user message, prediction) for asking a model to return the whole edited file.

    The file comes first and the instruction last: small models (qwen2.5-coder-0.5b) given the
    instruction first were seen to echo the file unchanged; given it last they make the edit.
    """
    fenced = fence(code, filename)
    message = f"{fenced}\n\n{instruction.strip()}\nReply with the complete edited file in one code block, nothing else."
    return message, fenced


def apply_request(original: str, snippet: str, filename: str = "file.py") -> tuple[str, str]:
    """(user message, prediction) for asking a model to merge a lazy edit snippet into the whole file.

    The snippet shows the changed code with the unchanged regions elided by a `... existing code ...`
    comment (bench/apply.lazy_snippet). As edit_request: the file first, the snippet and the instruction
    last. The prediction is the merge the snippet describes (merged_guess), fenced as the answer is, or the
    file where the snippet's regions cannot be placed in it: the model writes the merge, so a right guess is
    drafted whole, the snippet's new lines too.
    """
    message = (f"{fence(original, filename)}\n\nApply this edit to the file above. Comments that say "
               f"`{MARKER}` stand for the file's unchanged lines there:\n{fence(snippet, filename)}\n\n"
               "Reply with the complete merged file in one code block, nothing else.")
    return message, fence(merged_guess(original, snippet) or original, filename)


MARKER = "... existing code ..."  # the comment that stands for elided lines, in a language's comment form


def merged_guess(original: str, snippet: str) -> str | None:
    r"""The file a lazy snippet describes: its lines, each marker line replaced by the original's lines it stands for.

    The snippet's runs of lines between markers are placed in the original in order, each by its first and last
    two lines, or failing that its first and last line (unchanged lines around the changes, as lazy snippets show
    them): a marker stands for the original's
    lines from the end of the run before it to the start of the run after it. None where a run's edges are not
    found in order (the snippet cannot be placed: a caller falls back to the file itself). Only a prediction: the
    model decides every token.

    >>> merged_guess("a\nb\nc\nd\ne\nf", "# ... existing code ...\nc\nd\nX\nf")
    'a\nb\nc\nd\nX\nf'
    """
    a = original.splitlines()
    runs: list[list[str] | None] = []  # the snippet's runs of lines; None: a marker
    for line in snippet.splitlines():
        if MARKER in line:
            if not runs or runs[-1] is not None:
                runs.append(None)
        elif runs and runs[-1] is not None:
            runs[-1].append(line)
        else:
            runs.append([line])

    def find(lines: list[str], at: int) -> int | None:  # the first place at or after `at` where a holds lines
        return next((i for i in range(at, len(a) - len(lines) + 1) if a[i:i + len(lines)] == lines), None)

    def head(run: list[str], at: int) -> int | None:  # where the run starts: by its first two lines, or its first
        found = find(run[:2], at) if len(run) > 1 else None
        return found if found is not None else find(run[:1], at)

    def tail(run: list[str], at: int) -> int | None:  # where the run ends: by its last two lines, or its last
        found = find(run[-2:], at) if len(run) > 1 else None
        if found is not None:
            return found + 2
        found = find(run[-1:], at)
        return None if found is None else found + 1

    out: list[str] = []
    p = 0  # the original's lines before p are placed
    for k, run in enumerate(runs):
        if run is None:
            continue
        start = p
        if k > 0:  # after a marker: the run starts where its first lines are
            start = head(run, p)
            if start is None:
                return None
            out.extend(a[p:start])  # what the marker stands for
        end = len(a) if k == len(runs) - 1 else tail(run, start)  # the snippet's last run ends the file
        if end is None:
            return None
        out.extend(run)
        p = end
    if runs and runs[-1] is None:
        out.extend(a[p:])
    return "\n".join(out)
