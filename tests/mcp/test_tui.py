"""MCP in the TUI: a tool result's image is described as ``[image: png 1×1, 70 B]`` in the folded
result, and saved (opened where there is a desktop viewer) with ``o`` on its block; a server that
cannot start is a notification."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Static

from runtime.models import RunState
from tests.fakes.mcp_servers import PNG_BYTES
from tests.fakes.scripted import ScriptedProvider, Turn, open_scripted
from tests.tui.helpers import make_app, notifications, wait_until
from tui.screens.main import MainScreen
from tui.screens.report import ReportScreen
from tui.widgets.tool_call_view import ToolCallView


async def test_o_on_a_result_with_an_image_saves_it_and_says_where(
    db_path: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DISPLAY", raising=False)  # no desktop viewer: saved, not opened
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    (workspace / "pixel.png").write_bytes(PNG_BYTES)
    model = ScriptedProvider(
        [Turn(tool_calls=[("read_file", {"path": "pixel.png"})]), Turn(text="A pixel.")]
    )
    runtime = await open_scripted(model, db_path, workspace)
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=(140, 44)) as pilot:
            screen: Any = app.screen
            assert isinstance(screen, MainScreen)
            await pilot.press(*"look at pixel.png", "enter")
            await wait_until(
                pilot,
                lambda: (
                    screen.selected_run is not None
                    and screen.selected_run.state is RunState.COMPLETED
                ),
            )
            block = screen.conversation.query_one(ToolCallView)
            await wait_until(pilot, lambda: bool(block.images))
            await pilot.press("shift+tab")  # composer → conversation
            await pilot.press("right_square_bracket")
            assert app.focused is block
            await pilot.press("enter")
            shown = str(block.query_one("#result-text", Static).render())
            assert f"[image: png 1×1, {len(PNG_BYTES)} B]" in shown
            assert "iVBOR" not in shown  # never base64
            await pilot.press("o")
            saved = workspace / f"agent-tui-image-{block.images[0].sha256[:12]}.png"
            await wait_until(pilot, lambda: any("Saved" in n for n in notifications(app)))
    finally:
        await runtime.close()

    assert saved.read_bytes() == PNG_BYTES
    assert any(f"Image: Saved {saved}" in n for n in notifications(app))


async def test_a_server_that_cannot_start_during_a_run_is_a_notification_in_the_tui(
    db_path: Path, workspace: Path
) -> None:
    from runtime.config import StdioServerConfig
    from runtime.mcp import McpManager

    model = ScriptedProvider([Turn(text="Working without it.")])
    manager = McpManager(
        {"missing": StdioServerConfig(command="agent-tui-no-such-command-xyz")},
        workspace=workspace,
    )
    runtime = await open_scripted(model, db_path, workspace, mcp=manager)
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=(140, 44)) as pilot:
            await pilot.press(*"hello", "enter")
            await wait_until(pilot, lambda: any("could not start" in n for n in notifications(app)))
            # /context names the servers and how they are (a trial found only a passing
            # notice said a server was down).
            screen = app.screen
            assert isinstance(screen, MainScreen)
            await wait_until(pilot, lambda: screen.open_request is None and screen.typing())
            await pilot.press(*"/context", "enter")
            await wait_until(pilot, lambda: isinstance(app.screen, ReportScreen))
            report = app.screen
            assert isinstance(report, ReportScreen)
            context = "\n".join(report.lines)
            assert "MCP servers:\n  missing: could not start: command not found" in context
            assert "Agents:\n  default (built in)" in context
    finally:
        await runtime.close()

    assert any(
        "MCP server 'missing' could not start: command not found: "
        "'agent-tui-no-such-command-xyz'; its tools are not available" in n
        for n in notifications(app)
    )


async def test_an_mcp_tools_approval_names_its_server_and_says_what_the_tool_does(
    db_path: Path, workspace: Path
) -> None:
    """Found by a trial: the approval of an MCP tool called with no arguments read only "Allow
    basic__ask?", with nothing to go by; the command line named the server at least."""
    from runtime.mcp import InMemoryServer, McpManager
    from tests.fakes.mcp_servers import build_server
    from tui._cli.render import describe_request
    from tui.widgets.approval_prompt import ApprovalPrompt

    model = ScriptedProvider([Turn(tool_calls=[("basic__add", {"a": 1, "b": 2})]), Turn("3")])
    manager = McpManager(
        {"basic": InMemoryServer(build_server("basic"), timeout=30)}, workspace=workspace
    )
    runtime = await open_scripted(model, db_path, workspace, mcp=manager)
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=(140, 44)) as pilot:
            screen: Any = app.screen
            await pilot.press(*"add them", "enter")
            await wait_until(pilot, lambda: bool(screen.query(ApprovalPrompt)))
            prompt = screen.query_one(ApprovalPrompt)
            shown = "\n".join(str(s.render()) for s in prompt.query(Static))
            assert "MCP server basic: Add two integers." in shown
            request = prompt.request
    finally:
        await runtime.close()
    assert "What it does, as the server says: Add two integers." in describe_request(request)
