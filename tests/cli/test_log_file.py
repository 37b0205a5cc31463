"""Where warnings and errors are logged: beside the SQLite database; on PostgreSQL, on this
machine in ``$XDG_DATA_HOME/agent-tui/agent-tui.log`` (README), whose folder no database made."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tui._cli.settings import log_path
from tui.cli import _logging_to


def test_on_postgresql_the_log_is_written_where_the_readme_says_folder_and_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("AGENT_TUI_DB", "postgresql://me@db.example/agents")
    path = log_path("postgresql://me@db.example/agents")
    assert path == tmp_path / "data" / "agent-tui" / "agent-tui.log"

    with _logging_to(path, own_folder=True):
        assert not path.parent.exists()  # made for the first line, not before
        logging.getLogger("agent_tui.test").warning("the run's model went away")

    assert "the run's model went away" in path.read_text()


def test_beside_a_database_not_yet_made_nothing_is_created_for_the_log(tmp_path: Path) -> None:
    path = log_path(tmp_path / "not-yet" / "agent-tui.db")
    with _logging_to(path):
        logging.getLogger("agent_tui.test").warning("doctor before the first run")
    assert not (tmp_path / "not-yet").exists()
