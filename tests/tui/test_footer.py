"""The footer fits its width and shows only the keys that work where the focus is (DESIGN §12):
at every width from 80 to 200 columns no label is cut or runs into the palette key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runtime.api import Runtime
from tests.tui.helpers import LayoutCount, main_screen, make_app, wait_until
from tests.tui.test_approval_views import SHELL, _app_factory, _until_approval
from tui.app import AgentTuiApp
from tui.screens.main import MainScreen
from tui.widgets.approval_prompt import ApprovalPrompt
from tui.widgets.key_footer import FooterKey, KeyFooter, fit_keys

WIDTHS = [80, 87, 101, 123, 157, 200]
"""A sample for the real app; ``fit_keys`` is checked at every width."""


def _keys(app: AgentTuiApp) -> tuple[list[FooterKey], FooterKey | None]:
    footer = app.screen.query_one(KeyFooter)
    keys = [k for k in footer.query(FooterKey) if not k.has_class("-command-palette")]
    palette = [k for k in footer.query(FooterKey) if k.has_class("-command-palette")]
    return keys, palette[0] if palette else None


def _fits(app: AgentTuiApp, width: int) -> bool:
    footer = app.screen.query_one(KeyFooter)
    keys, palette = _keys(app)
    if footer.region.width != width or palette is None or not keys:
        return False
    if any(k.region.width == 0 for k in keys):
        return False  # not laid out yet
    return max(k.region.right for k in keys) <= palette.region.x and palette.region.right <= width


def _footer_line(app: AgentTuiApp) -> str:
    y = app.screen.query_one(KeyFooter).region.y
    strips = app.screen._compositor.render_strips()
    return "".join(segment.text for segment in strips[y])


def test_keys_that_do_not_fit_give_way_whole_and_help_stays() -> None:
    keys = [
        ("next_pane", "tab", "Pane"),
        ("new_job", "n", "New job"),
        ("next_tool", "]", "Next tool"),
        ("quit", "^q", "Quit"),
        ("help", "f1", "Help"),
    ]
    for width in range(0, 201):
        fitted = fit_keys(keys, width)
        assert ("help", "f1", "Help") in fitted
        used = sum(len(d) + 1 + len(t) + 1 for _, d, t in fitted)
        assert used <= max(width, 8)  # f1 Help (8 cells) is kept even when nothing fits
        assert [k for k in keys if k in fitted] == fitted  # order kept
    assert fit_keys(keys, 200) == keys


async def test_the_footer_fits_at_every_width_in_every_focus(
    request: pytest.FixtureRequest,
) -> None:
    height = 24
    app = _app_factory(request.node.name, SHELL)()
    async with app.run_test(size=(80, height)) as pilot:
        await _until_approval(pilot)
        screen = app.screen
        assert isinstance(screen, MainScreen)
        focuses: list[tuple[str, Any]] = [
            ("prompt", lambda: screen.query_one(ApprovalPrompt).focus()),
            ("browser", lambda: screen.job_tree.focus()),
            ("conversation", lambda: screen.conversation.focus()),
        ]
        seen: dict[str, set[str]] = {}
        for name, focus in focuses:
            focus()
            for width in WIDTHS:
                await pilot.resize_terminal(width, height)
                await wait_until(pilot, lambda w=width: _fits(app, w))
                keys, _ = _keys(app)
                assert all(not k.disabled and not k.has_class("-disabled") for k in keys)
                line = _footer_line(app)
                assert len(line) == width
                assert line.rstrip().endswith("^p palette"), (name, width, line)
                assert "f1 Help" in line
                for key in keys:
                    assert f"{key.key_display} {key.description}" in line, (name, width, line)
                seen.setdefault(name, set()).update(k.action for k in keys)
        # What the keys mean follows the focus: the prompt's answers while it has focus,
        # the letters of the browser there, none of the letters while typing.
        assert {"decide('allow_once')", "decide('deny')"} <= seen["prompt"]
        assert "new_job" in seen["browser"] and "cancel_run" in seen["browser"]
        assert "decide('allow_once')" not in seen["browser"]
        assert "next_tool" in seen["conversation"]


def _keys_app() -> Any:
    """Two inputs, a pane with a key of its own, and the footer."""
    from textual.app import App, ComposeResult
    from textual.binding import Binding
    from textual.widgets import Input, Static

    class Pane(Static, can_focus=True):
        BINDINGS = [Binding("x", "app.noop", "Extra")]

    class Keys(App[None]):
        BINDINGS = [Binding("ctrl+n", "noop", "New")]

        def compose(self) -> ComposeResult:
            yield Input(id="one")
            yield Input(id="two")
            yield Pane("pane", id="pane")
            yield KeyFooter()

        def action_noop(self) -> None:
            pass

    return Keys()


async def test_a_change_of_bindings_that_leaves_the_keys_the_same_mounts_nothing_new() -> None:
    """The bindings change at every focus move and state change; the footer's keys are mounted
    again only when what it shows changed."""
    from textual.widgets import Input

    def descriptions() -> list[str]:
        return [k.description for k in app.screen.query(FooterKey)]

    app = _keys_app()
    async with app.run_test(size=(100, 10)) as pilot:
        await wait_until(pilot, lambda: "New" in descriptions())
        shown = list(app.screen.query(FooterKey))
        app.query_one("#two", Input).focus()  # the bindings changed; the keys shown did not
        await pilot.pause()
        await pilot.pause()
        assert list(app.screen.query(FooterKey)) == shown  # the same widgets, not new ones
        app.query_one("#pane").focus()  # a key more where the focus went
        await wait_until(pilot, lambda: "Extra" in descriptions())
        assert list(app.screen.query(FooterKey)) != shown


async def test_keys_that_change_are_shown_by_the_widgets_already_mounted() -> None:
    """A focus move or a run's start changes what works: the keys already mounted show the new
    ones, and only the difference in number is mounted or removed (each change mounted and
    styled every key widget again)."""
    from textual.widgets import Input

    def regular() -> list[FooterKey]:
        return [k for k in app.screen.query(FooterKey) if not k.has_class("-command-palette")]

    app = _keys_app()
    async with app.run_test(size=(100, 10)) as pilot:
        await wait_until(pilot, lambda: "New" in [k.description for k in regular()])
        before = regular()
        app.query_one("#pane").focus()  # one key more: "Extra"
        await wait_until(pilot, lambda: "Extra" in [k.description for k in regular()])
        after = regular()
        assert after[: len(before)] == before  # the same widgets, showing the new keys
        assert len(after) == len(before) + 1
        assert [k.description for k in after] == [
            k.description for k in app.screen.query_one(KeyFooter)._keys() if not k.palette
        ]
        app.query_one("#one", Input).focus()  # back: one key fewer
        await wait_until(pilot, lambda: "Extra" not in [k.description for k in regular()])
        assert regular() == after[: len(before)]
        await pilot.pause()
        line = _footer_line(app)
        assert "New" in line and "Extra" not in line


async def test_a_key_shown_in_place_costs_one_layout() -> None:
    """A run's end changes a key's words (its width); the layout that places the key sets
    its size, which asked Textual for a second layout, a frame of its own after the one
    that showed the run's last words. One layout places it."""
    from dataclasses import replace

    app = _keys_app()
    async with app.run_test(size=(100, 10)) as pilot:
        footer = app.screen.query_one(KeyFooter)
        await wait_until(pilot, lambda: any(k.description == "New" for k in footer._keys()))
        for _ in range(3):
            await pilot.pause()
        widget = next(k for k in app.screen.query(FooterKey) if k.description == "New")
        key = next(k for k in footer._keys() if k.description == "New")
        layouts = LayoutCount(app.screen)
        widget.show_key(replace(key, description="A longer one"))
        await wait_until(pilot, lambda: "A longer one" in _footer_line(app))
        for _ in range(3):  # a second layout, if one was asked for, is drawn by then
            await pilot.pause()
        assert layouts.count == 1


