"""Fixtures shared by every test directory."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A small project folder with a few files, like the one a person runs agent-tui in."""
    root = tmp_path / "project"
    root.mkdir()
    (root / "README.md").write_text("# Sample project\n\nA tiny project used by the tests.\n")
    (root / "src").mkdir()
    (root / "src" / "main.py").write_text('def main() -> None:\n    print("hello")\n')
    (root / "notes.txt").write_text("remember: the answer is 42\n")
    return root


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "agent-tui.db"
