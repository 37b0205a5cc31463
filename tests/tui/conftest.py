"""Fixtures for the TUI tests: a real Runtime on a temp SQLite file with the instant demo model."""

from __future__ import annotations

from collections.abc import AsyncIterator, Generator
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Input, TextArea

from runtime.api import Runtime
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


@pytest.fixture
async def runtime(db_path: Path, workspace: Path) -> AsyncIterator[Runtime]:
    opened = await open_runtime(db_path, workspace)
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
