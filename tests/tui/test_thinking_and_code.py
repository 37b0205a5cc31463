"""A collapsed thinking block opens by key (``t`` in the conversation, or Enter on its title);
a long line in a code block wraps at the pane's edge instead of being cut there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.widget import Widget
from textual.widgets import Collapsible
from textual.widgets._collapsible import CollapsibleTitle

from runtime.api import Runtime
from runtime.config import Config
from tests.fakes.scripted import ScriptedProvider, Turn
from tests.tui.helpers import make_app, wait_until
from tui.app import AgentTuiApp
from tui.screens.main import MainScreen
from tui.widgets.frozen_markdown import FrozenMarkdown

LONG_LINE = "result = compute(" + ", ".join(f"argument_{n}" for n in range(30)) + ")  # END"
ANSWER = f"Here is the code:\n\n```python\n{LONG_LINE}\nprint(result)\n```\n\nThat is all."
THOUGHT = "Pondering."


async def _open(tmp_path: Path, workspace: Path) -> Runtime:
    provider = ScriptedProvider([Turn(ANSWER, thinking=THOUGHT)])
    return await Runtime.open(
        db_path=tmp_path / "agent-tui.db",
        workspace=workspace,
        config=Config(),
        model="scripted:test",
        providers=lambda reference: provider,
    )


async def _shown_run(app: AgentTuiApp, pilot: Any, runtime: Runtime) -> MainScreen:
    run = await runtime.start("show me the code")
    await runtime.wait(run.id, timeout=20)
    screen = app.screen
    assert isinstance(screen, MainScreen)
    screen.open_run(run.id)
    await wait_until(
        pilot,
        lambda: (
            _code_block(screen) is not None
            and any(c.display for c in screen.query("#thinking").results(Collapsible))
        ),
    )
    return screen


def _code_block(screen: MainScreen) -> Widget | None:
    """The widget that draws the answer's code: the answer's Markdown widget, code block
    included."""
    frozen = [w for w in screen.conversation.query(FrozenMarkdown) if "```" in w.source]
    return frozen[0] if frozen else None


def _thinking(screen: MainScreen) -> Collapsible:
    """The assistant message's thinking block (every message has one; only it is shown)."""
    shown = [c for c in screen.query("#thinking").results(Collapsible) if c.display]
    assert len(shown) == 1
    return shown[0]


def _screen_lines(app: AgentTuiApp) -> list[str]:
    strips = app.screen._compositor.render_strips()
    return ["".join(segment.text for segment in strip) for strip in strips]


async def test_t_in_the_conversation_opens_the_thinking_and_enter_closes_it(
    tmp_path: Path, workspace: Path
) -> None:
    runtime = await _open(tmp_path, workspace)
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=(100, 30)) as pilot:
            screen = await _shown_run(app, pilot, runtime)
            thinking = _thinking(screen)
            assert thinking.collapsed
            assert not any("Pondering." in line for line in _screen_lines(app))
            screen.conversation.focus()
            await pilot.pause()
            await pilot.press("t")
            await wait_until(pilot, lambda: not thinking.collapsed)
            await wait_until(
                pilot, lambda: any("Pondering." in line for line in _screen_lines(app))
            )
            assert isinstance(app.focused, CollapsibleTitle)
            await pilot.press("enter")
            await wait_until(pilot, lambda: thinking.collapsed)
            await pilot.press("t")
            await wait_until(pilot, lambda: not thinking.collapsed)
    finally:
        await runtime.close()


async def test_t_is_text_in_the_composer_and_opens_nothing(tmp_path: Path, workspace: Path) -> None:
    runtime = await _open(tmp_path, workspace)
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=(100, 30)) as pilot:
            screen = await _shown_run(app, pilot, runtime)
            screen.composer.focus_input()
            await pilot.pause()
            await pilot.press("t")
            await pilot.pause()
            assert _thinking(screen).collapsed
            assert screen.composer.input.text.endswith("t")
    finally:
        await runtime.close()


@pytest.mark.parametrize("size", [(80, 24), (140, 45)], ids=["80x24", "140x45"])
async def test_a_long_line_in_a_code_block_wraps_instead_of_being_cut(
    tmp_path: Path, workspace: Path, size: tuple[int, int]
) -> None:
    runtime = await _open(tmp_path, workspace)
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=size) as pilot:
            screen = await _shown_run(app, pilot, runtime)
            fence = _code_block(screen)
            assert fence is not None
            await wait_until(pilot, lambda: fence.region.width > 0)
            fence.scroll_visible(animate=False)
            await pilot.pause()
            assert fence.max_scroll_x == 0  # nothing hidden to the right
            assert fence.region.right <= screen.conversation.region.right
            rows = [line for line in _screen_lines(app)]
            region = fence.region
            shown = "".join(
                rows[y][region.x : region.right].strip() for y in range(region.y, region.bottom)
            )
            # Every character of the long line is on screen, in order.
            assert LONG_LINE.replace(" ", "") in shown.replace(" ", "")
    finally:
        await runtime.close()


async def test_a_streaming_message_gets_its_thinking_block_only_when_thinking_arrives() -> None:
    """Most answers have no thinking: a streaming message is its text alone (the block is four
    widgets to style and lay out), and the block appears, above the text, with the first
    thinking."""
    from textual.app import App, ComposeResult

    from runtime.kinds import Role
    from tui.widgets.message_view import MessageView

    view = MessageView(message_id="m1", role=Role.ASSISTANT, position=None)

    class One(App[None]):
        def compose(self) -> ComposeResult:
            yield view

    app = One()
    async with app.run_test(size=(80, 20)) as pilot:
        await view.append_text(0, "The answer")
        await pilot.pause()
        assert not view.query(Collapsible)
        view.append_thinking("Let me think")
        view.append_thinking(" about it.")
        await wait_until(pilot, lambda: bool(view.query(Collapsible)))
        [block] = view.query(Collapsible)
        assert block.display and view.children[0] is block
        assert view.thinking_text == "Let me think about it."
        assert view.text == "The answer"
