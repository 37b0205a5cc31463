"""Fixtures for the TUI tests: a real Runtime on a temp SQLite file with the instant demo model."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import AsyncIterator, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Input, TextArea

from runtime.api import Runtime
from tests.pg_cluster import USER as PG_USER
from tests.pg_cluster import PgCluster
from tests.tui.helpers import open_runtime

LOG_TAIL_CHARS = 6_000


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, Any, None]:
    """A failed test that ran the real program (in tmux) carries the end of its log: the app
    writes its errors to ``agent-tui.log`` beside the database, which is gone with the test's
    temporary folder by the time anyone reads the failure."""
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or not report.failed or item.get_closest_marker("slow") is None:
        return
    folder = getattr(item, "funcargs", {}).get("tmp_path")
    if not isinstance(folder, Path):
        return
    for log in sorted(folder.rglob("agent-tui.log")):
        text = log.read_text(errors="replace")
        report.sections.append((f"agent-tui log {log.relative_to(folder)}", text[-LOG_TAIL_CHARS:]))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test marked ``both_stores`` runs on SQLite and on PostgreSQL (the TUI opened no run on
    PostgreSQL for days, with no test to say so)."""
    if "runtime_db" in metafunc.fixturenames and metafunc.definition.get_closest_marker(
        "both_stores"
    ):
        metafunc.parametrize("runtime_db", ["sqlite", "postgresql"], indirect=True)


@pytest.fixture
def runtime_db(request: pytest.FixtureRequest, db_path: Path) -> Iterator[Path | str]:
    """Where the ``runtime`` fixture's store lives: the test's SQLite file, or (``both_stores``)
    a new database on the session's PostgreSQL cluster, dropped after the test."""
    if getattr(request, "param", "sqlite") == "sqlite":
        yield db_path
        return
    cluster: PgCluster = request.getfixturevalue("pg_cluster")
    name = f"t_{uuid.uuid4().hex[:16]}"
    where = ("-h", "127.0.0.1", "-p", str(cluster.port), "-U", PG_USER)
    subprocess.run([cluster.bin_dir / "createdb", *where, name], check=True, timeout=60)
    yield cluster.dsn(name)
    subprocess.run(
        [cluster.bin_dir / "dropdb", *where, "--force", "--if-exists", name],
        check=False,
        timeout=60,
    )


@pytest.fixture
async def runtime(runtime_db: Path | str, workspace: Path) -> AsyncIterator[Runtime]:
    opened = await open_runtime(runtime_db, workspace)
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture(autouse=True)
def steady_cursors(monkeypatch: pytest.MonkeyPatch) -> None:
    """Text cursors stay lit instead of blinking every 0.5 s, so a picture of the screen does not
    depend on when it was taken (the composer's cursor on its placeholder came and went)."""
    monkeypatch.setattr(TextArea, "_toggle_cursor_blink_visible", lambda self: None)
    monkeypatch.setattr(Input, "_toggle_cursor", lambda self: None)
