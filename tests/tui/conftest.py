"""Fixtures for the TUI tests: a real Runtime on a temp SQLite file with the instant demo model."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from runtime.api import Runtime
from tests.tui.helpers import open_runtime


@pytest.fixture
async def runtime(db_path: Path, workspace: Path) -> AsyncIterator[Runtime]:
    opened = await open_runtime(db_path, workspace)
    try:
        yield opened
    finally:
        await opened.close()
