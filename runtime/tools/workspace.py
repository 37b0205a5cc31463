"""Confinement of tool paths to the workspace (DESIGN §9).

Every built-in tool turns the path the model gave into a real path with ``resolve_in_workspace``.
A path is refused when it leaves the workspace lexically (``..``, an absolute path elsewhere) or
when a symlink on the way leads outside it. Symlinks that stay inside are followed.
"""

from __future__ import annotations

import functools
import os
import stat
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
    root_real, root_abs = _roots(str(workspace))
    expanded = os.path.expanduser(path) if path.startswith("~") else path
    lexical_text = os.path.normpath(os.path.join(root_abs, expanded))
    resolved_text = _below(lexical_text, root_real)
    if resolved_text is None:
        if not _inside(lexical_text, root_abs):
            raise PathOutsideWorkspace(
                f"path {path!r} is outside the workspace {root_abs}: "
                "tools may only use files inside it"
            )
        resolved_text = os.path.realpath(lexical_text)
    if not _inside(resolved_text, root_real):
        raise PathOutsideWorkspace(
            f"path {path!r} leads through a symlink to {resolved_text}, which is outside the "
            f"workspace {root_abs}: tools may only use files inside it"
        )
    return Path(resolved_text)


@functools.lru_cache(maxsize=64)
def _roots(workspace: str) -> tuple[str, str]:
    """(real path, absolute path) of a workspace folder, looked up once per process: a folder
    swapped for a symlink meanwhile only narrows what is allowed (paths must stay inside the
    real folder looked up first)."""
    return os.path.realpath(workspace), os.path.abspath(workspace)


def _inside(lexical: str, root: str) -> bool:
    return lexical == root or lexical.startswith(root.rstrip(os.sep) + os.sep)


def _below(lexical: str, root: str) -> str | None:
    """The real path of ``lexical`` (absolute and normalised) when it is ``root`` or below it,
    else None. Below ``root`` (a real path), only the components under it are looked at (an
    ``lstat`` each); the first symlink among them hands the whole path to ``realpath``."""
    if lexical == root:
        return root
    if not _inside(lexical, root):
        return None
    current = root
    for part in lexical[len(root.rstrip(os.sep)) + 1 :].split(os.sep):
        current = os.path.join(current, part)
        try:
            mode = os.lstat(current).st_mode
        except OSError:  # missing (a new file), or not a folder: the rest is taken as given
            return lexical
        if stat.S_ISLNK(mode):
            return os.path.realpath(lexical)
    return current


def display_path(workspace: Path, path: Path) -> str:
    """``path`` relative to the workspace, in POSIX form, for messages the model reads."""
    root_real = _roots(str(workspace))[0]
    text = str(path)
    if text == root_real:
        return "."
    if not _inside(text, root_real):
        return text
    relative = text[len(root_real.rstrip(os.sep)) + 1 :]
    return relative.replace(os.sep, "/") if os.sep != "/" else relative
