"""Notices a person reads once, in words: the tool calls a follow-up's history had to close, and
an MCP server that cannot start (found by a new-user trial: both came back on every run)."""

from __future__ import annotations

from pathlib import Path

from textual.pilot import Pilot

from runtime.api import Runtime
from runtime.config import Config, Permissions, StdioServerConfig
from runtime.kinds import RunState, ToolCallState
from runtime.mcp import McpManager
from tests.fakes.scripted import ScriptedProvider, Turn, open_scripted
from tests.tui.helpers import SIZE, main_screen, make_app, notifications, wait_until
from tests.tui.test_status_line import _HeldTool
from tui.screens.main import MainScreen


async def _send_and_finish(pilot: Pilot[object], screen: MainScreen, text: str) -> None:
    """``text`` sent from the composer, until its run on screen has completed."""
    before = screen.status.run.id if screen.status.run is not None else None
    await pilot.press(*text, "enter")

    def completed() -> bool:
        run = screen.status.run
        return run is not None and run.id != before and run.state is RunState.COMPLETED

    await wait_until(pilot, completed)


async def test_the_tool_calls_a_follow_up_closed_are_said_once_per_job_in_plain_words(
    db_path: Path, workspace: Path
) -> None:
    """A run cancelled while its tool ran left that call without a result; every follow-up
    closes it again before calling the model, and each popped "history repaired before calling
    the model (1): flaky__crash"."""
    tool = _HeldTool("flaky__crash")
    provider = ScriptedProvider(
        [Turn("", [("flaky__crash", {})]), Turn("recovered"), Turn("still fine")]
    )
    runtime = await Runtime.open(
        db_path=db_path,
        workspace=workspace,
        config=Config(permissions=Permissions(allow=["flaky__crash"])),
        model="scripted:test",
        providers=lambda reference: provider,
        tools={"flaky__crash": tool},
    )
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            screen = main_screen(app)
            await pilot.press(*"crash it", "enter")
            await wait_until(pilot, lambda: screen.selected_run is not None)
            assert screen.selected_run is not None
            first = screen.selected_run.id
            await wait_until(pilot, lambda: "running flaky__crash" in screen.status.text)
            [call] = await runtime.tool_calls(first)
            assert call.state is ToolCallState.RUNNING
            await runtime.cancel(first, reason="stopped by the test")
            await wait_until(
                pilot,
                lambda: (
                    screen.status.run is not None and screen.status.run.state is RunState.CANCELLED
                ),
            )
            await _send_and_finish(pilot, screen, "try again")
            await _send_and_finish(pilot, screen, "and once more")
            await pilot.pause()
            said = [n for n in notifications(app) if "flaky__crash" in n]
    finally:
        await runtime.close()
    assert len(said) == 1, said
    [notice] = said
    assert "history repaired" not in notice
    assert "flaky__crash had no result (the run stopped while it ran)" in notice
    assert "outcome is unknown" in notice


async def test_an_mcp_server_that_cannot_start_is_said_once_not_on_every_run(
    db_path: Path, workspace: Path
) -> None:
    model = ScriptedProvider([Turn("Working without it."), Turn("Still without it.")])
    manager = McpManager(
        {"ghost": StdioServerConfig(command="agent-tui-no-such-command-xyz")},
        workspace=workspace,
        retry_failed_after=0.0,  # tried again by every run
    )
    runtime = await open_scripted(model, db_path, workspace, mcp=manager)
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            screen = main_screen(app)
            await _send_and_finish(pilot, screen, "hello")
            await wait_until(pilot, lambda: any("could not start" in n for n in notifications(app)))
            await _send_and_finish(pilot, screen, "hello again")
            await pilot.pause()
            said = [n for n in notifications(app) if "could not start" in n]
    finally:
        await runtime.close()
    assert len(model.requests) == 2  # both runs asked the model, each after trying the server
    assert len(said) == 1, said
    assert "MCP server 'ghost' could not start: command not found" in said[0]
