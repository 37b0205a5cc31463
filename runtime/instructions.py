"""Project instructions (DESIGN §16): ``AGENTS.md`` and ``CLAUDE.md`` files join the system prompt.

The order is fixed and goes from the most general to the most specific, so that a nearer file can
refine what a farther one says:

1. the user's own file, ``$XDG_CONFIG_HOME/agent-tui/AGENTS.md`` (``~/.config/agent-tui``);
2. the folders from the repository root (the nearest ancestor of the workspace holding ``.git``)
   down to the workspace itself; without a repository, the workspace alone;
3. in each folder ``AGENTS.md`` before ``CLAUDE.md``.

Each file is read once per run start; the run records every file it used (path and SHA-256), so a
resumed run can tell whether one changed since (``changed_since``).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from runtime.config import user_config_path

__all__ = [
    "INSTRUCTION_FILE_NAMES",
    "InstructionFile",
    "changed_since",
    "find_instruction_files",
    "instructions_prompt",
    "load_instructions",
    "shown_path",
    "user_instructions_path",
]

INSTRUCTION_FILE_NAMES = ("AGENTS.md", "CLAUDE.md")
MAX_INSTRUCTION_CHARS = 64_000
"""What one file may add to the prompt; a longer file is cut with a marker saying so."""


@dataclass(frozen=True)
class InstructionFile:
    path: str
    sha256: str
    text: str
    truncated: bool = False


def user_instructions_path(env: Mapping[str, str] | None = None) -> Path:
    return user_config_path(env).parent / "AGENTS.md"


def _repository_root(workspace: Path) -> Path | None:
    for folder in (workspace, *workspace.parents):
        if (folder / ".git").exists():
            return folder
    return None


def find_instruction_files(workspace: Path, *, env: Mapping[str, str] | None = None) -> list[Path]:
    """The instruction files that apply to ``workspace``, in prompt order (see the module doc)."""
    workspace = workspace.resolve()
    candidates: list[Path] = [user_instructions_path(env)]
    root = _repository_root(workspace)
    folders = [workspace]
    if root is not None:
        folders = [workspace, *workspace.parents[: len(workspace.parents) - len(root.parents)]]
    for folder in reversed(folders):
        candidates += [folder / name for name in INSTRUCTION_FILE_NAMES]
    found: list[Path] = []
    seen: set[Path] = set()
    for path in candidates:
        try:
            real = path.resolve()
        except OSError:
            continue
        if real in seen or not path.is_file():
            continue
        seen.add(real)
        found.append(path)
    return found


def load_instructions(
    workspace: Path, *, env: Mapping[str, str] | None = None
) -> list[InstructionFile]:
    """Read every file ``find_instruction_files`` names; unreadable ones are skipped (a file that
    cannot be read cannot instruct), non-UTF-8 bytes are replaced."""
    loaded: list[InstructionFile] = []
    for path in find_instruction_files(workspace, env=env):
        try:
            data = path.read_bytes()
        except OSError:
            continue
        text = data.decode("utf-8", errors="replace")
        truncated = len(text) > MAX_INSTRUCTION_CHARS
        if truncated:
            text = text[:MAX_INSTRUCTION_CHARS]
        loaded.append(
            InstructionFile(
                path=str(path),
                sha256=hashlib.sha256(data).hexdigest(),
                text=text.strip(),
                truncated=truncated,
            )
        )
    return loaded


def shown_path(path: str, workspace: Path, *, home: str | None = None) -> str:
    """``path`` as a person tells it apart from the others at a glance: relative to the
    workspace for a file in it or in one of its parents (``AGENTS.md``, ``../AGENTS.md``), under
    ``~`` for one elsewhere in ``home`` (the user's own; default: ``$HOME``), else whole."""
    file = Path(path)
    folder = Path(os.path.abspath(workspace))
    if file.parent == folder or file.parent in folder.parents:
        return os.path.relpath(file, folder)
    home = home if home is not None else os.environ.get("HOME")
    if home and file.is_relative_to(home):
        return str(Path("~") / file.relative_to(home))
    return path


def instructions_prompt(files: Sequence[InstructionFile]) -> str:
    """The system-prompt section for ``files``: each under a heading naming its path."""
    sections: list[str] = []
    for file in files:
        if not file.text:
            continue
        marker = (
            f"\n\n[cut: the file is longer than {MAX_INSTRUCTION_CHARS} characters]"
            if file.truncated
            else ""
        )
        sections.append(f"## Instructions from {file.path}\n\n{file.text}{marker}")
    if not sections:
        return ""
    head = (
        "# Project instructions\n\nFollow these instructions from the person's files; "
        "later ones are more specific and win where they disagree."
    )
    return "\n\n".join([head, *sections])


def changed_since(
    used: Sequence[InstructionFile | Mapping[str, str]],
    workspace: Path,
    *,
    env: Mapping[str, str] | None = None,
) -> list[str]:
    """Paths whose content differs from what a run recorded, plus files added or removed since."""
    recorded = {
        (u.path if isinstance(u, InstructionFile) else u["path"]): (
            u.sha256 if isinstance(u, InstructionFile) else u["sha256"]
        )
        for u in used
    }
    current = {f.path: f.sha256 for f in load_instructions(workspace, env=env)}
    return sorted(
        path for path in recorded.keys() | current.keys() if recorded.get(path) != current.get(path)
    )
