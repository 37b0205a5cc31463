"""The workspace's files for @-mentions: listed once (respecting .gitignore), ranked fuzzily.

Pure Python without Textual, so it is tested and benchmarked alone. In a git repository the list
comes from ``git ls-files`` (tracked and untracked files, minus everything ignored); elsewhere the
tree is walked and every ``.gitignore`` on the way is applied with ``pathspec`` (gitignore
semantics: negation, anchoring, directory patterns).
"""

from __future__ import annotations

import bisect
import heapq
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pathspec

MAX_FILES = 200_000
"""A bound on the listing, so a mention never walks a whole disk."""

_SEPARATORS = "/_-. "

FUZZY_SCORED = 400
"""At most this many fuzzy candidates are scored (the shortest); the rest cannot rank first
often enough to be worth a Python loop per keystroke."""

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
            [
                "git",
                "-C",
                str(root),
                "ls-files",
                "-z",
                "--cached",
                "--others",
                "--exclude-standard",
            ],
            capture_output=True,
            timeout=20,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if result.returncode != 0:
        return None
    names = result.stdout.decode("utf-8", errors="replace").split("\0")
    # --cached still lists tracked files deleted from the work tree: leave those out.
    deleted = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z", "--deleted"],
        capture_output=True,
        timeout=20,
        check=False,
    )
    gone = set(deleted.stdout.decode("utf-8", errors="replace").split("\0"))
    return [name for name in dict.fromkeys(names) if name and name not in gone]


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

        def ignored(
            path: str, *, is_dir: bool, specs: list[tuple[str, pathspec.GitIgnoreSpec]] = specs
        ) -> bool:
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


class FileIndex:
    """The paths prepared for ranking: lower-cased once, and joined into one string so the
    filters run in C (one regex scan or substring test per keystroke, not a Python loop)."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths
        self.lowered = [path.lower() for path in paths]
        self.joined = "\n".join(self.lowered)
        self.lengths = [len(path) for path in self.lowered]
        self.offsets: list[int] = []
        offset = 0
        for lowered in self.lowered:
            self.offsets.append(offset)
            offset += len(lowered) + 1

    def rank(self, query: str, *, limit: int = 20) -> list[Match]:
        needle = query.strip().lower()
        if not needle:
            shortest = heapq.nsmallest(
                limit, range(len(self.paths)), key=lambda i: len(self.paths[i])
            )
            return [Match(self.paths[i], 0.0, ()) for i in shortest]
        lowered = self.lowered
        containing = [i for i, path in enumerate(lowered) if needle in path]
        if len(containing) >= limit:
            # Enough paths hold the query as it is typed: the best of those, by a cheap key
            # (a match at a segment start, in the file name, short paths), then scored.
            def key(i: int) -> tuple[int, int, int]:
                path = lowered[i]
                at = path.rfind(needle)
                name_start = path.rfind("/") + 1
                boundary = at == 0 or path[at - 1] in _SEPARATORS
                in_name = at >= name_start
                name_first = at == name_start
                whole_name = name_first and at + len(needle) == len(path)
                return (-(whole_name * 8 + name_first * 4 + boundary * 2 + in_name), len(path), i)

            if len(containing) > 2000:  # the shortest first: a C-level key, no Python per path
                containing = heapq.nsmallest(2000, containing, key=self.lengths.__getitem__)
            chosen = heapq.nsmallest(limit * 3, {*containing, *self._named(needle)}, key=key)
        else:
            # A subsequence, matched without backtracking: before each character, skip every
            # other one possessively (the leftmost match is the right one for a subsequence).
            pattern = "".join(f"[^{re.escape(char)}\\n]*+{re.escape(char)}" for char in needle)
            found = re.finditer(f"(?m)^{pattern}", self.joined)
            chosen = sorted(
                {bisect.bisect_right(self.offsets, match.start()) - 1 for match in found}
            )
            if len(chosen) > FUZZY_SCORED:  # a loose query: score the shortest candidates
                chosen = heapq.nsmallest(FUZZY_SCORED, chosen, key=self.lengths.__getitem__)
                chosen = sorted({*chosen, *self._named(needle)})
        scored = [_score(needle, self.paths[i]) for i in chosen]
        scored.sort(key=lambda match: (-match.score, len(match.path), match.path))
        return scored[:limit]

    def _named(self, needle: str) -> list[int]:
        """The paths whose whole file name is ``needle`` (however long their folders), found
        by substring searches in C, so the shortest-first cuts above never drop them."""
        if "/" in needle or "\n" in needle:
            return []
        found: list[int] = []
        joined = self.joined
        for probe in (f"/{needle}\n", f"\n{needle}\n"):
            at = joined.find(probe)
            while at >= 0:
                found.append(bisect.bisect_right(self.offsets, at + 1) - 1)
                at = joined.find(probe, at + 1)
        # The first and the last path have no newline on one side.
        for i in (0, len(self.lowered) - 1) if self.lowered else ():
            path = self.lowered[i]
            if path == needle or path.endswith(f"/{needle}"):
                found.append(i)
        return found


_INDEXES: dict[int, FileIndex] = {}


def fuzzy_rank(query: str, paths: list[str], *, limit: int = 20) -> list[Match]:
    """The paths that contain the query's characters in order (case-insensitive), best first.

    Better: more characters matched at the start of a path segment or consecutively, a match in
    the file name rather than the folders, shorter paths. The index of ``paths`` is built once
    and kept while the same list is ranked again (keystroke after keystroke).
    """
    index = _INDEXES.get(id(paths))
    if index is None or index.paths is not paths:
        _INDEXES.clear()
        index = _INDEXES[id(paths)] = FileIndex(paths)
    return index.rank(query, limit=limit)


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
        if exact == 0 or lower[exact - 1] in _SEPARATORS:
            score += 8
        if exact >= name_start:
            score += 6
        # The file name itself, then a file name that starts with the query, before a query
        # found inside a longer name (``core.py`` → core.py before test_core.py).
        if exact == name_start:
            score += 4
            if exact + len(needle) == len(lower):
                score += 4
        return Match(path, score - len(path) * 0.01, positions)
    # Otherwise the better of two walks: plain greedy, and one that takes a character at the
    # start of a path segment when there is one further on (``scm`` → src/cli/main.py).
    best = max(
        (_walk(needle, lower, name_start, prefer_starts=flag) for flag in (False, True)),
        key=lambda found: found[0],
    )
    return Match(path, best[0] - len(path) * 0.01, best[1])


def _walk(
    needle: str, lower: str, name_start: int, *, prefer_starts: bool
) -> tuple[float, tuple[int, ...]]:
    picked: list[int] = []
    score = 0.0
    start = 0
    for char in needle:
        index = lower.find(char, start)
        if index < 0:
            return -1e9, ()
        if prefer_starts:
            probe = index
            while probe >= 0 and not (probe == 0 or lower[probe - 1] in _SEPARATORS):
                probe = lower.find(char, probe + 1)
            if probe >= 0 and _rest_fits(needle[len(picked) + 1 :], lower, probe + 1):
                index = probe
        bonus = 1.0
        if index == 0 or lower[index - 1] in _SEPARATORS:
            bonus += 3
        if picked and index == picked[-1] + 1:
            bonus += 2
        if index >= name_start:
            bonus += 1
        score += bonus
        picked.append(index)
        start = index + 1
    return score, tuple(picked)


def _rest_fits(rest: str, lower: str, start: int) -> bool:
    for char in rest:
        start = lower.find(char, start)
        if start < 0:
            return False
        start += 1
    return True


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
