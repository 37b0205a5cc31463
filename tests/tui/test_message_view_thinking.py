"""Thinking that streams into a message view still being mounted: the block comes once the view
is mounted (it raised MountError, in a run resumed as it was opened; the CI run under two CPU
hogs caught it)."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.containers import VerticalScroll

from runtime.models import Role
from tui.widgets.message_view import MessageView


class _Host(App[None]):
    def compose(self) -> ComposeResult:
        yield VerticalScroll(id="host")


async def test_thinking_for_a_view_not_mounted_yet_shows_once_it_is() -> None:
    app = _Host()
    async with app.run_test(size=(80, 20)) as pilot:
        view = MessageView(message_id="m1", role=Role.ASSISTANT, position=None, text="")
        mounting = app.query_one("#host").mount(view)
        view.append_thinking("Reading the notes first.")  # before the mount has happened
        await mounting
        await pilot.pause()
        await pilot.pause()
        assert view.query("#thinking")
        assert view.thinking_text == "Reading the notes first."
