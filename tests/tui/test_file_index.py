"""The @-mention file list: .gitignore respected (git or not), fuzzy ranking, attachments."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tui.file_index import fuzzy_rank, list_files, mentioned_paths, with_attachments


def _tree(root: Path) -> None:
    for name in (
        "src/app.py",
        "src/cache.py",
        "src/cli/main.py",
        "docs/guide.md",
        "build/out.js",
        "debug.log",
        "keep.log",
        "node_modules/x/index.js",
        "sub/.gitignore",
        "sub/local.tmp",
        "sub/kept.txt",
    ):
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x\n")
    (root / ".gitignore").write_text("build/\n*.log\n!keep.log\n")
    (root / "sub" / ".gitignore").write_text("*.tmp\n")


EXPECTED = [
    ".gitignore",
    "docs/guide.md",
    "keep.log",
    "src/app.py",
    "src/cache.py",
    "src/cli/main.py",
    "sub/.gitignore",
    "sub/kept.txt",
]


def test_outside_git_every_gitignore_on_the_way_down_is_applied(tmp_path: Path) -> None:
    _tree(tmp_path)
    assert list_files(tmp_path) == EXPECTED


def test_in_a_git_repository_the_list_comes_from_git_with_untracked_files(tmp_path: Path) -> None:
    _tree(tmp_path)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "add", "src/app.py"], check=True)
    # node_modules is not ignored by this .gitignore: git lists it, as a person's git would.
    assert list_files(tmp_path) == sorted([*EXPECTED, "node_modules/x/index.js"])


def test_fuzzy_ranking_prefers_the_file_name_and_segment_starts() -> None:
    paths = ["src/cache.py", "src/cli/main.py", "docs/calendar.md", "src/app.py"]
    ranked = [match.path for match in fuzzy_rank("ca", paths)]
    assert ranked[0] == "src/cache.py"
    assert "src/app.py" not in ranked[:1]
    assert fuzzy_rank("scm", paths)[0].path == "src/cli/main.py"
    assert fuzzy_rank("zzz", paths) == []


def test_a_file_named_as_typed_comes_first_then_names_that_start_with_it() -> None:
    paths = [
        "tests/test_core.py",
        "src/wordcount/core.py",
        "src/wordcount/core.pyi.bak",
        "core_py_notes.md",
    ]
    ranked = [match.path for match in fuzzy_rank("core.py", paths)]
    assert ranked == [
        "src/wordcount/core.py",
        "src/wordcount/core.pyi.bak",
        "tests/test_core.py",
    ]
    assert fuzzy_rank("Core.PY", paths)[0].path == "src/wordcount/core.py"


def test_a_file_named_as_typed_is_found_among_thousands_of_shorter_matches() -> None:
    # Thousands of short paths holding the query: the exactly named file, deep in folders,
    # still comes first (the shortest-first cut keeps it).
    paths = [f"t/test_{index}_core.py" for index in range(5000)]
    paths += ["a/very/deep/folder/of/the/project/src/wordcount/core.py"]
    assert fuzzy_rank("core.py", paths)[0].path.endswith("/wordcount/core.py")
    # Thousands of short paths holding its letters apart (a fuzzy match), and the file first
    # or last in the list.
    scattered = [f"x/{index}c/o/r/e.p/y" for index in range(1000)]
    deep = "a/very/deep/folder/of/the/project/core.py"
    for listed in ([*scattered, deep], [deep, *scattered]):
        assert fuzzy_rank("core.py", listed)[0].path == deep
    assert fuzzy_rank("core.py", ["core.py"])[0].path == "core.py"


def test_a_mention_attaches_only_files_inside_the_workspace(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("print(1)\n")
    (tmp_path.parent / "outside.txt").write_text("secret\n")
    text = "see @a.py, and @../outside.txt and @missing.py and mail@a.py"
    assert mentioned_paths(text, tmp_path) == ["a.py"]
    sent = with_attachments(text, tmp_path)
    assert sent.startswith(text)
    assert sent.endswith("📎 Attached: `a.py` (9 B) — read with read_file")
    assert with_attachments("no mentions", tmp_path) == "no mentions"
