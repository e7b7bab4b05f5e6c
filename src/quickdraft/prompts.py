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
    last; the prediction is the file, fenced as the answer is (prompt lookup finds the snippet's new text).
    """
    fenced = fence(original, filename)
    message = (f"{fenced}\n\nApply this edit to the file above. Comments that say `... existing code ...` stand "
               f"for the file's unchanged lines there:\n{fence(snippet, filename)}\n\n"
               "Reply with the complete merged file in one code block, nothing else.")
    return message, fenced
