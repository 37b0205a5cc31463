"""Fixtures for the TUI tests: a real Runtime on a temp SQLite file with the instant demo model."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from textual.widgets import Input, TextArea

from runtime.api import Runtime
from tests.tui.helpers import open_runtime


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
