"""A tool call's header shows as much of its arguments as the block's width allows: a long
shell command whole on a wide terminal, cut with … on a narrow one, never past two lines."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.widgets import Static

from runtime.kinds import ToolCallState
from tui.widgets.tool_call_view import ToolCallView

COMMAND = (
    "find . -name '*.py' -newer setup.cfg | xargs grep -n 'def main' | sort | uniq -c "
    "| sort -rn | head -50 && echo finished-listing"
)


class _Host(App[None]):
    def compose(self) -> ComposeResult:
        yield ToolCallView(
            tool_call_id="t1",
            name="shell",
            arguments={"command": COMMAND, "timeout": 120},
            state=ToolCallState.RUNNING,
        )


async def _header_at(width: int) -> tuple[str, int]:
    app = _Host()
    async with app.run_test(size=(width, 12)) as pilot:
        await pilot.pause()
        header = app.query_one(".tool-header", Static)
        return str(header.content), header.size.height


async def test_a_wide_terminal_shows_a_long_shell_command_whole() -> None:
    text, lines = await _header_at(200)
    assert COMMAND in text
    assert "timeout=120" in text
    assert lines == 1


async def test_a_narrow_terminal_cuts_the_command_to_two_lines_of_header() -> None:
    text, lines = await _header_at(80)
    assert COMMAND not in text
    assert "find . -name '*.py' -newer setup.cfg | xargs grep" in text  # more than 40 characters
    assert "…" in text and "timeout=120" in text
    assert lines <= 2


async def test_the_header_follows_the_terminal_when_it_is_resized() -> None:
    app = _Host()
    async with app.run_test(size=(80, 12)) as pilot:
        await pilot.pause()
        header = app.query_one(".tool-header", Static)
        assert COMMAND not in str(header.content)
        await pilot.resize_terminal(200, 12)
        await pilot.pause()
        assert COMMAND in str(header.content)


class _Question(App[None]):
    def compose(self) -> ComposeResult:
        yield ToolCallView(
            tool_call_id="t2",
            name="ask_user",
            arguments={
                "question": "What should the notes focus on?",
                "options": ["A short overview", "The files, one by one", "The TODO markers"],
                "allow_free_text": True,
            },
            state=ToolCallState.PENDING,
        )


async def test_several_arguments_on_a_narrow_block_still_fit_two_lines() -> None:
    """Found by a new-user trial: ask_user's question and options took four lines at 80
    columns (each value kept 40 characters whatever the width)."""
    app = _Question()
    async with app.run_test(size=(56, 12)) as pilot:
        await pilot.pause()
        header = app.query_one(".tool-header", Static)
        assert header.size.height <= 2
        assert "question=What should" in str(header.content)
        assert "allow_free_text=true" in str(header.content)
