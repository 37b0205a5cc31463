"""Fixtures shared by every test directory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.pg_cluster import PgCluster, find_pg_bin, shared_cluster


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Tests marked ``sandbox`` show the screens and approvals of a machine whose shell is
    confined (no "not sandboxed" notice, a rule-allowed shell call runs without asking); where
    bubblewrap is missing or cannot start they are skipped, saying why (.ci/run installs it)."""
    if item.get_closest_marker("sandbox") is None:
        return
    from runtime.tools.sandbox import sandbox_status

    status = sandbox_status()
    if not status.available:
        pytest.skip(f"no shell sandbox here: {status.detail}")


@pytest.fixture(autouse=True)
def own_cache_folder(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the program keeps in the user's cache folder (the stylesheets it parsed:
    ``tui.stylesheet_cache``) goes to a folder of the test's own, for it and for the programs
    it starts, never to the home folder of whoever runs the tests."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))


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


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PgCluster]:
    """The session's throwaway PostgreSQL cluster; the test is skipped, saying why, where
    PostgreSQL or asyncpg is missing (`.ci/run` installs both)."""
    bin_dir, why = find_pg_bin()
    if bin_dir is None:
        pytest.skip(f"{why}; `.ci/run` installs them (Debian package postgresql)")
    pytest.importorskip("asyncpg", reason="asyncpg is not installed (pip install '.[postgres]')")
    yield shared_cluster()
