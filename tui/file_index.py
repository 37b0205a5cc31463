"""The workspace's files for @-mentions: listed once (respecting .gitignore), ranked fuzzily.

Pure Python without Textual, so it is tested and benchmarked alone. In a git repository the list
comes from ``git ls-files`` (tracked and untracked files, minus everything ignored); elsewhere the
tree is walked and every ``.gitignore`` on the way is applied with ``pathspec`` (gitignore
semantics: negation, anchoring, directory patterns).
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pathspec

MAX_FILES = 200_000
"""A bound on the listing, so a mention never walks a whole disk."""

ALWAYS_SKIPPED = frozenset({".git", ".hg", ".svn", "__pycache__", ".venv", "node_modules"})


def list_files(root: Path) -> list[str]:
    """Workspace-relative paths (with ``/``) of the files a person may mention, sorted."""
    listed = _git_files(root)
    if listed is None:
        listed = _walked_files(root)
    return sorted(listed[:MAX_FILES])


def _git_files(root: Path) -> list[str] | None:
    try:
        result = subprocess.run(
            ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            capture_output=True,
            timeout=20,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if result.returncode != 0:
        return None
    names = result.stdout.decode("utf-8", errors="replace").split("\0")
    # Deleted-but-tracked files are still listed by --cached: keep only what exists.
    return [name for name in dict.fromkeys(names) if name and (root / name).is_file()]


def _walked_files(root: Path) -> list[str]:
    found: list[str] = []
    # (directory relative to root, its spec) for every .gitignore met on the way down.
    specs: list[tuple[str, pathspec.GitIgnoreSpec]] = []
    for directory, subdirs, files in os.walk(root):
        relative = os.path.relpath(directory, root)
        relative = "" if relative == "." else relative.replace(os.sep, "/") + "/"
        specs = [(base, spec) for base, spec in specs if relative.startswith(base)]
        if ".gitignore" in files:
            try:
                lines = (Path(directory) / ".gitignore").read_text(errors="replace").splitlines()
            except OSError:
                lines = []
            specs.append((relative, pathspec.GitIgnoreSpec.from_lines(lines)))

        def ignored(path: str, *, is_dir: bool) -> bool:
            for base, spec in specs:
                inner = path[len(base) :] + ("/" if is_dir else "")
                if spec.match_file(inner):
                    return True
            return False

        subdirs[:] = sorted(
            name
            for name in subdirs
            if name not in ALWAYS_SKIPPED and not ignored(relative + name, is_dir=True)
        )
        for name in files:
            path = relative + name
            if not ignored(path, is_dir=False):
                found.append(path)
        if len(found) >= MAX_FILES:
            break
    return found


@dataclass(frozen=True)
class Match:
    path: str
    score: float
    positions: tuple[int, ...]
    """Indices in ``path`` of the query's characters (for highlighting)."""


def fuzzy_rank(query: str, paths: list[str], *, limit: int = 20) -> list[Match]:
    """The paths that contain the query's characters in order (case-insensitive), best first.

    Better: more characters matched at the start of a path segment or consecutively, a match in
    the file name rather than the folders, shorter paths. A regex pre-filter keeps this fast on
    50,000 paths; only the survivors are scored.
    """
    needle = query.strip().lower()
    if not needle:
        return [Match(path, 0.0, ()) for path in sorted(paths, key=len)[:limit]]
    pattern = re.compile(".*?".join(re.escape(char) for char in needle), re.IGNORECASE)
    candidates = [path for path in paths if pattern.search(path)]
    scored = [_score(needle, path) for path in candidates]
    scored.sort(key=lambda match: (-match.score, len(match.path), match.path))
    return scored[:limit]


def _score(needle: str, path: str) -> Match:
    lower = path.lower()
    name_start = lower.rfind("/") + 1
    # Prefer a contiguous run: the needle as a substring of the name, then of the path.
    exact = lower.find(needle, name_start)
    if exact < 0:
        exact = lower.find(needle)
    if exact >= 0:
        positions = tuple(range(exact, exact + len(needle)))
        score = 10.0 * len(needle)
        if exact == 0 or lower[exact - 1] in "/_-. ":
            score += 8
        if exact >= name_start:
            score += 6
        return Match(path, score - len(path) * 0.01, positions)
    # Otherwise greedy left-to-right, with bonuses for segment starts and adjacency.
    picked: list[int] = []
    score = 0.0
    start = 0
    for char in needle:
        index = lower.find(char, start)
        if index < 0:  # cannot happen after the pre-filter; be safe
            return Match(path, -1e9, ())
        bonus = 1.0
        if index == 0 or lower[index - 1] in "/_-. ":
            bonus += 3
        if picked and index == picked[-1] + 1:
            bonus += 2
        if index >= name_start:
            bonus += 1
        score += bonus
        picked.append(index)
        start = index + 1
    return Match(path, score - len(path) * 0.01, tuple(picked))


MENTION = re.compile(r"(?<![\w@])@([\w./~+-][\w./~+-]*)")
"""``@path`` in a message: after a space or at the start, up to the next space."""


def mentioned_paths(text: str, root: Path) -> list[str]:
    """The ``@path`` mentions in ``text`` that name files inside ``root``, in order, once each."""
    found: list[str] = []
    resolved_root = root.resolve()
    for match in MENTION.finditer(text):
        name = match.group(1).rstrip(".,;:!?)")
        candidate = (root / name).resolve()
        try:
            inside = candidate.is_relative_to(resolved_root) and candidate.is_file()
        except OSError:
            inside = False
        if inside and name not in found:
            found.append(name)
    return found


def with_attachments(text: str, root: Path) -> str:
    """The message as sent: the text, then one chip line naming each mentioned file.

    The chip is a reference the model can act on (its tools read workspace files by these
    paths); the content is not pasted in, so a big file never floods the conversation."""
    paths = mentioned_paths(text, root)
    if not paths:
        return text
    chips = " ".join(f"`{path}` ({_size(root / path)})" for path in paths)
    return f"{text}\n\n📎 Attached: {chips} — read with read_file"


def _size(path: Path) -> str:
    try:
        size = path.stat().st_size
    except OSError:
        return "?"
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KB"
    return f"{size / 1024 / 1024:.1f} MB"