async def test_with_the_command_palette_open_the_footer_shows_only_what_works_in_it(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial: under the open palette the footer still listed the main
    screen's keys (tab Pane, esc Leave, ^p palette), which do nothing there."""
    from textual.command import CommandPalette

    app = make_app(runtime, workspace)
    async with app.run_test(size=(80, 24)) as pilot:
        main = main_screen(app)

        def shown() -> list[tuple[str, str]]:
            return [(key.key, key.description) for key in main.query(FooterKey)]

        await wait_until(pilot, lambda: ("tab", "Pane") in shown())
        before = shown()
        await pilot.press("ctrl+p")
        await wait_until(pilot, lambda: isinstance(app.screen, CommandPalette))
        await wait_until(pilot, lambda: shown() == [("escape", "Exit the command palette")])
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is main and shown() == before)


APPROVAL_ANSWERS = (
    "decide('allow_once')",
    "decide('allow_run')",
    "decide('allow_always')",
    "decide('deny')",
    "reason",
)


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
async def test_an_approval_keeps_all_its_answers_in_the_footer_in_shorter_words_where_narrow(
    request: pytest.FixtureRequest, size: tuple[int, int]
) -> None:
    """Found by a new-user trial: at 80x24 the footer of an approval dropped "r Deny with
    reason" (the prompt still showed it). Where its answers do not all fit, they take
    shorter words; where they do, the full ones."""
    width = size[0]
    app = _app_factory(request.node.name, SHELL)()
    async with app.run_test(size=size) as pilot:
        await _until_approval(pilot)
        await wait_until(pilot, lambda: _fits(app, width))
        keys, _ = _keys(app)
        shown = {key.action: key for key in keys}
        assert all(answer in shown for answer in APPROVAL_ANSWERS), list(shown)
        line = _footer_line(app)
        assert "f1 Help" in line and line.rstrip().endswith("^p palette")
        reason = shown["reason"]
        assert f"r {reason.description}" in line, line
        if width >= 120:
            assert reason.description == "Deny with reason"
        else:
            assert reason.description == "Deny, why"
            assert "tab Pane" in line  # the way out of the prompt stays too
            assert reason.tooltip == "Deny with reason"  # the full words, on hover
