"""Pilot tests of the main flows, on a real Runtime (demo:instant): on a real SQLite file, and
on a real PostgreSQL cluster (``both_stores``)."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING

import pytest
from rich.text import Text
from textual.widgets import Input, OptionList

from runtime.api import Runtime
from runtime.models import InputRequestState, RunState
from runtime.tools.base import ToolContext
from runtime.tools.builtin import ListDirTool, SearchTool
from tests.tui.helpers import (
    SIZE,
    asked_in_the_tui,
    finish_run,
    main_screen,
    make_app,
    notifications,
    screen_text,
    wait_for_browser,
    wait_until,
)
from tui.messages import SearchFinished
from tui.screens.inbox import InboxScreen
from tui.widgets import _format
from tui.widgets.approval_prompt import ApprovalPrompt
from tui.widgets.composer import Composer, ComposerInput
from tui.widgets.confirm_bar import ConfirmBar
from tui.widgets.message_view import MessageView
from tui.widgets.question_prompt import AnswerInput, QuestionPrompt
from tui.widgets.search_results import SearchResults

if TYPE_CHECKING:
    from textual.pilot import Pilot
    from textual.widget import Widget

    from runtime.models import Run
    from tui.app import AgentTuiApp
    from tui.screens.main import MainScreen

pytestmark = pytest.mark.both_stores  # and on PostgreSQL: the TUI's main flows there too


def _footer_descriptions(screen: MainScreen) -> dict[str, str]:
    """The keys the footer shows, with what it says they do."""
    return {
        key: active.binding.description
        for key, active in screen.active_bindings.items()
        if active.binding.show
    }


async def test_a_new_job_streams_asks_inline_and_completes_by_keys(
    runtime: Runtime, workspace: Path
) -> None:
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert isinstance(app.focused, ComposerInput)
        await pilot.press(*"summarise this project", "enter")
        screen = main_screen(app)

        await wait_until(pilot, lambda: screen.query(QuestionPrompt))
        assert isinstance(app.focused, AnswerInput)  # the answer field, from the start
        assert any("Plan" in view.text for view in screen.query(MessageView))
        assert not screen.query_one(Composer).display
        run = screen.selected_run
        assert run is not None
        assert (await runtime.get_run(run.id)).state is RunState.INPUT_REQUIRED

        await pilot.press("1", "enter")  # an option's number, then Enter
        await wait_until(pilot, lambda: screen.query(ApprovalPrompt))
        approval = screen.query_one(ApprovalPrompt)
        assert approval.request.detail.get("diff")
        assert "agent-notes.md" in screen_text(app)

        await pilot.press("y")
        await wait_until(
            pilot,
            lambda: (
                screen.selected_run is not None and screen.selected_run.state is RunState.COMPLETED
            ),
        )
        assert not screen.query(ApprovalPrompt)
        assert screen.query_one(Composer).display
        assert "completed" in screen.status.text

    stored = await runtime.get_run(run.id)
    assert stored.state is RunState.COMPLETED
    assert await runtime.inbox() == []
    assert (workspace / "agent-notes.md").exists()


async def test_a_question_is_answered_with_free_text(runtime: Runtime, workspace: Path) -> None:
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen, request = await asked_in_the_tui(pilot, app)
        await pilot.press(*"only the TODOs", "enter")
        await wait_until(pilot, lambda: screen.query(ApprovalPrompt))
    answered = [
        r for r in await runtime.store.list_input_requests(request.run_id) if r.id == request.id
    ]
    assert answered[0].state is InputRequestState.ANSWERED
    assert answered[0].answer == "only the TODOs"


async def test_notifications_never_cover_the_answer_field_or_the_composer(
    runtime: Runtime, workspace: Path
) -> None:
    from textual.widgets._toast import Toast

    app = make_app(runtime, workspace)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        screen, _ = await asked_in_the_tui(pilot, app)
        for number in range(3):  # a stack of them, as a busy moment makes
            app.notify(f"A rather long notification number {number} about something else")
        await wait_until(pilot, lambda: len(screen.query(Toast)) == 3)
        await pilot.pause()
        prompt = screen.query_one(QuestionPrompt).region  # its options, field and keys
        for toast in screen.query(Toast):
            assert not toast.region.overlaps(prompt), (toast.region, prompt)


async def test_notifications_never_cover_the_composer(runtime: Runtime, workspace: Path) -> None:
    from textual.widgets._toast import Toast

    app = make_app(runtime, workspace)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        screen = main_screen(app)
        await wait_until(pilot, lambda: app.focused is screen.composer.input)
        for number in range(4):
            app.notify(f"A rather long notification number {number} about something else")
        await wait_until(pilot, lambda: len(screen.query(Toast)) == 3)  # the newest three
        await pilot.pause()
        composer = screen.composer.region
        for toast in screen.query(Toast):
            assert not toast.region.overlaps(composer), (toast.region, composer)


def _cells_under_toasts(app: AgentTuiApp, widget: Widget) -> list[tuple[int, int]]:
    """The cells of ``widget`` a notification is drawn over (what is on top there)."""
    from textual.widgets._toast import Toast, ToastHolder

    region = widget.region
    return [
        (x, y)
        for y in range(region.y, region.bottom)
        for x in range(region.x, region.right)
        if isinstance(app.screen.get_widget_at(x, y)[0], Toast | ToastHolder)
    ]


def _raise_a_pile_of_notices(app: AgentTuiApp) -> None:
    """Seven notifications at once, titled and not, as a busy moment makes them."""
    for number in range(7):
        app.notify(
            f"A rather long notification number {number} about something else entirely",
            title="Notice" if number % 2 else "",
            severity="warning" if number == 6 else "information",
        )


def _toast_texts(app: AgentTuiApp) -> list[str]:
    from textual.widgets._toast import Toast

    return [str(toast.render()) for toast in app.screen.query(Toast)]


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
async def test_notifications_never_cover_the_command_palettes_input_and_the_newest_show(
    runtime: Runtime, workspace: Path, size: tuple[int, int]
) -> None:
    """Found by a new-user trial: notifications, at the top right of every screen, covered
    the end of the command palette's input (at the top of the screen) as one typed in it."""
    from textual.command import CommandInput, CommandPalette

    app = make_app(runtime, workspace)
    async with app.run_test(size=size, notifications=True) as pilot:
        await pilot.press("ctrl+p")
        await wait_until(pilot, lambda: isinstance(app.screen, CommandPalette))
        await pilot.press(*"theme")
        _raise_a_pile_of_notices(app)
        await wait_until(pilot, lambda: any("number 6" in text for text in _toast_texts(app)))
        await pilot.pause()
        field = app.screen.query_one(CommandInput)
        assert _cells_under_toasts(app, field) == []
        shown = _toast_texts(app)
        assert len(shown) == 3 and all(
            f"number {n}" in t for n, t in zip((4, 5, 6), shown, strict=True)
        )


