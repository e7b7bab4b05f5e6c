"""How an edit request is put to a model: the instruction, the file in a code block, and the file
(in the same fence) as the prediction. Shared by the CLI's --edit and the benchmark."""

from __future__ import annotations

from pathlib import Path

FENCE_LANG = {".py": "python", ".js": "javascript", ".ts": "typescript", ".rs": "rust", ".go": "go", ".java": "java",
              ".c": "c", ".cpp": "cpp", ".md": "markdown", ".sh": "bash", ".json": "json", ".yaml": "yaml"}


def edit_request(instruction: str, code: str, filename: str = "file.py") -> tuple[str, str]:
    """(user message, prediction) for asking a model to return the whole edited file.

    The file comes first and the instruction last: small models (qwen2.5-coder-0.5b) given the
    instruction first were seen to echo the file unchanged; given it last they make the edit.
    """
    fenced = f"```{FENCE_LANG.get(Path(filename).suffix, '')}\n{code.rstrip()}\n```"
    message = f"{fenced}\n\n{instruction.strip()}\nReply with the complete edited file in one code block, nothing else."
    return message, fenced
