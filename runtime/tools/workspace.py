"""Confinement of tool paths to the workspace (DESIGN §9).

Every built-in tool turns the path the model gave into a real path with ``resolve_in_workspace``.
A path is refused when it leaves the workspace lexically (``..``, an absolute path elsewhere) or
when a symlink on the way leads outside it. Symlinks that stay inside are followed.
"""

from __future__ import annotations

import os
from pathlib import Path

from runtime.errors import PathOutsideWorkspace, ToolError

__all__ = ["display_path", "is_within", "resolve_in_workspace"]


def is_within(path: Path, root: Path) -> bool:
    """True when ``path`` is ``root`` or below it (both already absolute and normalised)."""
    return path == root or root in path.parents


def resolve_in_workspace(workspace: Path, path: str) -> Path:
    """The real path of ``path`` inside ``workspace``, or ``PathOutsideWorkspace``.

    Relative paths are relative to the workspace; ``""`` and ``"."`` are the workspace itself.
    The file need not exist (a new file for ``write_file``); its existing ancestors are resolved,
    so a symlinked folder that points outside is refused as well."""
    if "\x00" in path:
        raise ToolError(f"path {path!r} contains a NUL character")
    root_real = Path(os.path.realpath(workspace))
    root_abs = Path(os.path.abspath(workspace))
    given = Path(os.path.expanduser(path)) if path.startswith("~") else Path(path)
    candidate = given if given.is_absolute() else root_abs / given
    lexical = Path(os.path.normpath(candidate))
    if not (is_within(lexical, root_abs) or is_within(lexical, root_real)):
        raise PathOutsideWorkspace(
            f"path {path!r} is outside the workspace {root_abs}: tools may only use files inside it"
        )
    resolved = Path(os.path.realpath(lexical))
    if not is_within(resolved, root_real):
        raise PathOutsideWorkspace(
            f"path {path!r} leads through a symlink to {resolved}, which is outside the "
            f"workspace {root_abs}: tools may only use files inside it"
        )
    return resolved


def display_path(workspace: Path, path: Path) -> str:
    """``path`` relative to the workspace, in POSIX form, for messages the model reads."""
    root_real = Path(os.path.realpath(workspace))
    try:
        relative = path.relative_to(root_real)
    except ValueError:
        return str(path)
    text = relative.as_posix()
    return text if text else "."