async def test_a_pile_of_notifications_never_covers_a_composer_of_many_lines(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial: seven notifications at 80x24 reached down over the
    composer's field. The newest three show, and never below the top of the bottom pane,
    however tall the composer has grown."""
    app = make_app(runtime, workspace)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        screen = main_screen(app)
        await wait_until(pilot, lambda: app.focused is screen.composer.input)
        for line in range(12):  # the bottom pane at its tallest: 70% of the screen
            await pilot.press(*f"line {line}", "ctrl+j")
        await wait_until(pilot, lambda: screen.composer.input.size.height >= 8)
        _raise_a_pile_of_notices(app)
        await wait_until(pilot, lambda: any("number 6" in text for text in _toast_texts(app)))
        for _ in range(3):  # each toast too many goes at a layout
            await pilot.pause()
        assert _cells_under_toasts(app, screen.composer) == []
        assert _cells_under_toasts(app, screen.query_one("#search")) == []
        shown = _toast_texts(app)  # fewer than three fit here; the newest is one of them
        assert 1 <= len(shown) < 3 and "number 6" in shown[-1], shown
        newest = list(app.screen.query("Toast"))[-1]  # drawn whole, not cut by the pane
        assert len(_cells_under_toasts(app, newest)) == newest.region.area > 0


GHOST_NOTICE = (
    "MCP server 'ghost' could not start: command not found: '/nonexistent/bin/mcp-ghost'; its"
    " tools are not available"
)


@pytest.mark.parametrize("size", [(120, 40), (92, 30), (80, 24)])
async def test_every_word_of_a_long_notification_is_on_screen(
    runtime: Runtime, workspace: Path, size: tuple[int, int]
) -> None:
    """Found by a trial: at 120 columns this notice showed two lines and "available" never
    appeared (its height was worked out two columns wider than it was drawn)."""
    import html

    from textual.widgets._toast import Toast

    app = make_app(runtime, workspace)
    async with app.run_test(size=size, notifications=True) as pilot:
        screen = main_screen(app)
        app.notify(GHOST_NOTICE, severity="warning", markup=False)
        await wait_until(pilot, lambda: bool(screen.query(Toast)))
        await pilot.pause()
        # Simplified: a word's letters in one piece of the picture; spaces drawn as no-break.
        drawn = html.unescape(app.export_screenshot(simplify=True)).replace("\xa0", " ")
    missing = [word for word in GHOST_NOTICE.split() if word not in drawn]
    assert missing == []


async def test_denying_with_a_reason_sends_the_reason(runtime: Runtime, workspace: Path) -> None:
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen, _ = await asked_in_the_tui(pilot, app)
        await pilot.press("2", "enter")  # an option's number, then Enter
        await wait_until(pilot, lambda: screen.query(ApprovalPrompt))
        request = screen.query_one(ApprovalPrompt).request
        await pilot.press("r", *"not now", "enter")
        await wait_until(
            pilot,
            lambda: screen.selected_run is not None and screen.selected_run.state.is_terminal,
        )
    stored = await runtime.store.get_input_request(request.id)
    assert stored.answer == {"decision": "deny", "reason": "not now"}
    assert not (workspace / "agent-notes.md").exists()


async def test_a_follow_up_continues_the_selected_job(runtime: Runtime, workspace: Path) -> None:
    first = await runtime.start("summarise")
    await finish_run(runtime, first.id)
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        await pilot.press("enter")  # the tree has focus: open the job's latest run
        await wait_until(pilot, lambda: screen.selected_run is not None)
        await pilot.press("ctrl+t")
        assert "Follow-up in: summarise" in screen_text(app)
        await pilot.press(*"and now the tests", "enter")
        await wait_until(
            pilot,
            lambda: screen.selected_run is not None and screen.selected_run.id != first.id,
        )
        follow_up = screen.selected_run
        assert follow_up.job_id == first.job_id
        assert follow_up.input == "and now the tests"
    runs = await runtime.job_runs(first.job_id)
    assert {run.id for run in runs} >= {first.id, follow_up.id}


async def test_cancel_stops_the_selected_run(runtime: Runtime, workspace: Path) -> None:
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen, asked = await asked_in_the_tui(pilot, app)
        run_id = asked.run_id
        await pilot.press("escape")  # out of the answer field: letters are keys again
        await pilot.press("c")
        assert screen.query(ConfirmBar)  # a destructive action asks first
        await pilot.press("y")
        await wait_until(
            pilot,
            lambda: (
                screen.selected_run is not None and screen.selected_run.state is RunState.CANCELLED
            ),
        )
        assert not screen.query(QuestionPrompt)
    assert (await runtime.get_run(run_id)).state is RunState.CANCELLED


async def test_fork_makes_a_new_job_from_the_last_checkpoint_with_the_message_given(
    runtime: Runtime, workspace: Path
) -> None:
    first = await runtime.start("summarise")
    await finish_run(runtime, first.id)
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        await pilot.press("enter")
        await wait_until(pilot, lambda: screen.selected_run is not None)
        # The run's last step is its answer: f asks for the fork's first message instead of
        # asking the model for the same answer again.
        await pilot.press("f")
        await wait_until(pilot, lambda: any("/fork" in text for text in notifications(app)))
        assert len((await runtime.list_jobs()).items) == 1
        screen.composer.focus_input()
        await pilot.press(*"/fork now only the README", "enter")
        await wait_until(
            pilot,
            lambda: screen.selected_run is not None and screen.selected_run.job_id != first.job_id,
        )
        forked = screen.selected_run
        assert any("Forked" in text for text in notifications(app))
    stored = await runtime.get_run(forked.id)
    assert stored.forked_from_checkpoint_id == (await runtime.checkpoints(first.id))[-1].id
    assert stored.input == "now only the README"
    assert len((await runtime.list_jobs()).items) == 2


async def test_the_inbox_lists_every_waiting_run_and_opens_its_prompt(
    runtime: Runtime, workspace: Path
) -> None:
    waiting = []
    for task in ("first task", "second task"):
        run = await runtime.start(task)
        boundary = await runtime.wait(run.id, timeout=10)
        assert boundary.state is RunState.INPUT_REQUIRED
        waiting.append(run)
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        main_screen(app)
        await wait_for_browser(pilot, app)
        await pilot.press("i")
        await wait_until(pilot, lambda: isinstance(app.screen, InboxScreen))
        inbox = app.screen.query_one("#inbox-list", OptionList)
        await wait_until(pilot, lambda: inbox.option_count == 2)
        listed = " ".join(
            str(inbox.get_option_at_index(index).prompt) for index in range(inbox.option_count)
        )
        assert "first task" in listed and "second task" in listed
        await pilot.press("enter")
        await wait_until(pilot, lambda: main_screen(app).query(QuestionPrompt))
        assert main_screen(app).selected_run is not None
        assert main_screen(app).selected_run.id in {run.id for run in waiting}


async def test_a_prompt_left_with_esc_takes_the_keys_when_the_inbox_opens_its_run(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a trial: Esc from a question to the browser, then i and Enter on that run: the
    question stayed docked but the keys stayed in the browser, so the "1" typed to answer went
    nowhere and the "n" after it started a new job."""
    run = await runtime.start("a task")
    assert (await runtime.wait(run.id, timeout=10)).state is RunState.INPUT_REQUIRED
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        await pilot.press("enter")  # the job: its question docks and takes the keys
        await wait_until(pilot, lambda: isinstance(app.focused, AnswerInput))
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.focused is screen.job_tree)
        await pilot.press("i")
        await wait_until(pilot, lambda: isinstance(app.screen, InboxScreen))
        inbox = app.screen.query_one("#inbox-list", OptionList)
        await wait_until(pilot, lambda: inbox.option_count == 1)
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.focused, AnswerInput))
        await pilot.press("1", "enter")
        await wait_until(pilot, lambda: not screen.query(QuestionPrompt))
    [call] = [c for c in await runtime.tool_calls(run.id) if c.name == "ask_user"]
    assert call.result == "A short overview"


