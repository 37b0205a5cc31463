"""While a slow ``before_tool`` hook decides about a call, its block says so ("checking with hook
`…`…", the pending mark), and not that the tool runs; once the hook lets it through, the block
shows it running (the hook's line gone), then done. Before, the block showed the call running
from before the hook started."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from runtime.api import Runtime
from runtime.config import Config
from runtime.hooks import HookEntry, HooksConfig
from runtime.models import ToolCallState
from runtime.tools.base import ToolContext, ToolOutput
from runtime.tools.builtin import builtin_tools
from tests.extensions.test_hook_wait import held_hook
from tests.fakes.scripted import ScriptedProvider, Turn
from tests.tui.helpers import SIZE, main_screen, make_app, wait_until
from tui.widgets._format import short
from tui.widgets.tool_call_view import TOOL_ICONS, ToolCallView


@pytest.fixture(autouse=True)
def user_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No hooks or rules of the machine's own user config."""
    home = tmp_path / "home"
    (home / ".config").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))


class Held:
    """A read-only tool that runs until the test lets it finish."""

    name = "held"
    description = "runs until let go"
    read_only = True
    approval_default = "allow"
    input_schema: dict[str, Any] = {"type": "object", "properties": {}}

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.finish = asyncio.Event()

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        self.started.set()
        await self.finish.wait()
        return ToolOutput(content="held no more")

    def approval_detail(self, arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        return {}


def _shown(view: ToolCallView, selector: str) -> str:
    part = view.query_one(selector)
    return str(part.render()) if part.display else ""


async def test_the_block_says_which_hook_it_waits_for_then_shows_the_tool_running(
    db_path: Path, workspace: Path, tmp_path: Path
) -> None:
    command, _, release = held_hook(tmp_path)
    provider = ScriptedProvider([Turn(tool_calls=[("held", {})]), Turn("done")])
    held = Held()
    runtime = await Runtime.open(
        db_path=db_path,
        workspace=workspace,
        config=Config(hooks=HooksConfig(before_tool=[HookEntry(matcher="held", command=command)])),
        model="scripted:test",
        providers=lambda reference: provider,
        tools={**builtin_tools(), "held": held},
    )
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            screen = main_screen(app)
            await pilot.press(*"hold on", "enter")

            def block() -> ToolCallView | None:
                found = list(screen.query(ToolCallView))
                return found[0] if found else None

            def checking() -> bool:
                view = block()
                return view is not None and "checking with hook" in _shown(view, "#progress-line")

            await wait_until(pilot, checking)
            view = block()
            assert view is not None
            # The line is cut to the block's width (a long command ends in …).
            assert _shown(view, "#progress-line") == short(f"checking with hook `{command}`…", 100)
            assert view.state is ToolCallState.PENDING
            header = _shown(view, ".tool-header")
            assert header.startswith(TOOL_ICONS[ToolCallState.PENDING])
            [call] = await runtime.tool_calls(view_run := screen.conversation.run_id or "")
            assert view_run and call.state is ToolCallState.PENDING

            assert not held.started.is_set()

            release.touch()
            await wait_until(pilot, lambda: view.state is ToolCallState.RUNNING)
            assert held.started.is_set()
            assert _shown(view, ".tool-header").startswith(TOOL_ICONS[ToolCallState.RUNNING])
            assert "checking with hook" not in _shown(view, "#progress-line")
            held.finish.set()
            await wait_until(pilot, lambda: view.state is ToolCallState.COMPLETED)
            assert _shown(view, "#progress-line") == ""
            assert _shown(view, ".tool-header").startswith(TOOL_ICONS[ToolCallState.COMPLETED])
    finally:
        await runtime.close()
