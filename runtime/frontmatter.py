"""Markdown files with a YAML front matter block (``SKILL.md``, command files, ``PHASE.md``).

The block is the text between a first line ``---`` and the next line ``---``; it must be a YAML
mapping. A file without such a block has empty metadata and is all body. Problems are a
``FrontMatterError`` naming the file and the line, never a YAML traceback.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from runtime.errors import ConfigError

__all__ = [
    "FrontMatterError",
    "MarkdownDocument",
    "located",
    "parse_markdown_document",
    "read_markdown",
]

MAX_DOCUMENT_BYTES = 256 * 1024
"""Larger instruction, skill or command files are refused: they would flood the prompt."""


class FrontMatterError(ConfigError):
    """A config error (exit 2 in the CLI) that names the Markdown file and line."""

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None) -> None:
        super().__init__(message, file=file, line=line)
        self.problem = message
        """What is wrong, without the file and line (for reports that name the file)."""


def located(path: Path | str, problem: str, line: int | None = None) -> str:
    """``path:line: problem`` (``path: problem`` without a line): a file's problem as
    ``doctor`` and ``/context`` list it, the file named once."""
    return f"{path}:{line}: {problem}" if line is not None else f"{path}: {problem}"


@dataclass(frozen=True)
class MarkdownDocument:
    path: Path
    metadata: dict[str, Any]
    body: str


def parse_markdown_document(text: str, path: Path) -> MarkdownDocument:
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        return MarkdownDocument(path=path, metadata={}, body=text)
    for index in range(1, len(lines)):
        if lines[index].strip() == "---":
            break
    else:
        raise FrontMatterError(
            "the front matter block opened by '---' is never closed", file=str(path), line=1
        )
    block = "".join(lines[1:index])
    try:
        loaded = yaml.safe_load(block) if block.strip() else {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 2 if mark is not None else 1
        problem = getattr(exc, "problem", None) or "not valid YAML"
        raise FrontMatterError(f"front matter: {problem}", file=str(path), line=line) from None
    if not isinstance(loaded, dict):
        raise FrontMatterError(
            "front matter must be a mapping of keys to values", file=str(path), line=2
        )
    metadata = {str(key): value for key, value in loaded.items()}
    return MarkdownDocument(path=path, metadata=metadata, body="".join(lines[index + 1 :]))


def read_markdown(path: Path) -> MarkdownDocument:
    """Read and parse one file; ``OSError`` and oversized or non-UTF-8 files are refused."""
    try:
        size = path.stat().st_size
        if size > MAX_DOCUMENT_BYTES:
            raise FrontMatterError(
                f"{size} bytes is more than the {MAX_DOCUMENT_BYTES} this file may hold",
                file=str(path),
            )
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise FrontMatterError("not UTF-8 text", file=str(path)) from None
    except OSError as exc:
        raise FrontMatterError(str(exc.strerror or exc), file=str(path)) from None
    return parse_markdown_document(text, path)
