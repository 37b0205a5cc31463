"""Engine fixtures for the extension points: a real store on a temp file, the real built-in tools,
a scripted model, and a user config folder of the test's own (never the person's ~/.config)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from runtime.api import Runtime
from runtime.config import Config
from runtime.tools.base import Tool
from runtime.tools.builtin import builtin_tools
from tests.fakes.scripted import ScriptedProvider

Factory = Callable[..., Awaitable[tuple[Runtime, ScriptedProvider]]]


@pytest.fixture(autouse=True)
def user_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "isolated-home"
    (home / ".config" / "agent-tui").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    return home


async def _no_sleep(seconds: float) -> None:
    return None


@pytest.fixture
async def make_runtime(db_path: Path, workspace: Path) -> AsyncIterator[Factory]:
    opened: list[Runtime] = []

    async def factory(
        script: list[Any], *, config: Config | None = None, tools: dict[str, Tool] | None = None
    ) -> tuple[Runtime, ScriptedProvider]:
        provider = ScriptedProvider(script)
        runtime = await Runtime.open(
            db_path=db_path,
            workspace=workspace,
            config=config or Config(),
            model="scripted:test",
            providers=lambda reference: provider,
            tools=tools or dict(builtin_tools()),
            sleep=_no_sleep,
        )
        opened.append(runtime)
        return runtime, provider

    yield factory
    for runtime in opened:
        await runtime.close()