async def test_the_inbox_stays_current_while_it_is_open(runtime: Runtime, workspace: Path) -> None:
    """Found by a new-user trial: a run answered elsewhere (`agent-tui respond`, another
    agent-tui) stayed listed, with its old question, while the inbox was open."""
    waiting = []
    for task in ("first task", "second task"):
        run = await runtime.start(task)
        await runtime.wait(run.id, timeout=10)
        waiting.append(run)
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        main_screen(app)
        await wait_for_browser(pilot, app)
        await pilot.press("i")
        await wait_until(pilot, lambda: isinstance(app.screen, InboxScreen))
        inbox = app.screen.query_one("#inbox-list", OptionList)
        await wait_until(pilot, lambda: inbox.option_count == 2)
        first = await runtime.open_request(waiting[0].id)
        assert first is not None
        await runtime.respond(waiting[0].id, first.id, first.options[0])  # as from elsewhere

        def listed() -> str:
            return " ".join(
                str(inbox.get_option_at_index(i).prompt) for i in range(inbox.option_count)
            )

        # Its question leaves; its approval (the demo's next request) comes in its place.
        await wait_until(pilot, lambda: "approval" in listed() and "first task" in listed())
        assert "second task" in listed()


async def test_a_run_that_starts_waiting_off_screen_rings_and_notifies(
    runtime: Runtime, workspace: Path
) -> None:
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        run = await runtime.start("background task")
        await wait_until(
            pilot, lambda: any("waiting for you" in text for text in notifications(app))
        )
        assert (await runtime.get_run(run.id)).state is RunState.INPUT_REQUIRED


async def test_search_finds_a_message_and_opens_its_run(runtime: Runtime, workspace: Path) -> None:
    run = await runtime.start("find the pelicans")
    await finish_run(runtime, run.id)
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        await pilot.press("slash", *"pelicans", "enter")
        results = screen.query_one("#search-results")
        await wait_until(pilot, lambda: results.display and app.focused is results)
        # The footer says what Enter does there, and how to go back.
        shown = _footer_descriptions(screen)
        assert shown.get("enter") == "Open" and shown.get("escape") == "Leave", shown
        await pilot.press("enter")
        await wait_until(
            pilot, lambda: screen.selected_run is not None and screen.selected_run.id == run.id
        )
        await pilot.press("escape")
        await pilot.press("escape")


async def test_search_hits_show_as_the_words_are_typed_and_the_focus_stays_in_the_field(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial: words typed in the search field found nothing until Enter.
    The hits follow the words as they change; Down moves into them; deleting the words
    brings the job tree back, the focus still in the field."""
    for words in ("find the pelicans", "count the herons"):
        run = await runtime.start(words)
        await finish_run(runtime, run.id)
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        await pilot.press("slash", *"pelic")
        field = screen.query_one("#search")
        results = screen.query_one("#search-results", SearchResults)

        def shown_hits() -> str:
            return " ".join(
                results.get_option_at_index(index).prompt.plain  # type: ignore[union-attr]
                for index in range(results.option_count)
            )

        await wait_until(pilot, lambda: results.display and "pelicans" in shown_hits())
        assert app.focused is field and "herons" not in shown_hits()
        await pilot.press(*["backspace"] * 5, *"heron")
        assert field.value == "heron"  # type: ignore[attr-defined]
        await wait_until(pilot, lambda: "herons" in shown_hits())
        assert "pelicans" not in shown_hits() and app.focused is field
        await pilot.press("down")
        assert app.focused is results
        await pilot.press("enter")
        await wait_until(
            pilot,
            lambda: (
                screen.selected_run is not None and screen.selected_run.input == "count the herons"
            ),
        )
        await pilot.press("slash", *"he")
        await wait_until(pilot, lambda: results.display)
        await pilot.press("backspace", "backspace")
        await wait_until(pilot, lambda: not results.display)
        assert screen.query_one("#tree-pane").display and app.focused is field


async def test_the_ages_of_search_hits_tick_as_the_browsers_do(
    runtime: Runtime, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by a new-user trial: a hit read "scan everything  46s" minutes later. The hits'
    ages are recomputed by a timer, as the browser's are, and the hits redrawn."""
    run = await runtime.start("find the pelicans")
    await finish_run(runtime, run.id)
    app = make_app(runtime, workspace, hide_ages=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        await pilot.press("slash", *"pelicans", "enter")
        results = screen.query_one("#search-results", SearchResults)
        await wait_until(pilot, lambda: results.display and results.hits)

        def first_hit() -> str:
            return results.get_option_at_index(0).prompt.plain  # type: ignore[union-attr]

        assert first_hit().split("\n")[0].endswith("s")  # seconds ago
        later = time.time() + 3 * 60 + 5  # the wall clock, moved on by three minutes
        monkeypatch.setattr(_format, "time", SimpleNamespace(time=lambda: later))
        await wait_until(pilot, lambda: first_hit().split("\n")[0].endswith(" 3m"), timeout=10)


async def test_search_words_cut_to_one_character_take_their_hits_away(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial: Backspace down to ``i`` from ``init`` left the hits of
    ``init`` under a field reading ``i``. Below two characters the job tree comes back (the
    focus in the field), as with an empty field; Enter still searches one character."""
    run = await runtime.start("find the pelicans")
    await finish_run(runtime, run.id)
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        await pilot.press("slash", *"pelic")
        field = screen.query_one("#search")
        results = screen.query_one("#search-results", SearchResults)
        await wait_until(pilot, lambda: results.display and results.option_count > 0)
        await pilot.press(*["backspace"] * 4)
        assert field.value == "p"  # type: ignore[attr-defined]
        await wait_until(pilot, lambda: not results.display)
        assert screen.query_one("#tree-pane").display and app.focused is field
        await pilot.press("enter")
        await wait_until(pilot, lambda: results.display and app.focused is results)


async def test_up_on_the_first_search_hit_goes_back_to_the_field_with_its_words(
    runtime: Runtime, workspace: Path
) -> None:
    """Up on the first hit went round to the last one; it goes back to the field above, the
    words kept to be refined (typing adds to them, it does not replace them)."""
    for words in ("find the pelicans", "count the pelicans"):
        run = await runtime.start(words)
        await finish_run(runtime, run.id)
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        field = screen.query_one("#search", Input)
        results = screen.query_one("#search-results", SearchResults)
        await pilot.press("slash", *"pelicans", "enter")
        await wait_until(pilot, lambda: app.focused is results and results.option_count >= 2)
        await pilot.press("down", "up")
        assert app.focused is results and results.highlighted == 0
        await pilot.press("up")
        assert app.focused is field and field.value == "pelicans"
        await pilot.press(*" count")
        assert field.value == "pelicans count"

        def titles() -> set[str]:
            return {
                results.get_option_at_index(index).prompt.plain.split("\n")[0]  # type: ignore[union-attr]
                for index in range(results.option_count)
            }

        await wait_until(pilot, lambda: titles() == {"count the pelicans"})
        assert app.focused is field


async def test_a_search_typed_and_left_at_once_does_not_come_back_over_the_browser(
    runtime: Runtime, workspace: Path
) -> None:
    """A search asked for while typing that finishes after Esc left the field (its hits on
    their way): they must not cover the job tree the person went back to."""
    run = await runtime.start("find the pelicans")
    await finish_run(runtime, run.id)
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        await pilot.press("slash", *"pelicans", "escape")
        assert app.focused is screen.job_tree
        hits = await runtime.search("pelicans")
        assert hits
        screen.post_message(SearchFinished("pelicans", hits, typed=True))
        await pilot.pause()
        assert not screen.query_one("#search-results").display
        assert screen.query_one("#tree-pane").display and app.focused is screen.job_tree


async def test_search_hits_of_similar_jobs_say_who_wrote_each_message_and_how_old_it_is(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial: a word in several messages of similar jobs gave hits that
    read alike (``Summarise this project`` / ``…some content``), with nothing to tell the
    prompt from the answer or one job from another."""
    for number in range(2):
        run = await runtime.start(f"Summarise this project\nsome content {number}")
        await finish_run(runtime, run.id)
    app = make_app(runtime, workspace, hide_ages=False)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        await pilot.press("slash", *"content", "enter")
        results = screen.query_one("#search-results", SearchResults)
        await wait_until(pilot, lambda: results.display and app.focused is results)
        room = screen.query_one("#browser").size.width - 6
        rows: dict[str, list[str]] = {}
        for index in range(results.option_count):
            prompt = results.get_option_at_index(index).prompt
            assert isinstance(prompt, Text)
            title, words = prompt.plain.split("\n")
            assert all(len(line) <= room for line in (title, words)), prompt.plain
            assert re.fullmatch(r"Summarise this project +\d+[smhd]", title), title
            rows.setdefault(words.split(":")[0].strip(), []).append(words)
        assert len(rows["you"]) == 2 and len(rows["agent"]) == 2, rows
        assert {words.split("content")[1].strip()[:1] for words in rows["you"]} == {"0", "1"}


async def test_search_hits_are_cut_to_the_browser_again_when_the_terminal_shrinks(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial: after 120x40 became 80x24, each hit kept the cut of the wider
    pane (its snippet wrapped onto a second line) and the highlighted hit was out of view."""
    for number in range(12):
        run = await runtime.start(f"find the pelicans of pond {number} and count every one of them")
        await finish_run(runtime, run.id)
    app = make_app(runtime, workspace)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        await pilot.press("slash", *"pelicans", "enter")
        results = screen.query_one("#search-results", SearchResults)
        await wait_until(pilot, lambda: results.display and app.focused is results)
        for _ in range(9):
            await pilot.press("down")
        assert results.highlighted == 9
        await pilot.resize_terminal(80, 24)
        browser = screen.query_one("#browser")
        await wait_until(pilot, lambda: browser.size.width < 40)
        await pilot.pause()
        room = browser.size.width - 6
        assert results.highlighted == 9
        for index in range(results.option_count):
            prompt = results.get_option_at_index(index).prompt
            assert isinstance(prompt, Text)
            assert all(len(line) <= room for line in prompt.plain.split("\n")), prompt.plain
        # The highlighted hit is in view: its lines are between the list's scroll offsets.
        top = results.scroll_offset.y
        line = sum(
            len(results.get_option_at_index(index).prompt.plain.split("\n"))  # type: ignore[union-attr]
            for index in range(9)
        )
        assert top <= line < top + results.scrollable_content_region.height


async def test_search_hits_that_fit_fill_the_browser_with_no_scrollbar_beside_them(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial: at 80x24, two columns at the right of the hits (which all
    fit) were left out of the list and read as a scrollbar thumb the height of the list."""
    for number in range(2):
        run = await runtime.start(f"find the pelicans of pond {number}")
        await finish_run(runtime, run.id)
    app = make_app(runtime, workspace)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        await pilot.press("slash", *"pelicans", "enter")
        results = screen.query_one("#search-results", SearchResults)
        await wait_until(pilot, lambda: results.display and app.focused is results)
        await pilot.pause()
        assert results.max_scroll_y == 0 and not results.show_vertical_scrollbar
        browser = screen.query_one("#browser")
        assert results.region.width == browser.content_region.width
        # Every cell of the list's rows, to the browser's border, is the list's own.
        for y in (results.region.y, results.region.bottom - 1):
            for x in range(browser.content_region.x, browser.content_region.right):
                widget, _ = screen.get_widget_at(x, y)
                assert widget is results, (x, y, widget)


async def test_a_search_with_no_match_keeps_its_words_to_be_changed_and_letters_are_text(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial: after "No message matches", the focus left the field and
    the next e (a word typed on) exported the job."""
    run = await runtime.start("find the pelicans")
    await finish_run(runtime, run.id)
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        await pilot.press("slash", *"zzz", "enter")
        results = screen.query_one("#search-results")
        field = screen.query_one("#search")
        await wait_until(pilot, lambda: results.display and app.focused is field)
        await pilot.press(*"e pelicans")
        assert field.value == "zzze pelicans"  # type: ignore[attr-defined]
        assert not any("Export" in text for text in notifications(app))


async def test_e_and_x_on_a_search_hit_act_on_the_hits_job_not_the_one_behind_the_hits(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial: on the search hits, e exported and x archived the job under
    the job tree's cursor, hidden behind the hits (neither key was in the footer). They act
    on the highlighted hit's job, as the browser's rows do, and an archived job's hits go."""
    for task in ("find the pelicans", "count the herons"):
        await finish_run(runtime, (await runtime.start(task)).id)
    herons, pelicans = (await runtime.list_jobs(limit=2)).items
    exports = workspace / ".agent-tui" / "exports"
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        assert screen.job_tree.cursor_job() == herons  # behind the hits, the newest job
        await pilot.press("slash", *"pelicans", "enter")
        results = screen.query_one("#search-results", SearchResults)
        await wait_until(pilot, lambda: results.display and app.focused is results)
        shown = _footer_descriptions(screen)
        assert shown.get("e") == "Export" and shown.get("x") == "Archive", shown
        await pilot.press("e")
        await wait_until(pilot, lambda: exports.exists() and any(exports.glob("*.md")))
        [path] = exports.glob("*.md")
        assert path.read_text().splitlines()[0] == "# find the pelicans"
        await pilot.press("x")
        await wait_until(pilot, lambda: not results.hits)
        assert (await runtime.get_job(pelicans.id)).archived
        assert not (await runtime.get_job(herons.id)).archived


async def test_export_from_the_conversation_or_the_composer_writes_the_job_on_screen(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial: with one job on screen and the browser's cursor on another,
    ``e`` in the conversation and ``/export`` ("write this job") both wrote the cursor's job.
    In the browser, ``e`` still writes the job of the row under the cursor."""
    for task in ("summarise the pelicans", "count the herons"):
        await finish_run(runtime, (await runtime.start(task)).id)
    pelicans = (await runtime.list_jobs(limit=2)).items[1]
    exports = workspace / ".agent-tui" / "exports"

    async def exported(pilot: Pilot[object], app: AgentTuiApp, *keys: str) -> str:
        before = set(exports.glob("*.md")) if exports.exists() else set()
        await pilot.press(*keys)
        await wait_until(pilot, lambda: exports.exists() and set(exports.glob("*.md")) > before)
        [path] = set(exports.glob("*.md")) - before
        return path.read_text().splitlines()[0]

    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        await pilot.press("down", "enter")  # the pelicans on screen, the box addresses them
        await wait_until(pilot, lambda: screen.composer.follow_up_job_id == pelicans.id)
        screen.job_tree.move_cursor_to_line(0)  # the cursor on the herons, not opened
        await wait_until(pilot, lambda: (screen.job_tree.cursor_job() or pelicans) != pelicans)
        await pilot.press("g")
        await wait_until(pilot, lambda: app.focused is screen.conversation)
        assert await exported(pilot, app, "e") == "# summarise the pelicans"
        screen.composer.focus_input()
        assert await exported(pilot, app, *"/export", "enter") == "# summarise the pelicans"
        screen.job_tree.focus()
        assert await exported(pilot, app, "e") == "# count the herons"


async def test_export_writes_a_new_file_each_time_out_of_the_agents_way(
    runtime: Runtime, workspace: Path
) -> None:
    run = await runtime.start("summarise")
    await finish_run(runtime, run.id)
    top_level = sorted(workspace.iterdir())
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        main_screen(app)
        await wait_for_browser(pilot, app)
        for count in (1, 2):
            await pilot.press("e")
            await wait_until(
                pilot,
                lambda count=count: sum("Exported" in text for text in notifications(app)) == count,
            )
    # Two snapshots, neither replacing the other, in .agent-tui/exports/ (not at the top of
    # the workspace, where the next task's search read the transcript back to the model).
    exports = sorted((workspace / ".agent-tui" / "exports").glob("*.md"))
    assert len(exports) == 2
    # The folder, then the file on its own line (on one, the name broke mid-word: a trial).
    said = [text for text in notifications(app) if "Exported" in text]
    assert sorted(said) == sorted(
        f"Export: Exported to .agent-tui/exports/\n{path.name}" for path in exports
    )
    assert all("summarise" in path.read_text() for path in exports)
    assert sorted(workspace.iterdir()) == sorted([*top_level, workspace / ".agent-tui"])
    assert run.job_id in exports[0].read_text()
    search = await SearchTool().run({"pattern": run.job_id}, ToolContext(workspace=workspace))
    listing = await ListDirTool().run({"recursive": True}, ToolContext(workspace=workspace))
    assert "exports/" in listing.content  # the folder is listed, not walked into
    assert exports[0].name not in listing.content
    assert search.content.startswith("no matches")
    # Nor are they the project's files to git (a trial: `git status` listed them, and the
    # @-picker offered them).
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)  # noqa: ASYNC221
    status = subprocess.run(  # noqa: ASYNC221
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=workspace,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert ".agent-tui" not in status and "README.md" in status


async def test_an_export_the_folder_cannot_take_says_so_and_leaves_nothing_behind(
    runtime: Runtime, workspace: Path
) -> None:
    """A failed write of the export was a bare "FileExistsError: [Errno 17] …" (or a
    permission error naming the temporary file) titled "Error": it names the exports folder
    and why, and leaves no part of a file."""
    await finish_run(runtime, (await runtime.start("summarise")).id)
    (workspace / ".agent-tui").mkdir()
    (workspace / ".agent-tui" / "exports").write_text("a file where the folder goes\n")
    before = {p: p.read_bytes() for p in (workspace / ".agent-tui").rglob("*")}
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_browser(pilot, app)
        main_screen(app).job_tree.focus()
        await pilot.press("e")
        await wait_until(pilot, lambda: any("Not exported" in t for t in notifications(app)))
        [said] = [t for t in notifications(app) if "Not exported" in t]
    assert said.startswith("Not exported: Could not write to .agent-tui/exports/: ")
    assert "Errno" not in said and ".tmp" not in said
    assert {p: p.read_bytes() for p in (workspace / ".agent-tui").rglob("*")} == before


async def _question_on_screen_then_deaf(pilot: Pilot[int], app: AgentTuiApp) -> Run:
    """A new job's run waiting on its question, on screen; then the screen stops hearing the
    runtime's events (as if the run changed in another process before they arrived)."""
    await pilot.press(*"summarise this project", "enter")
    screen = main_screen(app)
    await wait_until(pilot, lambda: screen.query(QuestionPrompt))
    run = screen.selected_run
    assert run is not None and run.state is RunState.INPUT_REQUIRED
    app.workers.cancel_group(app, "bridge")
    return run


async def test_a_runtime_error_becomes_a_notification_not_a_crash(
    runtime: Runtime, workspace: Path
) -> None:
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        # The run ends elsewhere before this screen hears of it: its cancel key is still
        # offered, and the runtime refuses to cancel an ended run.
        run = await _question_on_screen_then_deaf(pilot, app)
        await runtime.cancel(run.id)
        await pilot.press("escape")  # out of the answer field: letters are keys again
        await pilot.press("c")
        assert screen.query(ConfirmBar)
        await pilot.press("y")
        await wait_until(pilot, lambda: any("already" in text for text in notifications(app)))
        assert app.is_running


async def test_a_run_opens_on_a_window_of_its_last_messages(
    runtime: Runtime, workspace: Path
) -> None:
    run = await runtime.start("summarise")
    await finish_run(runtime, run.id)
    app = make_app(runtime, workspace, window=3)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        await pilot.press("enter")
        await wait_until(pilot, lambda: screen.selected_run is not None)
        conversation = screen.conversation
        await wait_until(pilot, lambda: conversation.last_position is not None)
        await wait_until(pilot, lambda: not conversation.page_loading)
        # The window's bound is itself plus one page (tests/tui/test_window.py scrolls a big
        # run); the run's first messages are not mounted, and the marker says more are above.
        shown = [view.position for view in conversation.message_views]
        assert 0 < len(shown) <= 3 + 3
        assert conversation.has_older and conversation.first_position != 0
        assert "older messages load as you scroll up" in screen_text(app)
    messages = await runtime.messages(run.id)
    assert shown == [m.position for m in messages if m.role.value != "tool"][-len(shown) :]


async def test_the_state_filter_shows_only_jobs_in_that_state(
    runtime: Runtime, workspace: Path
) -> None:
    done = await runtime.start("finished task")
    await finish_run(runtime, done.id)
    waiting = await runtime.start("waiting task")
    await runtime.wait(waiting.id, timeout=10)
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        assert len(screen.job_tree.job_ids) == 2
        await pilot.press("s", "s")  # all → running → input_required
        await wait_until(pilot, lambda: screen.job_tree.job_ids == [waiting.job_id])
        assert "filter: input required" in screen_text(app)


async def test_a_run_that_ends_on_screen_shows_its_end_as_the_end_is_handled(
    runtime: Runtime, workspace: Path
) -> None:
    # The row, the status line and the keys take the final state while the screen handles the
    # run's end, so the frame that shows its last words shows them too (through a worker they
    # came a frame or two later).
    from runtime import events as rt
    from tui import bridge
    from tui.widgets._format import STATE_ICONS

    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        # The screen hears of the end only from the call below, not from the event stream too,
        # and with no prompt to take down meanwhile.
        run = await _question_on_screen_then_deaf(pilot, app)
        await screen.hide_prompt()
        await runtime.cancel(run.id)
        event = rt.RunStateChanged(
            job_id=run.job_id,
            run_id=run.id,
            from_state=RunState.INPUT_REQUIRED,
            to_state=RunState.CANCELLED,
        )
        await screen.on_run_state_changed(bridge.RunStateChanged(event))
        assert screen.selected_run is not None
        assert screen.selected_run.state is RunState.CANCELLED
        assert "cancelled" in screen.status.text
        row = screen.job_tree.job_node(run.job_id)
        assert row is not None
        assert screen.job_tree.row_text(row).startswith(STATE_ICONS[RunState.CANCELLED])


def test_an_export_file_name_fits_a_notice_line_however_long_the_title() -> None:
    from tui.screens.main import export_path

    title = "Summarise every module of this enormous project, one by one, with examples"
    path = export_path(Path("/w"), title, "9a63b5d5c0ffee", 1_796_500_000.0)
    assert path.parent == Path("/w/.agent-tui/exports")
    assert path.name.startswith("summarise-every-module-o-9a63b5d5-")
    assert len(path.name) <= 52


async def test_a_run_waiting_elsewhere_names_the_key_that_works_from_the_box(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial: "press i for the inbox" while the message box had the keys
    (there i is a letter)."""
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await pilot.pause()
        screen.composer.focus_input()
        run = await runtime.start("summarise this project")  # not this screen's
        await runtime.wait(run.id, timeout=10)
        await wait_until(pilot, lambda: any("for the inbox" in t for t in notifications(app)))
        [said] = [t for t in notifications(app) if "for the inbox" in t]
        assert "press Esc, then i for the inbox" in said
