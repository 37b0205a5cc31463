"""Issue 10, by Pilot on a real Runtime and SQLite file: keys follow focus, the multi-line
composer, interrupt and quit, the queue, slash commands and @-mentions."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from textual import events
from textual.pilot import Pilot
from textual.widgets import Input, OptionList, Static

from runtime.api import Runtime
from runtime.config import Config
from runtime.models import InputRequestState, Job, Role, Run, RunState
from runtime.providers.base import ModelEvent, ModelRequest, TextDelta
from runtime.store.base import WrittenDraft
from runtime.store.sqlite import SqliteStore
from tests.fakes.scripted import ScriptedProvider, Turn, open_scripted
from tests.store.helpers import composer_text, queued_messages
from tests.tui.helpers import (
    SIZE,
    asked_in_the_tui,
    finish_run,
    finished_earlier,
    first_task_running,
    main_screen,
    make_app,
    notifications,
    open_runtime,
    screen_text,
    send_burst,
    wait_for_browser,
    wait_until,
)
from tui.app import AgentTuiApp
from tui.messages import JobsLoaded
from tui.screens.help import HelpScreen, help_sections
from tui.screens.main import MainScreen
from tui.widgets.approval_prompt import ApprovalPrompt
from tui.widgets.composer import MAX_LINES
from tui.widgets.confirm_bar import ConfirmBar
from tui.widgets.key_footer import FooterKey, KeyFooter
from tui.widgets.message_view import MessageView
from tui.widgets.question_prompt import AnswerInput, QuestionPrompt


def footer_keys(screen: MainScreen) -> set[str]:
    return {key for key, active in screen.active_bindings.items() if active.binding.show}


async def _open_first_job(pilot: Pilot[object], app: AgentTuiApp, job_id: str) -> None:
    """From the browser, open the first job: the composer then addresses it (a follow-up)."""
    await wait_for_browser(pilot, app)
    await pilot.press("enter")
    await wait_until(pilot, lambda: main_screen(app).composer.follow_up_job_id == job_id)


async def user_inputs(runtime: Runtime) -> list[str]:
    jobs = (await runtime.list_jobs()).items
    inputs: list[str] = []
    for job in jobs:
        for run in await runtime.job_runs(job.id):
            if run.parent_run_id is None and run.input is not None:
                inputs.append(run.input)
    return inputs


# --- 1. focus decides what a key means -----------------------------------------------------------
async def test_typing_an_answer_with_action_letters_is_text_and_neither_cancels_nor_forks(
    runtime: Runtime, workspace: Path
) -> None:
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen, request = await asked_in_the_tui(pilot, app)
        assert isinstance(app.focused, AnswerInput)
        # c (cancel), f (fork), R (retry), n (new), e (export), i (inbox): all text here.
        await pilot.press(*"cool follow-up while running: Rename in files", "enter")
        await wait_until(pilot, lambda: screen.query(ApprovalPrompt))  # the run went on
    stored = await runtime.store.get_input_request(request.id)
    assert stored.state is InputRequestState.ANSWERED
    assert stored.answer == "cool follow-up while running: Rename in files"
    run = await runtime.get_run(request.run_id)
    assert run.state is not RunState.CANCELLED
    assert len((await runtime.list_jobs()).items) == 1  # nothing forked, no new job
    assert not (workspace / ".agent-tui" / "exports").exists()  # nothing exported


async def test_shift_tab_from_a_question_s_answer_field_goes_back_to_the_conversation(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a trial: from the answer field shift+tab left the focus where it was (Tab went
    to the browser)."""
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen, _ = await asked_in_the_tui(pilot, app)
        field = screen.query_one(AnswerInput)
        await wait_until(pilot, lambda: app.focused is field)
        await pilot.press("shift+tab")
        await wait_until(pilot, lambda: app.focused is screen.conversation)
        await pilot.press("tab")  # and forward again, to the field
        await wait_until(pilot, lambda: app.focused is field)


async def test_a_prompt_that_comes_after_an_answer_takes_the_keys_from_the_message_kept_meanwhile(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial: a message kept in the box while a question was answered came
    back with the box; the approval that came next waited behind it, as if it were being
    typed, and the "A" meant for the approval went into the text."""
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen, _ = await asked_in_the_tui(pilot, app)
        # A message the person was typing when the question came, kept under the prompt.
        screen.composer.input.value = "skip the big logs please"
        await pilot.press(*"yes", "enter")
        await wait_until(pilot, lambda: screen.query(ApprovalPrompt))
        approval = screen.query_one(ApprovalPrompt)
        await wait_until(pilot, lambda: app.focused is approval)
        await pilot.press("y")
        await wait_until(pilot, lambda: not screen.query(ApprovalPrompt))
        assert screen.composer.input.text == "skip the big logs please"
    [approved] = [
        r
        for r in await runtime.store.pending_input_requests(limit=100)
        if r.id == approval.request.id
    ] or [await runtime.store.get_input_request(approval.request.id)]
    assert approved.state is InputRequestState.ANSWERED


async def test_a_command_typed_as_an_answer_is_not_sent_and_a_double_slash_answers_with_it(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial: "/new Quit test" typed with a question open went to the
    agent as the answer."""
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen, request = await asked_in_the_tui(pilot, app)
        await pilot.press(*"/new Quit test", "enter")
        await wait_until(pilot, lambda: any("is a command" in t for t in notifications(app)))
        assert screen.query(QuestionPrompt)
        assert (await runtime.store.get_input_request(request.id)).answer is None
        field = screen.query_one(AnswerInput)
        assert app.focused is field and field.value == "/new Quit test"
        field.value = ""
        await pilot.press(*"//new is the word", "enter")
        await wait_until(pilot, lambda: not screen.query(QuestionPrompt))
    assert (await runtime.store.get_input_request(request.id)).answer == "/new is the word"
    assert len((await runtime.list_jobs()).items) == 1


async def test_an_unknown_command_typed_as_an_answer_is_refused_as_the_message_box_refuses_it(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a user trial: "/bogus" typed with a question open went to the agent as the
    answer, where the message box refuses an unknown command. It is kept, not sent, and the
    notice gives the escaped text that answers with it."""
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen, request = await asked_in_the_tui(pilot, app)
        await pilot.press(*"/bogus thing", "enter")
        await wait_until(
            pilot, lambda: any("/bogus is not an answer" in t for t in notifications(app))
        )
        [notice] = [t for t in notifications(app) if "/bogus is not an answer" in t]
        assert "nothing was sent" in notice and "//bogus thing answers with" in notice
        assert screen.query(QuestionPrompt)
        assert (await runtime.store.get_input_request(request.id)).answer is None
        field = screen.query_one(AnswerInput)
        assert app.focused is field and field.value == "/bogus thing"
        # A path is text: no command's name has a slash in it; nor is a folder at the root,
        # a likely answer to "where…?" (a review).
        field.value = "/tmp"
        await pilot.press("enter")
        await wait_until(pilot, lambda: not screen.query(QuestionPrompt))
    assert (await runtime.store.get_input_request(request.id)).answer == "/tmp"


async def test_a_path_typed_as_an_answer_is_sent_as_typed(
    runtime: Runtime, workspace: Path
) -> None:
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen, request = await asked_in_the_tui(pilot, app)
        await pilot.press(*"/etc/hosts", "enter")
        await wait_until(pilot, lambda: not screen.query(QuestionPrompt))
    assert (await runtime.store.get_input_request(request.id)).answer == "/etc/hosts"


async def test_an_answer_that_starts_with_a_digit_is_typed_whole_not_taken_for_an_option(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial: "2024 roadmap" picked option 2 at its first key and dropped
    the rest. A digit is text; an option's number alone, then Enter, picks that option."""
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen, request = await asked_in_the_tui(pilot, app)
        assert len(request.options) >= 2
        await pilot.press(*"2024 roadmap")
        assert screen.query_one(AnswerInput).value == "2024 roadmap"
        await pilot.press("enter")
        await wait_until(pilot, lambda: not screen.query(QuestionPrompt))
    stored = await runtime.store.get_input_request(request.id)
    assert stored.answer == "2024 roadmap"


async def test_a_pasted_answer_of_several_lines_is_kept_whole_on_its_one_line(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial: three lines pasted as an answer; the answer sent was the
    first line (Textual's one-line field drops the others without a word)."""
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen, request = await asked_in_the_tui(pilot, app)
        await pilot.press(*"Note: ")
        app.post_message(
            events.Paste("Focus on divide():\nit crashes on zero.\n\n  And add a test\n")
        )
        await wait_until(
            pilot,
            lambda: (
                screen.query_one(AnswerInput).value
                == "Note: Focus on divide(): it crashes on zero. And add a test"
            ),
        )
        await pilot.press("enter")
        await wait_until(pilot, lambda: not screen.query(QuestionPrompt))
    stored = await runtime.store.get_input_request(request.id)
    assert stored.answer == "Note: Focus on divide(): it crashes on zero. And add a test"
    assert len((await runtime.list_jobs()).items) == 1  # no line went on as a message


async def test_a_paste_with_windows_or_carriage_return_line_breaks_keeps_one_break_each(
    runtime: Runtime, workspace: Path
) -> None:
    """A paste of Windows text (CRLF) or of text whose line breaks came as carriage returns
    (xterm and tmux send a line feed as CR in a paste) has the lines it had, in the composer
    and in the answer field: never a doubled blank line, never a CR left in the text."""
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        box = main_screen(app).composer.input
        app.post_message(events.Paste("a\r\nb\r\n\r\nc"))
        await wait_until(pilot, lambda: box.text != "")
        await pilot.pause()
        assert box.text == "a\nb\n\nc"
        box.clear()
        app.post_message(events.Paste("a\rb\r\rc"))
        await wait_until(pilot, lambda: box.text != "")
        await pilot.pause()
        assert box.text == "a\nb\n\nc"
        box.clear()

        screen, _ = await asked_in_the_tui(pilot, app)
        field = screen.query_one(AnswerInput)
        await wait_until(pilot, lambda: app.focused is field)
        app.post_message(events.Paste("first\r\n\r\nsecond\rthird\r\n"))
        await wait_until(pilot, lambda: field.value != "")
        await pilot.pause()
        assert field.value == "first second third"


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
async def test_ctrl_z_undoes_a_paste_longer_than_the_box_and_ctrl_y_brings_it_back(
    runtime: Runtime, workspace: Path, size: tuple[int, int]
) -> None:
    """Found by a new-user trial: thirty lines pasted into the message box (which shows ten
    and scrolls), then ctrl+z: the app quit with "ValueError: The document line index 1 is
    out of bounds" (Textual lays the box out again, its scrollbar gone, before it puts the
    cursor back, and the cursor was still on the pasted text's last line)."""
    app = make_app(runtime, workspace)
    async with app.run_test(size=size) as pilot:
        box = main_screen(app).composer.input
        # The app takes keys and pastes as they come (not held until its screen is up).
        await wait_until(pilot, lambda: app.focused is box and app._held_input is None)
        pasted = "\n".join(f"line number {number}" for number in range(1, 31)) + "\n"
        await pilot.press(*"keep this: ")
        app.post_message(events.Paste(pasted))
        await wait_until(pilot, lambda: box.text == "keep this: " + pasted)
        await pilot.pause()
        assert box.size.height == MAX_LINES  # it scrolls
        await pilot.press("ctrl+z")
        await wait_until(pilot, lambda: box.text == "keep this: ")
        await pilot.pause()
        assert box.cursor_location == (0, len("keep this: "))
        await pilot.press("ctrl+y")
        await wait_until(pilot, lambda: box.text == "keep this: " + pasted)
        await pilot.pause()
        await pilot.press("f7", "backspace")  # everything selected, deleted
        await wait_until(pilot, lambda: box.text == "")
        await pilot.press("ctrl+z", "ctrl+y")  # back, and gone again
        await wait_until(pilot, lambda: box.text == "")
        await pilot.press(*"still works")
        assert box.text == "still works"


async def test_a_long_paste_into_the_empty_answer_field_shows_its_end_and_the_cursor(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial at 80x24: pasted into the empty field, a long answer showed
    its start and hid its end, the cursor off-screen past the edge, until a key was typed."""
    app = make_app(runtime, workspace)
    async with app.run_test(size=(80, 24)) as pilot:
        screen, _ = await asked_in_the_tui(pilot, app)
        field = screen.query_one(AnswerInput)
        await wait_until(pilot, lambda: app.focused is field)
        pasted = "first answer line\nsecond answer line\n\nthird after blank"
        app.post_message(events.Paste(pasted))
        joined = "first answer line second answer line third after blank"
        await wait_until(pilot, lambda: field.value == joined)
        await pilot.pause()
        assert field.content_size.width < len(joined)  # it does not fit: it must scroll
        shown = str(field.render_line(0).text).rstrip()
        assert shown.endswith("third after blank"), shown
        # Scrolled to the end, the cursor after the text, as typing it leaves the field.
        assert field.scroll_offset.x == field.max_scroll_x > 0
        x, _ = field.cursor_screen_offset
        assert field.content_region.x <= x <= field.content_region.right


async def test_an_options_number_alone_then_enter_picks_that_option(
    runtime: Runtime, workspace: Path
) -> None:
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen, request = await asked_in_the_tui(pilot, app)
        await pilot.press("2")
        await pilot.pause()
        assert screen.query(QuestionPrompt)  # not sent by the digit alone
        await pilot.press("enter")
        await wait_until(pilot, lambda: not screen.query(QuestionPrompt))
    stored = await runtime.store.get_input_request(request.id)
    assert stored.answer == request.options[1]


async def test_single_letter_keys_show_in_the_footer_only_where_no_text_is_typed(
    runtime: Runtime, workspace: Path
) -> None:
    run = await runtime.start("summarise")
    await finish_run(runtime, run.id)
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        assert app.focused is screen.job_tree
        assert {"n", "i"} <= footer_keys(screen)
        screen.composer.focus_input()
        await pilot.pause()
        shown = footer_keys(screen)
        assert not {key for key in shown if len(key) == 1}, shown
        await pilot.press("i")  # text, not the inbox
        assert screen.composer.input.text == "i"
        assert not isinstance(app.screen, HelpScreen)
        assert app.screen is screen


async def test_a_question_mark_in_an_empty_message_box_lists_the_keys_and_is_text_after_words(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial: the first screen says "? or F1 lists every key", but the
    message box has the focus there and "?" was typed into it."""
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        screen.composer.focus_input()
        await pilot.press("question_mark")
        await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen))
        assert screen.composer.input.text == ""
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is screen)
        screen.composer.focus_input()
        await pilot.press(*"why", "question_mark")
        assert screen.composer.input.text == "why?"
        assert app.screen is screen


async def test_keys_typed_in_a_burst_edit_the_message_box_in_the_order_typed(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial (tmux, keys sent at once): "/foo bar", Enter, eight
    Backspaces and "explain @calc" left "/foo barexpla": the characters landed first, the
    Backspaces (bindings, run once the key reached the app) after them."""
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        screen.composer.focus_input()
        await pilot.press(*"/foo bar")
        send_burst(app, ["enter", *["backspace"] * 8, *"explain @calc"])
        await wait_until(pilot, lambda: screen.composer.input.text == "explain @calc")
        send_burst(app, [*["left"] * 6, "backspace", *"ning", "home", *"now "])
        await wait_until(pilot, lambda: screen.composer.input.text == "now explaining @calc")


async def test_keys_typed_in_a_burst_edit_the_search_field_in_the_order_typed(
    runtime: Runtime, workspace: Path
) -> None:
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await pilot.press("escape")
        await pilot.press("slash")
        field = screen.query_one("#search", Input)
        await wait_until(pilot, lambda: app.focused is field)
        send_burst(app, [*"pelicna", "backspace", "backspace", *"an"])
        await wait_until(pilot, lambda: field.value == "pelican")


async def test_cancelling_a_run_asks_in_the_docked_area_and_no_keeps_it(
    runtime: Runtime, workspace: Path
) -> None:
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen, asked = await asked_in_the_tui(pilot, app)
        run_id = asked.run_id
        await pilot.press("escape", "c")
        bar = screen.query_one(ConfirmBar)
        assert "Cancel the run" in str(bar.render())
        # Found by a new-user trial: the footer said "esc Interrupt, n New job" meanwhile.
        await pilot.pause()
        footer = {key.key: key.description for key in screen.query(FooterKey)}
        assert footer.get("y") == "Yes" and footer.get("n") == "No", footer
        await pilot.press("n")
        await wait_until(pilot, lambda: not screen.query(ConfirmBar))
        assert (await runtime.get_run(run_id)).state is RunState.INPUT_REQUIRED
        await pilot.press("c", "y")
        await wait_until(
            pilot, lambda: screen.selected_run is not None and screen.selected_run.state.is_terminal
        )
        assert not any("elsewhere" in text for text in notifications(app))
    assert (await runtime.get_run(run_id)).state is RunState.CANCELLED


async def test_a_run_on_screen_cancelled_elsewhere_says_so_and_why(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial: `agent-tui cancel RUN` from another shell stopped the run on
    screen without a word."""
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        _, request = await asked_in_the_tui(pilot, app)
        await runtime.cancel(request.run_id, reason="cancelled from the command line")
        await wait_until(
            pilot, lambda: any("cancelled elsewhere" in text for text in notifications(app))
        )
        [notice] = [text for text in notifications(app) if "cancelled elsewhere" in text]
        assert "(cancelled from the command line)" in notice


# --- 2. the composer -----------------------------------------------------------------------------
async def test_shift_enter_and_ctrl_j_make_new_lines_and_enter_sends_all_of_them(
    runtime: Runtime, workspace: Path
) -> None:
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await pilot.press(*"first line", "shift+enter", *"second line", "ctrl+j", *"third")
        assert screen.composer.input.text == "first line\nsecond line\nthird"
        await pilot.press("enter")
        await wait_until(pilot, lambda: screen.selected_run is not None)
        assert screen.composer.input.text == ""
    assert await user_inputs(runtime) == ["first line\nsecond line\nthird"]


async def test_a_backslash_then_enter_makes_a_new_line_in_any_terminal_and_enter_sends(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial: alt+Enter, which tmux, xterm and most terminals send as ESC
    then Enter, sent the half-written prompt (Textual reads it as a plain Enter). A backslash
    at the cursor then Enter is a new line, as in Claude Code: it works in every terminal."""
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        box = screen.composer.input
        await pilot.press(*"first line", "backslash", "enter", *"second")
        assert box.text == "first line\nsecond"
        await pilot.press("backslash", "enter", "backslash", "enter", *"fourth")
        assert box.text == "first line\nsecond\n\nfourth"
        assert screen.selected_run is None  # nothing was sent
        await pilot.press("left", "left", "backslash", "right", "enter")  # not at the cursor
        await wait_until(pilot, lambda: screen.selected_run is not None)
        assert box.text == ""
    assert await user_inputs(runtime) == ["first line\nsecond\n\nfour\\th"]


async def test_ctrl_a_and_ctrl_e_go_to_the_start_and_end_of_the_typed_line_home_to_the_row(
    runtime: Runtime, workspace: Path
) -> None:
    """Left open by the helper that made ctrl+u and ctrl+k act on the typed line: ctrl+a went
    to the start of the wrapped row only, as Home does."""
    long_line = ("word " * 60).strip()  # 299 characters
    app = make_app(runtime, workspace)
    async with app.run_test(size=(80, 24)) as pilot:
        box = main_screen(app).composer.input
        app.post_message(events.Paste(f"first line\n{long_line}"))
        await wait_until(pilot, lambda: box.text == f"first line\n{long_line}")
        await pilot.pause()
        assert box.wrapped_document.height > 3
        await pilot.press("home")  # the wrapped row's start: not the typed line's
        assert box.cursor_location[0] == 1 and 0 < box.cursor_location[1] < len(long_line)
        await pilot.press("ctrl+a")
        assert box.cursor_location == (1, 0)
        await pilot.press("ctrl+e")
        assert box.cursor_location == (1, len(long_line))
        assert box.text == f"first line\n{long_line}"


async def test_ctrl_u_and_ctrl_k_delete_to_the_start_and_end_of_the_typed_line_not_the_wrapped_row(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial: with a long prompt wrapped over several rows, ctrl+u took
    only the part on the cursor's row. As in readline (and Claude Code) it takes the line back
    to the previous newline, and ctrl+k the line up to the next one."""
    long_line = ("word " * 60).strip()  # 299 characters
    app = make_app(runtime, workspace)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = main_screen(app)
        box = screen.composer.input
        app.post_message(events.Paste(long_line))
        await wait_until(pilot, lambda: box.text == long_line)
        await pilot.pause()
        assert box.wrapped_document.height > 2  # several rows on screen
        assert box.cursor_location == (0, len(long_line))
        await pilot.press("ctrl+u")
        assert box.text == ""

        app.post_message(events.Paste(f"first line\n{long_line}"))
        await wait_until(pilot, lambda: box.text == f"first line\n{long_line}")
        await pilot.press("ctrl+u")
        assert box.text == "first line\n"
        await pilot.press("backspace", "ctrl+u")  # at the first line's end: that line goes
        assert box.text == ""

        app.post_message(events.Paste(f"{long_line}\nsecond line"))
        await wait_until(pilot, lambda: box.text == f"{long_line}\nsecond line")
        box.move_cursor((0, 5))
        await pilot.press("ctrl+k")
        assert box.text == "word \nsecond line"
        await pilot.press("ctrl+k")  # at the line's end: the next line joins it, as before
        assert box.text == "word second line"


async def test_a_pasted_thousand_line_traceback_keeps_every_line_and_the_box_stays_bounded(
    runtime: Runtime, workspace: Path
) -> None:
    pasted = "\n".join(f'  File "app.py", line {n}, in handler' for n in range(1000))
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        box = screen.composer.input
        app.post_message(events.Paste(pasted))  # as the terminal sends it: to the app
        await wait_until(pilot, lambda: box.document.line_count == 1000)
        await pilot.pause()
        assert box.text == pasted
        assert box.size.height <= MAX_LINES
        await pilot.press("enter")
        await wait_until(pilot, lambda: screen.selected_run is not None)
    assert await user_inputs(runtime) == [pasted.strip()]


async def test_the_unsent_draft_comes_back_after_quitting_and_after_a_crash(
    db_path: Path, workspace: Path
) -> None:
    runtime = await open_runtime(db_path, workspace)
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press(*"half a thought", "shift+enter", *"and more")
            # Saved after a quiet moment, so a crash right now keeps it (no quit needed).
            await wait_until(
                pilot,
                lambda: pilot.app.is_running,
            )
            store = runtime.store
            saved: list[str] = []

            async def read() -> None:
                saved.append(await composer_text(store, None))

            async def draft_is_saved() -> bool:
                await read()
                return saved[-1] == "half a thought\nand more"

            for _ in range(200):
                if await draft_is_saved():
                    break
                await pilot.pause(0.05)
            assert saved[-1] == "half a thought\nand more"
        # The app is gone without a quit action (as after a crash).
    finally:
        await runtime.close()

    runtime = await open_runtime(db_path, workspace)
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            screen = main_screen(app)
            await wait_until(pilot, lambda: screen.composer.input.text != "")
            assert screen.composer.input.text == "half a thought\nand more"
            await wait_until(pilot, lambda: any("back in the box" in n for n in notifications(app)))
            await pilot.press("ctrl+q")  # a quit saves what is in the box too
    finally:
        await runtime.close()


async def test_another_live_agent_tuis_half_typed_text_is_not_shown_here_until_it_quits(
    db_path: Path, workspace: Path
) -> None:
    """Found by a new-user trial: a second agent-tui on the same database showed the first
    one's half-typed follow-up in its own box, and sent it again."""
    other = await open_runtime(db_path, workspace)  # another agent-tui, alive
    runtime = await open_runtime(db_path, workspace)
    try:
        run = await runtime.start("summarise")
        await finish_run(runtime, run.id)
        await other.store.save_composer_draft(run.job_id, "typed over there", writer=other.owner_id)
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            screen = main_screen(app)

            def draft_loaded() -> bool:
                return not any(
                    worker.group == "draft-load" and worker.is_running for worker in screen.workers
                )

            await _open_first_job(pilot, app, run.job_id)
            await wait_until(pilot, draft_loaded)
            await pilot.pause()
            assert screen.composer.input.text == ""
            assert not any("back in the box" in text for text in notifications(app))

            await other.close()  # it quits: what it left unsent is this one's to restore
            await pilot.press("n")
            await wait_until(pilot, lambda: screen.composer.follow_up_job_id is None)
            await pilot.press("escape")
            await _open_first_job(pilot, app, run.job_id)
            await wait_until(pilot, lambda: screen.composer.input.text == "typed over there")
            await wait_until(pilot, lambda: any("back in the box" in t for t in notifications(app)))
        # Taken over, once: the other's row went as this one's was saved.
        drafts = await runtime.store.get_composer_drafts(run.job_id)
        assert [(d.writer, d.text) for d in drafts] == [(runtime.owner_id, "typed over there")]
    finally:
        await runtime.close()
        await other.close()


async def test_a_follow_up_draft_is_kept_per_job(runtime: Runtime, workspace: Path) -> None:
    run = await runtime.start("summarise")
    await finish_run(runtime, run.id)
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        await _open_first_job(pilot, app, run.job_id)
        await pilot.press("ctrl+t", *"next: the tests")
        await pilot.press("ctrl+q")
    assert await composer_text(runtime.store, run.job_id) == "next: the tests"
    assert await composer_text(runtime.store, None) == ""


async def test_a_new_job_starts_with_an_empty_box_and_the_follow_up_stays_with_its_job(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial: a follow-up typed for a job, then ``n``, stayed in the box,
    and went out as the new job's task (while the old job kept a copy as its draft)."""
    run = await runtime.start("summarise")
    await finish_run(runtime, run.id)
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await _open_first_job(pilot, app, run.job_id)
        await pilot.press("ctrl+t", *"for the old job", "escape")
        await pilot.press("n")
        await wait_until(pilot, lambda: screen.composer.follow_up_job_id is None)
        await pilot.pause()
        assert screen.composer.input.text == ""
        await pilot.press(*"a new task")
        await pilot.press("ctrl+q")
    assert await composer_text(runtime.store, run.job_id) == "for the old job"
    assert await composer_text(runtime.store, None) == "a new task"


async def test_a_message_sent_while_slash_new_starts_its_job_goes_to_that_job_not_the_old_one(
    db_path: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by a new-user trial: ``/new TASK``, then a message half a second later; the new
    job was still being started, so the message became a follow-up of the job on screen."""
    script = [Turn("old job done"), Turn("calc looked at"), Turn("README too")]
    runtime = await open_scripted(ScriptedProvider(script), db_path, workspace)
    try:
        old = await runtime.start("the old job")
        await finish_run(runtime, old.id)
        starting = asyncio.Event()
        start = runtime.start

        async def slow_start(*args: Any, **kwargs: Any) -> Run:
            await starting.wait()  # the new job takes its time to start (a slow MCP server)
            return await start(*args, **kwargs)

        monkeypatch.setattr(runtime, "start", slow_start)
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            screen = main_screen(app)
            await _open_first_job(pilot, app, old.job_id)
            await pilot.press("ctrl+t", *"/new look at calc.py", "enter")
            await wait_until(pilot, lambda: screen.composer.follow_up_job_id is None)
            await pilot.press(*"and then the README", "enter")
            await wait_until(pilot, lambda: any("still starting" in t for t in notifications(app)))
            assert screen.composer.input.text == ""
            starting.set()

            async def new_job_runs() -> list[str | None]:
                jobs = (await runtime.list_jobs()).items
                new = [job for job in jobs if job.id != old.job_id]
                if not new:
                    return []
                runs = await runtime.job_runs(new[0].id)
                return [r.input for r in runs if r.parent_run_id is None and r.state.is_terminal]

            async with asyncio.timeout(30):
                while await new_job_runs() != ["look at calc.py", "and then the README"]:
                    await pilot.pause(0.05)
        assert [r.input for r in await runtime.job_runs(old.job_id)] == ["the old job"]
        assert len((await runtime.list_jobs()).items) == 2
    finally:
        await runtime.close()


def _opened_late(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> tuple[list[Run], asyncio.Event]:
    """The runs the app starts (in order), and an event until which a job started is not read
    back: its run is not on screen, so the box does not address it yet (a loaded machine)."""
    started: list[Run] = []
    opened = asyncio.Event()
    start, get_job = runtime.start, runtime.get_job

    async def recorded_start(*args: Any, **kwargs: Any) -> Run:
        run = await start(*args, **kwargs)
        started.append(run)
        return run

    async def late_get_job(job_id: str) -> Job:
        if started:
            await opened.wait()
        return await get_job(job_id)

    monkeypatch.setattr(runtime, "start", recorded_start)
    monkeypatch.setattr(runtime, "get_job", late_get_job)
    return started, opened


async def _root_inputs(runtime: Runtime, job_id: str) -> list[str | None]:
    runs = await runtime.job_runs(job_id)
    return [r.input for r in runs if r.parent_run_id is None and r.state.is_terminal]


async def test_a_message_sent_right_after_a_new_jobs_task_is_its_follow_up_not_a_second_job(
    db_path: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by a new-user trial in tmux: a task, Enter, and at once another message, Enter;
    the job existed but its run was not on screen yet, so the box still addressed a new job and
    the message started a second job."""
    working = asyncio.Event()
    script = [Turn("looking at it " * 10, gate=working), Turn("hello to you")]
    runtime = await open_scripted(ScriptedProvider(script), db_path, workspace)
    try:
        started, opened = _opened_late(runtime, monkeypatch)
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            screen = main_screen(app)
            await pilot.press(*"summarise this project", "enter")
            await wait_until(pilot, lambda: started)
            job_id = started[0].job_id
            assert screen.composer.follow_up_job_id is None
            await pilot.press(*"hello there", "enter")
            await wait_until(pilot, lambda: len(started) > 1 or screen.composer.queued(job_id))
            assert len(started) == 1
            assert screen.composer.queued(job_id) == ["hello there"]
            opened.set()
            await wait_until(pilot, lambda: screen.composer.follow_up_job_id == job_id)
            working.set()
            async with asyncio.timeout(30):
                while await _root_inputs(runtime, job_id) != [
                    "summarise this project",
                    "hello there",
                ]:
                    await pilot.pause(0.05)
        assert len((await runtime.list_jobs()).items) == 1
    finally:
        await runtime.close()


async def test_a_message_sent_after_slash_new_while_the_last_new_job_opens_starts_its_own_job(
    runtime: Runtime, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``/new`` asks for a new job explicitly: what is sent after it is not the follow-up of
    the job started just before, whose run is still being opened."""
    started, opened = _opened_late(runtime, monkeypatch)
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await pilot.press(*"summarise this project", "enter")
        await wait_until(pilot, lambda: started)
        await pilot.press(*"/new", "enter")
        await wait_until(pilot, lambda: "New job: type the task" in screen_text(app))
        await pilot.press(*"hello there", "enter")
        first = started[0].job_id
        await wait_until(pilot, lambda: len(started) > 1 or screen.composer.queued(first))
        opened.set()
        assert screen.composer.queued(first) == []
    titles = sorted(job.title for job in (await runtime.list_jobs()).items)
    assert titles == ["hello there", "summarise this project"]


async def test_ctrl_t_moves_what_is_typed_between_a_follow_up_and_a_new_job(
    runtime: Runtime, workspace: Path
) -> None:
    run = await runtime.start("summarise")
    await finish_run(runtime, run.id)
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await _open_first_job(pilot, app, run.job_id)
        await pilot.press("ctrl+t", *"better as a job of its own")
        await pilot.press("ctrl+t")
        await wait_until(pilot, lambda: screen.composer.follow_up_job_id is None)
        assert screen.composer.input.text == "better as a job of its own"
        await pilot.press("ctrl+q")
    assert await composer_text(runtime.store, run.job_id) == ""
    assert await composer_text(runtime.store, None) == "better as a job of its own"


@pytest.mark.parametrize("keys", [("ctrl+t",), ("escape", "n")], ids=["ctrl+t", "esc-n"])
async def test_a_new_jobs_draft_comes_back_after_an_approval_answered_in_another_job(
    runtime: Runtime, workspace: Path, keys: tuple[str, ...]
) -> None:
    """Found by a new-user trial (120x40, the demo model): a new job's draft, then an approval
    answered in a job waiting for it, then ctrl+t: "✚ New job" over an empty box, the draft
    back only after a relaunch. The answer leaves the keys in the box, where ctrl+t changed
    the target without reading the new target's draft."""
    app = make_app(runtime, workspace)
    async with app.run_test(size=(120, 40)) as pilot:
        screen, question = await asked_in_the_tui(pilot, app)
        await pilot.press("1", "enter")
        await wait_until(pilot, lambda: screen.query(ApprovalPrompt))
        await pilot.press("escape", "n")
        composer = screen.composer
        await wait_until(
            pilot, lambda: composer.follow_up_job_id is None and app.focused is composer.input
        )
        await pilot.press(*"draft X", "escape")
        await pilot.press("home", "enter")
        await wait_until(pilot, lambda: screen.query(ApprovalPrompt))
        assert composer.follow_up_job_id == question.job_id and composer.input.text == ""
        await pilot.press("y")
        await wait_until(pilot, lambda: app.focused is composer.input)
        # Once the run has finished (Esc would interrupt it).
        await wait_until(
            pilot, lambda: screen.selected_run is not None and screen.selected_run.state.is_terminal
        )
        await pilot.press(*keys)
        await wait_until(pilot, lambda: composer.follow_up_job_id is None)
        await wait_until(pilot, lambda: composer.input.text == "draft X")
        await pilot.press("ctrl+q")
    assert await composer_text(runtime.store, None) == "draft X"
    assert await composer_text(runtime.store, question.job_id) == ""


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (200, 60)])
async def test_the_empty_boxs_hint_fits_the_box_whole(
    runtime: Runtime, workspace: Path, size: tuple[int, int]
) -> None:
    """Found by new-user trials: the hint was cut at "shift+Enter" at 80 columns and at "· @"
    at 120; then, whole, it left out the keys that send and start a new line at 80, so a new
    user there was never shown them. The longest one that fits is shown, and the keys are in
    each; at 120 columns and more, all of it."""
    app = make_app(runtime, workspace)
    async with app.run_test(size=size) as pilot:
        box = main_screen(app).composer.input
        await wait_until(pilot, lambda: box.content_size.width > 0)
        await pilot.pause()
        assert len(box.placeholder) <= box.content_size.width
        assert "Enter send · ctrl+J newline" in box.placeholder
        if size[0] >= 120:
            assert box.placeholder == (
                "Describe a task · Enter send · ctrl+J newline · / commands · @ files"
            )
        else:
            assert "/ commands" in box.placeholder


async def test_up_at_the_first_line_recalls_earlier_prompts_and_down_comes_back(
    runtime: Runtime, workspace: Path
) -> None:
    first = await runtime.start("an older prompt")
    await finish_run(runtime, first.id)
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        screen.composer.focus_input()
        await pilot.press(*"draft")
        await wait_until(pilot, lambda: screen.composer.history)
        await pilot.press("up")
        assert screen.composer.input.text == "an older prompt"
        await pilot.press("down")
        assert screen.composer.input.text == "draft"


async def test_up_goes_on_past_a_command_and_typing_adds_to_the_end_of_what_it_recalled(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial: a recalled command opened the command menu, which then took
    ↑ and ↓ (history stopped there, and the next message went out with "/context" in it); and
    the cursor sat before the recalled text, so typing went in front of it."""
    first = await runtime.start("an older prompt")
    await finish_run(runtime, first.id)
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        composer = screen.composer
        composer.focus_input()
        await pilot.press(*"/context", "enter")
        await wait_until(pilot, lambda: composer.history[-1:] == ["/context"])
        await wait_until(pilot, lambda: app.screen is not screen)  # its report, over the screen
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is screen and app.focused is composer.input)
        await pilot.press("up")
        await pilot.pause()
        assert composer.input.text == "/context" and composer.completing is None
        await pilot.press("up")
        await pilot.pause()
        assert composer.input.text == "an older prompt"
        await pilot.press(*", again")
        assert composer.input.text == "an older prompt, again"
        # Typing a command again opens the menu as ever.
        composer.clear_text()
        await pilot.press(*"/con")
        await wait_until(pilot, lambda: composer.completing == "slash")


# --- 3. interrupt and quit -----------------------------------------------------------------------
async def test_escape_interrupts_a_streaming_answer_and_keeps_its_text_and_the_job(
    db_path: Path, workspace: Path
) -> None:
    runtime = await open_runtime(db_path, workspace, model="demo")
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            screen = main_screen(app)
            await pilot.press(*"//stream 400", "enter")

            def streamed() -> int:
                return sum(
                    len(v.text) for v in screen.query(MessageView) if v.role is Role.ASSISTANT
                )

            await wait_until(pilot, lambda: streamed() > 200)
            run = screen.selected_run
            assert run is not None
            await pilot.press("escape")
            await wait_until(
                pilot,
                lambda: screen.selected_run is not None and screen.selected_run.state.is_terminal,
            )
            stopped = await runtime.get_run(run.id)
            assert stopped.state is RunState.CANCELLED
            assert stopped.cancel_reason == "interrupted"
            assert streamed() > 200  # what streamed stays on screen
            # ... marked as the partial answer it is, as it is when the run is opened again.
            await wait_until(pilot, lambda: screen.conversation.query(".partial-label"))
            [mark] = screen.conversation.query(".partial-label").results(Static)
            assert "cancelled before it finished" in str(mark.render())
            assert app.focused is screen.composer.input
            assert screen.composer.follow_up_job_id == run.job_id
            # The notice names what works where the keys go: R would be a letter of the text.
            await wait_until(pilot, lambda: any("/retry" in n for n in notifications(app)))
            assert not any("press R" in n for n in notifications(app))
            await pilot.press(*"go on, shorter", "enter")
            await wait_until(
                pilot, lambda: screen.selected_run is not None and screen.selected_run.id != run.id
            )
        runs = await runtime.job_runs(run.job_id)
        assert [r.input for r in runs if r.parent_run_id is None] == [
            "/stream 400",
            "go on, shorter",
        ]
    finally:
        await runtime.close()


async def test_escape_leaves_a_run_another_process_works_running(
    db_path: Path, workspace: Path
) -> None:
    # A trial pressed Esc to go to the browser just after a shell's `agent-tui retry` had
    # started the run on screen again: Esc interrupted it, and the shell's command ended "was
    # cancelled". Esc stops what this agent-tui runs; c cancels the others, asking first.
    gate = asyncio.Event()
    elsewhere = await open_scripted(
        ScriptedProvider([Turn("working on it " * 20, gate=gate), Turn("done")]),
        db_path,
        workspace,
    )
    runtime = await open_runtime(db_path, workspace)
    try:
        run = await elsewhere.start("a long task")
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            screen = main_screen(app)
            await wait_for_browser(pilot, app)
            await pilot.press("enter")
            await wait_until(
                pilot,
                lambda: (
                    screen.selected_run is not None
                    and screen.selected_run.id == run.id
                    and screen.selected_run.state is RunState.RUNNING
                ),
            )
            screen.composer.focus_input()
            await pilot.pause()
            status = screen.status.text
            # In the box c is a letter: the way to it is named.
            assert "worked by another process · esc, then c cancels" in status
            assert "esc to interrupt" not in status
            await pilot.press("escape")
            await wait_until(pilot, lambda: app.focused is screen.job_tree)
            assert (await runtime.get_run(run.id)).state is RunState.RUNNING
            assert "worked by another process · c cancels" in screen.status.text
            gate.set()
        assert (await elsewhere.wait(run.id, timeout=30)).state is RunState.COMPLETED
    finally:
        await runtime.close()
        await elsewhere.close()


class _SlowToStop(ScriptedProvider):
    """Streams a first piece, then works on; once cancelled it takes until ``release`` to stop,
    as a model call or a tool that winds down slowly does."""

    def __init__(self) -> None:
        super().__init__([])
        self.release = asyncio.Event()

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.requests.append(request)
        yield TextDelta(text="working on it")
        self.started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await self.release.wait()
            raise


async def test_a_second_escape_after_an_interrupt_goes_to_the_browser_and_stays_there(
    db_path: Path, workspace: Path
) -> None:
    """Found by a new-user trial: the README's "Esc (or Tab) to the browser, ↑ to the job,
    Enter" pressed while a run worked interrupted it, the focus stayed in the composer, and
    ↑ Enter sent the last prompt again. Esc, Esc goes to the browser however soon the second
    comes, and the interrupt's notice, arriving later, leaves the keys there."""
    provider = _SlowToStop()
    runtime = await open_scripted(provider, db_path, workspace)
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            screen = main_screen(app)
            await pilot.press(*"first prompt of the repro", "enter")
            await wait_until(pilot, lambda: screen._working_run() is not None)
            run = screen._working_run()
            assert run is not None
            send_burst(app, ["escape", "escape"])  # the second before the first is handled
            await wait_until(pilot, lambda: app.focused is screen.job_tree, timeout=10)
            provider.release.set()
            await wait_until(pilot, lambda: any("Interrupted." in n for n in notifications(app)))
            await pilot.pause()
            assert app.focused is screen.job_tree  # not taken back to the composer
            [notice] = [n for n in notifications(app) if "Interrupted." in n]
            assert "Press R to retry" in notice and "/retry" not in notice
            # As the recipe goes on: ↑ and Enter move in the browser, nothing is sent again.
            await pilot.press("up", "enter")
            await pilot.pause()
            assert not screen.composer.input.text
            stopped = await runtime.get_run(run.id)
            assert stopped.state is RunState.CANCELLED and stopped.cancel_reason == "interrupted"
            runs = await runtime.job_runs(run.job_id)
            assert [r.input for r in runs] == ["first prompt of the repro"]
    finally:
        await runtime.close()


@pytest.mark.parametrize("pane", ["browser", "conversation"])
async def test_escape_in_a_pane_interrupts_the_run_and_leaves_the_keys_in_that_pane(
    db_path: Path, workspace: Path, pane: str
) -> None:
    """Found by a new-user trial: Esc in the browser while a run streamed interrupted it (as
    the README says) and then took the keys to the composer, so the `b` typed next went into
    the box and Enter sent it as a follow-up. The keys stay where Esc was pressed."""
    runtime = await open_runtime(db_path, workspace, model="demo")
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            screen = main_screen(app)
            await pilot.press(*"//stream 400", "enter")
            await wait_until(pilot, lambda: screen._working_run() is not None)
            run = screen._working_run()
            assert run is not None
            await pilot.press("tab")
            await wait_until(pilot, lambda: app.focused is screen.job_tree)
            if pane == "conversation":
                await pilot.press("g")
                await wait_until(pilot, lambda: screen._pane_of(app.focused) == 1)
            where = app.focused
            await pilot.press("escape")
            await wait_until(pilot, lambda: any("Interrupted." in n for n in notifications(app)))
            await pilot.pause()
            assert app.focused is where
            [notice] = [n for n in notifications(app) if "Interrupted." in n]
            assert "Press R to retry" in notice and "/retry" not in notice
            # The next keys are the pane's: b goes to the browser, Enter opens the row there.
            await pilot.press("b", "enter")
            await pilot.pause()
            assert app.focused is screen.job_tree
            assert not screen.composer.input.text
            stopped = await runtime.get_run(run.id)
            assert stopped.state is RunState.CANCELLED and stopped.cancel_reason == "interrupted"
            assert [r.input for r in await runtime.job_runs(run.job_id)] == ["/stream 400"]
    finally:
        await runtime.close()


async def test_while_the_run_on_screen_works_a_waiting_run_is_reached_by_tab_not_esc(
    db_path: Path, workspace: Path
) -> None:
    """From the composer, Esc stops the run on screen while it works: the notice that another
    run waits named "Esc, then i", which would have stopped it. It names Tab, which goes to
    the browser whatever runs."""
    from tui.screens.inbox import InboxScreen

    runtime = await open_runtime(db_path, workspace, model="demo")
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            screen = main_screen(app)
            await pilot.press(*"//stream 400", "enter")
            await wait_until(pilot, lambda: screen._working_run() is not None)
            working = screen._working_run()
            assert working is not None and app.focused is screen.composer.input
            await runtime.start("summarise", model="demo:instant")  # it asks a question
            await wait_until(pilot, lambda: any("for the inbox" in n for n in notifications(app)))
            [notice] = [n for n in notifications(app) if "for the inbox" in n]
            assert "press Tab, then i" in notice
            await pilot.press("tab", "i")
            await wait_until(pilot, lambda: isinstance(app.screen, InboxScreen))
            assert (await runtime.get_run(working.id)).state is RunState.RUNNING
    finally:
        await runtime.close()


async def test_a_long_answer_cut_by_escape_reads_as_markdown_as_when_opened_again(
    db_path: Path, workspace: Path
) -> None:
    """While it streams, an answer past its first 8,000 characters goes on as plain text;
    cut by Esc, that plain tail stayed (`**` shown as typed) although opening the run again
    shows the partial answer as Markdown."""
    runtime = await open_runtime(db_path, workspace, chunk_delay=0.001)
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            screen = main_screen(app)
            await pilot.press(*"//stream 400", "enter")

            def answer() -> MessageView | None:
                views = [v for v in screen.query(MessageView) if v.role is Role.ASSISTANT]
                return views[0] if views else None

            await wait_until(pilot, lambda: (view := answer()) is not None and view.query(".plain"))
            await pilot.press("escape")
            await wait_until(pilot, lambda: screen.conversation.query(".partial-label"))
            view = answer()
            assert view is not None and len(view.text) > 8000
            await wait_until(pilot, lambda: not view.query(".plain"))
    finally:
        await runtime.close()


async def test_a_run_interrupted_with_escape_is_retried_with_r_once_out_of_the_composer(
    db_path: Path, workspace: Path
) -> None:
    """The interrupt's notice says "press Esc, then R to retry" (Esc, then R): found by a
    new-user trial, R did nothing on a cancelled run and the footer did not offer it."""
    runtime = await open_runtime(db_path, workspace, model="demo")
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            screen = main_screen(app)
            await pilot.press(*"//stream 400", "enter")
            await wait_until(pilot, lambda: screen.selected_run is not None)
            run = screen.selected_run
            assert run is not None
            await wait_until(pilot, lambda: screen._working_run() is not None)
            await pilot.press("escape")
            await wait_until(
                pilot,
                lambda: screen.selected_run is not None and screen.selected_run.state.is_terminal,
            )
            await pilot.press("escape")  # out of the composer: letters are keys again
            await wait_until(pilot, lambda: not screen.typing())
            assert screen.check_action("retry", ()) is True
            await pilot.press("R")
            await wait_until(
                pilot, lambda: screen.selected_run is not None and screen.selected_run.id != run.id
            )
            retried = screen.selected_run
        assert retried is not None and retried.retry_of_run_id == run.id
    finally:
        await runtime.close()


async def test_a_browser_page_arriving_after_a_new_job_was_chosen_keeps_the_typing_in_the_composer(
    db_path: Path, workspace: Path
) -> None:
    # On a loaded machine (a CI rehearsal) the browser's first page arrived after ctrl+n: it
    # moved the focus to the browser, and the task typed next went there ("/" opened search).
    runtime = await open_runtime(db_path, workspace)
    try:
        await runtime.start("an earlier job")
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            screen = main_screen(app)
            await wait_until(pilot, lambda: screen.job_tree.job_ids)
            screen.action_new_job()
            await wait_until(pilot, lambda: app.focused is screen.composer.input)
            page = await runtime.list_jobs(limit=50)
            screen.post_message(JobsLoaded(page.items, page.next_cursor, first=True))  # late
            await pilot.pause()
            await pilot.press(*"//stream 40")
            await pilot.pause()
            assert app.focused is screen.composer.input
            assert screen.composer.input.text == "//stream 40"
    finally:
        await runtime.close()


async def test_after_a_relaunch_with_jobs_typing_at_once_is_the_task_and_no_browser_action(
    db_path: Path, workspace: Path
) -> None:
    # Tried in tmux: relaunched with a job in the database, the browser took the focus once its
    # first page came, while the screen said "Type a task below"; typing "hello" exported the
    # job into the workspace (`e`) and sent the rest to other single-letter actions.
    await finished_earlier(db_path, workspace, "an earlier job")
    runtime = await open_runtime(db_path, workspace)
    try:
        before = sorted(path.name for path in workspace.iterdir())
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            screen = main_screen(app)
            tree = screen.job_tree
            # The browser's first page is shown, its cursor on the job for Esc or Tab to it.
            await wait_until(pilot, lambda: tree.job_ids and tree.cursor_node is not None)
            assert app.focused is screen.composer.input
            await pilot.press(*"hello, export nothing")
            await pilot.pause()
            assert app.focused is screen.composer.input
            assert screen.composer.input.text == "hello, export nothing"
            assert screen.composer.follow_up_job_id is None  # a new job, as the screen says
            assert not isinstance(app.screen, HelpScreen)
            assert not notifications(app)  # no "Exported to …", no other action
            await pilot.press("enter")
            await wait_until(pilot, lambda: len(tree.job_ids) == 2)
        assert sorted(path.name for path in workspace.iterdir()) == before  # nothing exported
        assert "hello, export nothing" in await user_inputs(runtime)
    finally:
        await runtime.close()


async def test_ctrl_c_interrupts_then_a_second_ctrl_c_quits_saying_what_still_works(
    db_path: Path, workspace: Path
) -> None:
    runtime = await open_runtime(db_path, workspace, model="demo")
    try:
        other = await runtime.start("/stream 4000")  # works in another job, off screen
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            screen = main_screen(app)
            screen.action_new_job()
            await pilot.pause()
            # Long enough to be still running when the screen shows it, however loaded the
            # machine (400 words, ~5 s, had ended before a CI rehearsal's screen caught up).
            await pilot.press(*"//stream 4000", "enter")
            try:
                await wait_until(
                    pilot,
                    lambda: (
                        screen.selected_run is not None
                        and screen.selected_run.state is RunState.RUNNING
                    ),
                )
            except TimeoutError:
                shown = screen.selected_run
                stored = None if shown is None else await runtime.get_run(shown.id)
                raise AssertionError(
                    f"the screen shows {shown and shown.state}, the store has"
                    f" {stored and stored.state}"
                ) from None
            on_screen = screen.selected_run
            assert on_screen is not None
            await pilot.press("ctrl+c")
            await wait_until(
                pilot,
                lambda: screen.selected_run is not None and screen.selected_run.state.is_terminal,
            )
            assert app.is_running
            await pilot.press("ctrl+c", "ctrl+c")  # twice within 2 s: quit
            await wait_until(pilot, lambda: not app.is_running)
        assert (await runtime.get_run(on_screen.id)).state is RunState.CANCELLED
        assert app.quit_note is not None
        assert app.quit_note == (
            "agent-tui: 1 run was still working; stopped now, resumable next time (select it"
            f" and press R, or agent-tui --db {db_path.resolve()} retry {other.id[:8]})."
        )
        assert not (await runtime.get_run(other.id)).state.is_terminal
    finally:
        await runtime.close()


async def test_a_quit_while_several_runs_work_names_the_first_three_as_commands_to_resume_them(
    db_path: Path, workspace: Path
) -> None:
    """It said "agent-tui retry RUN_ID" without saying which (found by a new-user trial): each
    run is named by the prefix of its id the CLI takes, newest first, three at most."""
    from tui._cli.ids import resolve_id

    runtime = await open_runtime(db_path, workspace, model="demo")
    try:
        started = [await runtime.start(f"/stream {4000 + n}") for n in range(5)]
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(pilot, lambda: app.runtime is not None and main_screen(app).is_mounted)
            await pilot.press("ctrl+q")
            await wait_until(pilot, lambda: not app.is_running)
        newest = [run.id[:8] for run in reversed(started)]
        # This database is not the default one: the commands must name it.
        command = f"agent-tui --db {db_path.resolve()}"
        assert app.quit_note == (
            "agent-tui: 5 runs were still working; stopped now, resumable next time (select one"
            " and press R, or use these commands):\n"
            f"  {command} retry {newest[0]}\n"
            f"  {command} retry {newest[1]}\n"
            f"  {command} retry {newest[2]}\n"
            f"  and 2 more: {command} runs --state interrupted"
        )
        for prefix, run in zip(newest, reversed(started), strict=True):
            assert await resolve_id(runtime.store, "run", prefix, db_path=db_path) == run.id
    finally:
        await runtime.close()
    reopened = await open_runtime(db_path, workspace)
    try:
        interrupted = (await reopened.list_runs(state=RunState.QUEUED)).items
        assert {run.id for run in interrupted if run.interrupted} == {run.id for run in started}
    finally:
        await reopened.close()


# --- 4. the queue --------------------------------------------------------------------------------
async def _queued_while_the_first_task_works(pilot: Pilot[object], screen: MainScreen) -> Run:
    """A first task working (its model held by a gate), and "then say thanks" queued for its
    job; the run."""
    first = await first_task_running(pilot, screen)
    await pilot.press(*"then say thanks", "enter")
    await wait_until(pilot, lambda: screen.composer.queued(first.job_id), timeout=60)
    return first


async def test_a_message_typed_while_the_run_works_is_queued_then_sent_as_the_next_run_of_the_job(
    db_path: Path, workspace: Path
) -> None:
    # The first answer is held mid-stream until the message is queued, so the run is working
    # when it is typed however slow the machine is.
    gate = asyncio.Event()
    script = [Turn("working on it " * 20, gate=gate), Turn("you are welcome")]
    runtime = await open_scripted(ScriptedProvider(script), db_path, workspace)
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            screen = main_screen(app)
            first = await _queued_while_the_first_task_works(pilot, screen)
            assert "queued: then say thanks" in screen_text(app)
            assert len(await runtime.job_runs(first.job_id)) == 1
            gate.set()
            await wait_until(
                pilot,
                lambda: screen.selected_run is not None and screen.selected_run.id != first.id,
                timeout=60,
            )
            assert "queued:" not in screen_text(app)
        roots = [r for r in await runtime.job_runs(first.job_id) if r.parent_run_id is None]
        assert [r.input for r in roots] == ["first task", "then say thanks"]
        assert len((await runtime.list_jobs()).items) == 1
    finally:
        await runtime.close()


def _write_held_by(gate: asyncio.Event) -> Turn:
    """A turn that asks to write n.md (an approval) once ``gate`` is set: the run works, and
    the test types meanwhile, however slow the machine."""
    return Turn(
        "I will write it.",
        tool_calls=[("write_file", {"path": "n.md", "content": "x"})],
        gate=gate,
    )


async def test_a_prompt_that_comes_while_a_message_is_typed_waits_for_it_to_be_sent(
    db_path: Path, workspace: Path
) -> None:
    # A trial typed a follow-up while the run worked; the approval docked after "pl" and took
    # the keys: the "a" of "please" allowed the write for the whole run.
    gate = asyncio.Event()
    script = [_write_held_by(gate), Turn("written"), Turn("and thanks")]
    runtime = await open_scripted(ScriptedProvider(script), db_path, workspace)
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            screen = main_screen(app)
            first = await first_task_running(pilot, screen)
            await pilot.press(*"ple")
            gate.set()
            await wait_until(pilot, lambda: screen.prompt_waits)
            # One line says what waits (the prompt itself pushed the box off a short screen).
            assert "? The agent asks: " in screen_text(app)
            assert not screen.query(ApprovalPrompt)
            composer = screen.composer
            await pilot.press(*"ase also say thanks")  # y, a, n, r among them: all text
            assert app.focused is composer.input and composer.display
            assert composer.input.text == "please also say thanks"
            request = await runtime.open_request(first.id)
            assert request is not None and request.state is InputRequestState.PENDING
            assert request.prompt in screen_text(app)

            await pilot.press("enter")  # the message is queued; the prompt takes the keys
            await wait_until(pilot, lambda: isinstance(app.focused, ApprovalPrompt))
            assert not composer.display
            assert composer.queued(first.job_id) == ["please also say thanks"]
            assert "The agent asks" not in screen_text(app)
            # The box is hidden under the prompt; what it queued still shows.
            assert "1 message queued for this job" in screen_text(app)
            assert "please also say thanks" in screen_text(app)
            await pilot.press("y")
            await wait_until(pilot, lambda: (workspace / "n.md").exists(), timeout=60)
            await wait_until(pilot, lambda: "queued for this job" not in screen_text(app))
        answered = await runtime.store.get_input_request(request.id)
        assert answered.answer == {"decision": "allow_once", "reason": None}
    finally:
        await runtime.close()


async def test_keys_typed_right_after_an_answer_go_to_the_message_box_every_one(
    runtime: Runtime, workspace: Path
) -> None:
    # A trial answered "2", Enter, and typed on at once: "hello there" reached the box as
    # "ello there" (the h went into the answer field on its way out).
    app = make_app(runtime, workspace)

    async def answer_of(request_id: str) -> object:
        """The request's answer once the screen's worker has written it."""
        async with asyncio.timeout(30):
            while (stored := await runtime.store.get_input_request(request_id)).answer is None:
                await pilot.pause(0.05)
        return stored.answer

    async with app.run_test(size=SIZE) as pilot:
        screen, request = await asked_in_the_tui(pilot, app)
        send_burst(app, ["2", "enter", *"hello"])
        composer = screen.composer
        # The demo asks its approval next: it waits for the message being typed.
        await wait_until(pilot, lambda: composer.input.text == "hello")
        assert app.focused is composer.input
        assert await answer_of(request.id) == request.options[1]
        # The same after an approval's single key.
        await wait_until(pilot, lambda: screen.prompt_waits)
        await pilot.press("enter")  # "hello" queued; the approval takes the keys
        await wait_until(pilot, lambda: isinstance(app.focused, ApprovalPrompt))
        approval = screen.open_request
        assert approval is not None
        send_burst(app, ["y", *"bye"])
        await wait_until(pilot, lambda: composer.input.text == "bye")
        assert await answer_of(approval.id) == {"decision": "allow_once", "reason": None}


async def test_tab_from_the_message_being_typed_goes_to_the_prompt_that_waits(
    db_path: Path, workspace: Path
) -> None:
    gate = asyncio.Event()
    script = [_write_held_by(gate), Turn("not written")]
    runtime = await open_scripted(ScriptedProvider(script), db_path, workspace)
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=(80, 24)) as pilot:
            screen = main_screen(app)
            first = await first_task_running(pilot, screen)
            await pilot.press(*"half a thought")
            gate.set()
            await wait_until(pilot, lambda: screen.prompt_waits)
            await pilot.pause()
            # On a short terminal too, the message being typed stays on screen (a trial saw the
            # docked prompt push the box off the bottom at 80x24).
            box = screen.composer.input.region
            assert box.height >= 1 and box.bottom <= app.size.height - 2
            # The footer says what Tab does here, as the line above the box does (it said
            # "tab Pane").
            shown = {(k.key, k.description) for k in screen.query_one(KeyFooter).query(FooterKey)}
            assert ("tab", "Answer") in shown and ("tab", "Pane") not in shown
            await pilot.press("tab")
            await wait_until(pilot, lambda: isinstance(app.focused, ApprovalPrompt))
            assert not screen.composer.display
            # Hidden under the prompt, the message typed is kept, and the screen says so.
            assert "Your unsent message comes back once you answer: half a thought" in (
                screen_text(app)
            )
            await pilot.press("n")
            await wait_until(
                pilot, lambda: screen.composer.display and app.focused is screen.composer.input
            )
            # What was typed is still there, to finish and send.
            assert screen.composer.input.text == "half a thought"
        run = await runtime.get_run(first.id)
        assert run.state is not RunState.INPUT_REQUIRED
        assert not (workspace / "n.md").exists()
    finally:
        await runtime.close()


async def test_a_run_cancelled_while_a_message_waits_in_its_queue_sends_nothing_and_gives_it_back(
    db_path: Path, workspace: Path
) -> None:
    """Found by a new-user trial: cancelling the run (Esc, c, y) started the queued message as
    a run of its own at once. Cancelling stops the work: the message comes back to the box;
    for a job the box does not address, it is kept as that job's draft."""
    gate = asyncio.Event()
    script = [Turn("working on it " * 20, gate=gate), Turn("never asked for")]
    runtime = await open_scripted(ScriptedProvider(script), db_path, workspace)
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            screen = main_screen(app)
            first = await _queued_while_the_first_task_works(pilot, screen)
            await pilot.press(*"half typed")
            await runtime.cancel(first.id, reason="changed my mind")  # as `agent-tui cancel`
            await wait_until(pilot, lambda: not screen.composer.queued(first.job_id))
            await wait_until(
                pilot, lambda: screen.composer.input.text == "then say thanks\n\nhalf typed"
            )
            assert any("back in the box, unsent" in text for text in notifications(app))
        assert [r.input for r in await runtime.job_runs(first.job_id)] == ["first task"]
    finally:
        gate.set()
        await runtime.close()


async def test_a_cancelled_runs_queued_message_is_kept_as_its_jobs_draft_when_the_box_is_elsewhere(
    db_path: Path, workspace: Path
) -> None:
    gate = asyncio.Event()
    script = [Turn("working on it " * 20, gate=gate), Turn("never asked for")]
    runtime = await open_scripted(ScriptedProvider(script), db_path, workspace)
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            screen = main_screen(app)
            first = await _queued_while_the_first_task_works(pilot, screen)
            await pilot.press("ctrl+t")  # the box now addresses a new job
            await wait_until(pilot, lambda: screen.composer.follow_up_job_id is None)
            await runtime.cancel(first.id, reason="changed my mind")
            await wait_until(pilot, lambda: not screen.composer.queued(first.job_id))
            await wait_until(pilot, lambda: any("job's draft" in t for t in notifications(app)))
            assert screen.composer.input.text == ""
        assert await composer_text(runtime.store, first.job_id) == "then say thanks"
        assert [r.input for r in await runtime.job_runs(first.job_id)] == ["first task"]
    finally:
        gate.set()
        await runtime.close()


async def test_up_on_an_empty_box_takes_a_queued_message_back_for_editing(
    db_path: Path, workspace: Path
) -> None:
    runtime = await open_runtime(db_path, workspace, model="demo")
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            screen = main_screen(app)
            await pilot.press(*"//stream 400", "enter")
            await wait_until(
                pilot,
                lambda: (
                    screen.selected_run is not None
                    and screen.selected_run.state is RunState.RUNNING
                ),
            )
            job_id = screen.selected_run.job_id  # type: ignore[union-attr]
            await pilot.press(*"a typo", "enter")
            await wait_until(pilot, lambda: screen.composer.queued(job_id))
            await pilot.press("up")
            assert screen.composer.input.text == "a typo"
            assert screen.composer.queued(job_id) == []
            await pilot.press("escape")  # interrupts: nothing queued is sent
            await wait_until(
                pilot,
                lambda: screen.selected_run is not None and screen.selected_run.state.is_terminal,
            )
            assert screen.composer.input.text == "a typo"
        assert len(await runtime.job_runs(job_id)) == 1
    finally:
        await runtime.close()


# --- 5. slash commands ---------------------------------------------------------------------------
async def test_slash_help_opens_help_and_creates_no_job(runtime: Runtime, workspace: Path) -> None:
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press(*"/help", "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen))

        # Found by a new-user trial: the main screen's footer showed through with its keys
        # (esc Interrupt, n New job); the help's own footer shows what works there.
        def shown_keys() -> list[str]:
            return [key.key for key in app.screen.query(FooterKey)]

        await wait_until(pilot, lambda: "escape" in shown_keys())
        assert "n" not in shown_keys() and len(app.screen.query(KeyFooter)) == 1
    assert (await runtime.list_jobs()).items == []


async def test_an_unknown_command_says_so_under_the_box_with_how_to_send_it_as_a_message(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial: ``/stream 200`` (words for the demo model) got only a toast
    at the top right, far from the box the person was looking at."""
    app = make_app(runtime, workspace)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        screen = main_screen(app)
        composer = screen.composer
        await pilot.press(*"/stream 200", "enter")
        said = "/stream is not a command. To send it as a message: //stream 200 · /help lists"
        await wait_until(pilot, lambda: notifications(app) or said in screen_text(app))
        assert not notifications(app)
        assert composer.error == said + " commands"
        assert composer.input.text == "/stream 200"  # kept, to fix
        assert app.focused is composer.input
        # Under the line typed, inside the composer, all of it on screen.
        error = composer.query_one("#error")
        assert error.region.y > composer.input.region.y
        assert composer.region.contains_region(error.region)
        # Fixed as it says: the line goes with the first key, and // sends it as a message.
        await pilot.press("home", "slash")
        assert composer.error == ""
        await pilot.press("enter")
        await wait_until(pilot, lambda: screen.selected_run is not None)
    assert await user_inputs(runtime) == ["/stream 200"]


async def test_a_command_that_takes_no_argument_refuses_one_and_does_nothing(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial: ``/export notes.md`` wrote an export under another name,
    ``/quit now`` quit, ``/retry --rerun`` retried as if bare: the words were dropped unsaid."""
    run = await runtime.start("summarise")
    await finish_run(runtime, run.id)
    exports = workspace / ".agent-tui" / "exports"
    app = make_app(runtime, workspace)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        screen = main_screen(app)
        composer = screen.composer
        await _open_first_job(pilot, app, run.job_id)
        screen.composer.focus_input()
        await pilot.press(*"/export notes.md", "enter")
        said = "/export takes no argument (notes.md): /export alone does it — write this job"
        await wait_until(pilot, lambda: composer.error.startswith(said))
        assert composer.input.text == "/export notes.md"  # kept, to fix
        assert not exports.exists() and not notifications(app)
        await pilot.press("ctrl+u", *"/quit now", "enter")
        await wait_until(pilot, lambda: composer.error.startswith("/quit takes no argument"))
        assert app.is_running and composer.input.text == "/quit now"
        # Fixed as it says: the bare command does it.
        await pilot.press("ctrl+u", *"/export", "enter")
        await wait_until(pilot, lambda: exports.exists() and any(exports.glob("*.md")))
        assert composer.error == ""


async def test_a_message_that_starts_with_a_path_is_sent_as_a_message(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial: pasted text starting with a path ("/etc/hosts is odd…") was
    refused as an unknown command /etc/hosts (no command's name has a slash in it)."""
    pasted = "/etc/hosts is odd\nwhy does it list localhost twice?"
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        screen.composer.focus_input()
        app.post_message(events.Paste(pasted))
        await wait_until(pilot, lambda: screen.composer.input.text == pasted)
        await pilot.press("enter")
        await wait_until(pilot, lambda: screen.selected_run is not None)
        assert not any("Unknown command" in n for n in notifications(app))
    assert await user_inputs(runtime) == [pasted]


async def test_the_slash_menu_completes_a_command_with_tab(
    runtime: Runtime, workspace: Path
) -> None:
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await pilot.press(*"/mo")
        await pilot.pause()
        assert screen.composer.completing == "slash"
        assert "/model" in screen_text(app) or screen.composer.query_one("#completions").has_class(
            "-completing"
        )
        await pilot.press("tab")
        assert screen.composer.input.text == "/model "


async def test_a_completed_command_closes_the_menu_for_its_arguments(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial: Tab on ``/mo``, Enter on ``/agent`` or a space typed after
    ``/model`` left the menu open on "no command starts with /model", a command it had just
    offered."""
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        screen.composer.focus_input()
        menu = screen.composer.query_one("#completions", OptionList)
        for keys, completed in (
            (["/", "m", "o", "tab"], "/model "),
            ([*"/agent", "enter"], "/agent "),
            ([*"/model", "space"], "/model "),
        ):
            screen.composer.input.value = ""
            await pilot.press(*keys)
            await pilot.pause()
            assert screen.composer.input.text == completed
            assert screen.composer.completing is None
            assert not menu.has_class("-completing")
            assert "no command starts with" not in screen_text(app)


async def test_slash_model_refuses_a_model_no_run_could_use_at_once_and_keeps_the_text(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial: "/model gpt-nonsense" was taken ("the next run … uses model
    gpt-nonsense"), and only the message sent next was refused."""
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        screen = main_screen(app)
        screen.composer.focus_input()
        await pilot.press(*"/model gpt-nonsense", "enter")
        await wait_until(pilot, lambda: any(n.title == "/model" for n in app._notifications))
        [said] = [n for n in app._notifications if n.title == "/model"]
        assert said.severity == "error" and "gpt-nonsense" in said.message
        assert screen.composer.input.text == "/model gpt-nonsense"  # kept, to be corrected
        assert "model" not in screen.composer.next_run.get(None, {})


async def test_slash_model_changes_the_next_run_of_this_job_and_the_status_line_shows_it(
    runtime: Runtime, workspace: Path
) -> None:
    run = await runtime.start("summarise")
    await finish_run(runtime, run.id)
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await _open_first_job(pilot, app, run.job_id)
        await pilot.press("ctrl+t", *"/model demo", "enter")
        await wait_until(pilot, lambda: "next run: model demo" in screen.status.text)
        assert (await runtime.list_jobs()).items[0].id == run.job_id
        await pilot.press(*"and now?", "enter")
        await wait_until(
            pilot, lambda: screen.selected_run is not None and screen.selected_run.id != run.id
        )
        follow_up = screen.selected_run
        assert follow_up is not None
    stored = await runtime.get_run(follow_up.id)
    assert stored.job_id == run.job_id and stored.model == "demo"
    assert len((await runtime.list_jobs()).items) == 1


async def test_slash_new_and_n_start_a_new_job_only_when_asked(
    runtime: Runtime, workspace: Path
) -> None:
    run = await runtime.start("summarise")
    await finish_run(runtime, run.id)
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await _open_first_job(pilot, app, run.job_id)
        await pilot.press("ctrl+t", *"/new a separate task", "enter")
        await wait_until(pilot, lambda: len(screen.job_tree.job_ids) == 2)
        jobs = (await runtime.list_jobs()).items
        [new_job] = [job for job in jobs if job.id != run.job_id]
        await wait_until(
            pilot,
            lambda: (
                screen.selected_run is not None
                and screen.selected_run.job_id == new_job.id
                and screen.conversation.run_id == screen.selected_run.id
                and screen.open_request is not None  # the demo model asks its question
            ),
        )
        await pilot.pause()
        # The new job is the one on screen and the composer follows it up (a trial: the empty
        # new-job screen came in after the run, and the composer went back to "New job").
        assert screen.composer.follow_up_job_id == new_job.id
        assert not screen.conversation.query(".empty")
    assert len(jobs) == 2
    assert sorted(await user_inputs(runtime)) == ["a separate task", "summarise"]


async def test_slash_new_takes_a_task_that_starts_with_an_escaped_slash(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial: `/new /stream 20` sent "/stream 20" but `/new //stream 20`
    sent both slashes; ``//`` escapes a slash after /new as it does in the box."""
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        main_screen(app)
        await pilot.press(*"/new //look at notes.md", "enter")
        async with asyncio.timeout(30):
            while not (await runtime.list_jobs()).items:
                await pilot.pause(0.05)
    assert await user_inputs(runtime) == ["/look at notes.md"]


# --- 6. @-mentions -------------------------------------------------------------------------------
async def test_at_opens_a_fuzzy_file_picker_and_the_file_is_attached_as_a_chip(
    runtime: Runtime, workspace: Path
) -> None:
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)  # noqa: ASYNC221
    (workspace / ".gitignore").write_text("secret.txt\n")
    (workspace / "secret.txt").write_text("nope\n")
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await pilot.press(*"look at @")
        await wait_until(pilot, lambda: screen._files is not None)
        assert "secret.txt" not in (screen._files or [])
        await pilot.press(*"smai")
        menu = screen.composer.query_one("#completions", OptionList)

        def offered() -> list[str]:
            options = [menu.get_option_at_index(i) for i in range(menu.option_count)]
            return [str(option.id) for option in options if option.id is not None]

        await wait_until(pilot, lambda: offered()[:1] == ["src/main.py"])
        assert "@src/main.py" in str(menu.get_option_at_index(0).prompt)
        await pilot.press("tab")
        assert screen.composer.input.text == "look at @src/main.py "
        await pilot.press(*"please", "enter")
        await wait_until(pilot, lambda: screen.selected_run is not None)
        await wait_until(pilot, lambda: "📎" in screen_text(app) or bool(screen.query(MessageView)))
    [sent] = await user_inputs(runtime)
    assert sent.startswith("look at @src/main.py please")
    assert "📎 Attached: `src/main.py`" in sent


# --- 7. launch flags -----------------------------------------------------------------------------
async def test_resume_opens_the_given_job_and_continue_the_latest_one(
    runtime: Runtime, workspace: Path
) -> None:
    older = await runtime.start("an older task")
    await finish_run(runtime, older.id)
    newer = await runtime.start("the newest task")
    await finish_run(runtime, newer.id)
    for overrides, expected in (
        ({"open_job": older.job_id}, older),
        ({"continue_last": True}, newer),
    ):
        app = make_app(runtime, workspace, **overrides)
        async with app.run_test(size=SIZE) as pilot:
            screen = main_screen(app)
            await wait_until(
                pilot,
                lambda shown=screen: shown.selected_run is not None and shown.conversation.run_id,
            )
            assert screen.selected_run is not None
            assert screen.selected_run.id == expected.id
            assert screen.composer.follow_up_job_id == expected.job_id


async def test_agent_flag_is_the_agent_of_new_jobs(db_path: Path, workspace: Path) -> None:
    from runtime.config import AgentConfig

    runtime = await Runtime.open(
        db_path=db_path,
        workspace=workspace,
        config=Config(agents={"reviewer": AgentConfig(description="reviews")}),
        model="demo:instant",
    )
    try:
        app = make_app(runtime, workspace, agent="reviewer")
        async with app.run_test(size=SIZE) as pilot:
            screen = main_screen(app)
            await pilot.press(*"review this", "enter")
            await wait_until(pilot, lambda: screen.selected_run is not None)
            assert screen.selected_run is not None
        assert (await runtime.get_run(screen.selected_run.id)).agent == "reviewer"
    finally:
        await runtime.close()


def test_help_lists_the_line_deletions_and_the_search_keys() -> None:
    """A review found keys the README gives missing from the help: the composer's ctrl+u and
    ctrl+k, and how the search field leads into its hits and back."""
    sections = dict(help_sections())
    composer = dict(sections["Composer"])
    assert "start / end of the typed line" in composer["ctrl+u / ctrl+k"]
    search = dict(sections["Search (/)"])
    assert "hits" in search["↓ in the field"] and "into the hits" in search["enter in the field"]
    assert "Open the run" in search["enter on a hit"]
    assert "field" in search["↑ on the first hit"] and "esc" in search


def test_the_help_names_every_key_of_a_form_once_in_words() -> None:
    """Found by a README audit: the help's Form section listed tab twice and shift+tab as
    "previous_field", the action's name, instead of what it does."""
    form = help_sections_rows("Form")
    keys = [key for key, _ in form]
    assert len(keys) == len(set(keys)), keys
    described = dict(form)
    assert described["shift+tab"] == "Previous field"
    assert described["tab"] == "Next field"
    assert all("_" not in what for _, what in form), form


def help_sections_rows(title: str) -> list[tuple[str, str]]:
    return dict(help_sections())[title]


async def _help_lines(pilot: Pilot[object], app: AgentTuiApp) -> list[str]:
    """F1, then every line of the help's key tables as the screen lays them out (all of them,
    those scrolled out of view too)."""
    from rich.console import Console
    from rich.segment import Segment
    from rich.text import Text

    await pilot.press("f1")
    await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen))
    await pilot.pause()
    lines: list[str] = []
    for rows in app.screen.query(".help-rows").results(Static):
        console = Console(width=rows.content_region.width, color_system=None)
        content = rows.content
        shown = Text(content) if isinstance(content, str) else content
        for line in console.render_lines(shown, pad=False):
            lines.append("".join(segment.text for segment in Segment.filter_control(line)))
    return lines


async def test_help_descriptions_wrap_within_their_column_at_80_columns(
    runtime: Runtime, workspace: Path
) -> None:
    """A long description wrapped back to column 0, under the keys ('run; twice within 2 s:
    quit' at the left edge; found by a new-user trial): every line stays indented."""
    app = make_app(runtime, workspace)
    async with app.run_test(size=(80, 24)) as pilot:
        lines = await _help_lines(pilot, app)
        assert any("twice within 2 s" in line for line in lines)
        assert len(lines) > 40
        assert [line for line in lines if line.strip() and not line.startswith("  ")] == []


async def test_the_help_says_what_each_command_does(runtime: Runtime, workspace: Path) -> None:
    """Found by a new-user trial: the help named the commands in one row ("/help /new /model
    …") and said what none of them does; the workspace's own commands had their descriptions."""
    from tui.screens.help import KEY_WIDTH
    from tui.widgets.composer import SLASH_COMMANDS

    app = make_app(runtime, workspace)
    async with app.run_test(size=(80, 24)) as pilot:
        lines = await _help_lines(pilot, app)
    for command in SLASH_COMMANDS:
        [row] = [line for line in lines if line.split()[:1] == [f"/{command.name}"]]
        # Beside the command, in the description's column: its first words.
        assert row[KEY_WIDTH:].lower().split()[:2] == command.help.lower().split()[:2]


@pytest.mark.parametrize("size", [SIZE, (80, 24)], ids=["usual", "80x24"])
async def test_every_key_in_the_help_shows_whole_in_its_column(
    runtime: Runtime, workspace: Path, size: tuple[int, int]
) -> None:
    """A new-user trial read "↑ ↓ / pgup pgdn / hom…" in the Report section: the key column
    cut a key longer than itself. Every row of every section shows its keys whole, in order."""
    from rich.cells import set_cell_size

    from tui.screens.help import KEY_WIDTH

    app = make_app(runtime, workspace)
    async with app.run_test(size=size) as pilot:
        lines = await _help_lines(pilot, app)
    # A row's first line holds its keys; the lines its description wraps onto leave them blank.
    shown = [set_cell_size(line, KEY_WIDTH).rstrip() for line in lines]
    expected = ["  " + key for _, rows in help_sections() for key, _ in rows]
    assert [cell for cell in shown if cell.strip()] == expected


async def test_a_queued_message_outlives_a_crash_and_comes_back_in_the_box(
    db_path: Path, workspace: Path
) -> None:
    """Found by a new-user trial: a follow-up queued while the run worked was gone after a
    quit or a crash (not in the box, not in the history). It is kept in the store as it is
    queued; after a restart it comes back in the box, to send or edit (not sent by itself)."""
    gate = asyncio.Event()  # never set: the run works until the process goes
    runtime = await open_scripted(
        ScriptedProvider([Turn("working on it " * 20, gate=gate)]), db_path, workspace
    )
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            screen = main_screen(app)
            job_id = (await first_task_running(pilot, screen)).job_id
            await pilot.press(*"then the tests", "enter")
            await wait_until(pilot, lambda: screen.composer.queued(job_id))
            stored: list[list[str]] = [[]]
            async with asyncio.timeout(30):
                while stored[-1] != ["then the tests"]:
                    stored.append(await queued_messages(runtime.store, job_id))
                    await pilot.pause(0.02)
    finally:
        await runtime.close()  # the process goes: its run is left interrupted

    runtime = await open_runtime(db_path, workspace)
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            screen = main_screen(app)
            await wait_for_browser(pilot, app)
            await pilot.press("enter")
            await wait_until(pilot, lambda: screen.composer.input.text == "then the tests")
            assert any("queued are back in the box" in text for text in notifications(app))
            assert screen.composer.queued(job_id) == []
            await pilot.pause()
        assert await queued_messages(runtime.store, job_id) == []
        assert await composer_text(runtime.store, job_id) == "then the tests"
        assert len(await runtime.job_runs(job_id)) == 1  # nothing was sent by itself
    finally:
        await runtime.close()


async def test_slash_agent_takes_an_agent_added_to_the_config_after_the_app_started(
    db_path: Path, workspace: Path
) -> None:
    """Found by a new-user trial, then in review: ``/agent reviewer`` said "unknown agent" for
    an agent added to agent-tui.toml after the TUI started."""
    from runtime.config import load_config

    config_file = workspace / "agent-tui.toml"
    config_file.write_text("[defaults]\nmax_steps = 20\n")
    runtime = await Runtime.open(
        db_path=db_path, workspace=workspace, config=load_config(workspace), model="demo:instant"
    )
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            screen = main_screen(app)
            screen.composer.focus_input()
            config_file.write_text(
                '[defaults]\nmax_steps = 20\n\n[agents.reviewer]\ninstructions = "Review."\n'
            )
            await pilot.press(*"/agent reviewer", "enter")
            await wait_until(pilot, lambda: "reviewer" in screen.status.text)
            assert not any("unknown agent" in n for n in notifications(app))
    finally:
        await runtime.close()


async def test_slash_agent_refuses_an_unknown_agent_naming_the_configured_ones(
    runtime: Runtime, workspace: Path
) -> None:
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        screen.composer.focus_input()
        await pilot.press(*"/agent nosuch", "enter")
        await wait_until(pilot, lambda: any("unknown agent" in n for n in notifications(app)))
        assert any(
            "unknown agent 'nosuch'; configured agents: default" in n for n in notifications(app)
        )
        assert screen.composer.input.text == "/agent nosuch"  # kept, to fix


async def test_ctrl_t_carrying_a_follow_up_to_a_new_job_keeps_the_new_jobs_own_draft_under_it(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a helper fixing the new-job draft: a follow-up typed in a job and carried to a
    new job by ctrl+t was saved over the new job's own draft, gone even after a relaunch."""
    run = await runtime.start("summarise")
    await finish_run(runtime, run.id)
    await runtime.store.save_composer_draft(
        None, "the new job I was writing", writer=runtime.owner_id
    )
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        composer = screen.composer
        # Put back in the new job's box at launch; the browser, then the job, from there.
        await wait_until(pilot, lambda: composer.input.text == "the new job I was writing")
        screen.job_tree.focus()
        await _open_first_job(pilot, app, run.job_id)
        await pilot.press("ctrl+t", *"better as a job of its own")
        assert composer.follow_up_job_id == run.job_id
        await pilot.press("ctrl+t")
        merged = "better as a job of its own\n\nthe new job I was writing"
        await wait_until(pilot, lambda: composer.input.text == merged)
        assert composer.follow_up_job_id is None
        assert composer.input.cursor_location == (0, len("better as a job of its own"))
        await wait_until(pilot, lambda: any("kept under" in n for n in notifications(app)))
        await pilot.press("ctrl+q")
    assert await composer_text(runtime.store, None) == merged
    assert await composer_text(runtime.store, run.job_id) == ""


class DraftReadGate(SqliteStore):
    """A real SQLite store whose next read of composer drafts, once armed (``hold``), waits on
    ``gate`` (``reached`` says it is waiting), or fails (``fail``)."""

    def __init__(self, db_path: Path) -> None:
        super().__init__(db_path)
        self.hold = False
        self.fail = False
        self.reached = asyncio.Event()
        self.gate = asyncio.Event()

    async def get_composer_drafts(self, job_id: str | None) -> list[WrittenDraft]:
        if self.fail:
            self.fail = False
            raise RuntimeError("the store is busy")
        if self.hold:
            self.hold = False
            self.reached.set()
            await self.gate.wait()
        return await super().get_composer_drafts(job_id)


async def gated_drafts_runtime(db_path: Path, workspace: Path) -> tuple[Runtime, DraftReadGate]:
    store = DraftReadGate(db_path)
    runtime = await Runtime.open(
        db_path=db_path, workspace=workspace, config=Config(), model="demo:instant", store=store
    )
    return runtime, store


async def _carry_setup(
    pilot: Pilot[object], app: AgentTuiApp, runtime: Runtime, job_id: str
) -> None:
    """The new job's draft back in the box at launch; then the job opened, ctrl+t to a
    follow-up there, and ``FOLLOWUP TEXT B`` typed."""
    composer = main_screen(app).composer
    await wait_until(pilot, lambda: composer.input.text == "NEWJOB DRAFT A")
    main_screen(app).job_tree.focus()
    await _open_first_job(pilot, app, job_id)
    await pilot.press("ctrl+t", *"FOLLOWUP TEXT B")
    assert composer.follow_up_job_id == job_id


async def test_ctrl_t_back_from_a_new_job_carries_only_what_was_carried_and_leaves_its_draft(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a trial: a follow-up carried by ctrl+t to a new job with a draft of its own,
    then ctrl+t again: the new job's draft went into the follow-up with it (Enter would have
    sent it there)."""
    run = await runtime.start("summarise")
    await finish_run(runtime, run.id)
    await runtime.store.save_composer_draft(None, "NEWJOB DRAFT A", writer=runtime.owner_id)
    app = make_app(runtime, workspace)
    merged = "FOLLOWUP TEXT B\n\nNEWJOB DRAFT A"
    async with app.run_test(size=SIZE) as pilot:
        composer = main_screen(app).composer
        await _carry_setup(pilot, app, runtime, run.job_id)
        await pilot.press("ctrl+t")
        await wait_until(pilot, lambda: composer.input.text == merged)
        assert composer.follow_up_job_id is None
        await pilot.press("ctrl+t")
        await wait_until(pilot, lambda: composer.follow_up_job_id == run.job_id)
        await wait_until(pilot, lambda: composer.input.text == "FOLLOWUP TEXT B")
        assert await composer_text(runtime.store, None) == "NEWJOB DRAFT A"
        # Typed since goes along; the new job's draft comes under it again.
        await pilot.press(*" more")
        await pilot.press("ctrl+t")
        await wait_until(
            pilot, lambda: composer.input.text == "FOLLOWUP TEXT B more\n\nNEWJOB DRAFT A"
        )
        await pilot.press("ctrl+q")
    assert await composer_text(runtime.store, None) == "FOLLOWUP TEXT B more\n\nNEWJOB DRAFT A"
    assert await composer_text(runtime.store, run.job_id) == ""


async def test_a_second_ctrl_t_before_the_drafts_read_leaves_the_first_targets_draft_saved(
    db_path: Path, workspace: Path
) -> None:
    """Found by review: ctrl+t carrying text, then ctrl+t again before the target's saved
    draft was read, deleted that draft (never merged, never shown)."""
    runtime, store = await gated_drafts_runtime(db_path, workspace)
    try:
        run = await runtime.start("summarise")
        await finish_run(runtime, run.id)
        await store.save_composer_draft(None, "NEWJOB DRAFT A", writer=runtime.owner_id)
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            composer = main_screen(app).composer
            await _carry_setup(pilot, app, runtime, run.job_id)
            store.hold = True
            await pilot.press("ctrl+t")
            await wait_until(pilot, store.reached.is_set)
            await pilot.press("ctrl+t")  # back, the new job's draft still being read
            await wait_until(pilot, lambda: composer.follow_up_job_id == run.job_id)
            await wait_until(pilot, lambda: composer.input.text == "FOLLOWUP TEXT B")
            store.gate.set()
            await pilot.press("ctrl+q")
        assert await composer_text(store, None) == "NEWJOB DRAFT A"
        assert await composer_text(store, run.job_id) == "FOLLOWUP TEXT B"
    finally:
        store.gate.set()
        await runtime.close()


async def test_quitting_while_the_carried_to_targets_draft_is_read_keeps_both(
    db_path: Path, workspace: Path
) -> None:
    """Found by review: quitting before the draft of the target text was carried to was read
    saved the box's text over that draft."""
    runtime, store = await gated_drafts_runtime(db_path, workspace)
    try:
        run = await runtime.start("summarise")
        await finish_run(runtime, run.id)
        await store.save_composer_draft(None, "NEWJOB DRAFT A", writer=runtime.owner_id)
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            await _carry_setup(pilot, app, runtime, run.job_id)
            store.hold = True
            await pilot.press("ctrl+t")
            await wait_until(pilot, store.reached.is_set)
            await pilot.press("ctrl+q")
        store.gate.set()
        assert await composer_text(store, None) == "FOLLOWUP TEXT B\n\nNEWJOB DRAFT A"
        assert await composer_text(store, run.job_id) == ""
    finally:
        store.gate.set()
        await runtime.close()


async def test_a_failed_read_of_the_carried_to_targets_draft_lets_saves_go_on_keeping_it(
    db_path: Path, workspace: Path
) -> None:
    """Found by review: the read of the target's draft failing (the store busy) held the
    box's saves back for good: what was carried, and typed after, was saved nowhere."""
    runtime, store = await gated_drafts_runtime(db_path, workspace)
    try:
        run = await runtime.start("summarise")
        await finish_run(runtime, run.id)
        await store.save_composer_draft(None, "NEWJOB DRAFT A", writer=runtime.owner_id)
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            composer = main_screen(app).composer
            await _carry_setup(pilot, app, runtime, run.job_id)
            store.fail = True
            await pilot.press("ctrl+t")
            await wait_until(pilot, lambda: composer.follow_up_job_id is None)
            await pilot.press(*" later")
            merged = "FOLLOWUP TEXT B later\n\nNEWJOB DRAFT A"
            await wait_until(pilot, lambda: composer.input.text == merged)
            assert not store.fail  # the read did fail
        assert await composer_text(store, None) == merged
        assert await composer_text(store, run.job_id) == ""
    finally:
        await runtime.close()


async def test_up_in_a_wrapped_line_moves_up_a_row_and_recalls_an_earlier_prompt_from_the_first(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial: one line wrapped over three rows, cursor at its end, ↑ put
    the earlier prompt in the box in place of the text (↓ brought it back)."""
    first = await runtime.start("an older prompt")
    await finish_run(runtime, first.id)
    app = make_app(runtime, workspace)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        composer = screen.composer
        box = composer.input
        composer.focus_input()
        await wait_until(pilot, lambda: composer.history)
        line = " ".join(["a long first line of a task"] * 7)[:190]
        box.insert(line)
        await wait_until(pilot, lambda: box.wrapped_document.height == 3)

        def row() -> int:
            return box.wrapped_document.location_to_offset(box.cursor_location).y

        assert row() == 2
        await pilot.press("up")
        assert box.text == line and row() == 1
        await pilot.press("up")
        assert box.text == line and row() == 0
        await pilot.press("up")  # from the first row on screen: the history
        assert box.text == "an older prompt"
        await pilot.press("down")
        assert box.text == line
        # ↓ on a row above the last one moves down a row.
        box.move_cursor((0, 0))
        await pilot.press("down")
        assert box.text == line and row() == 1


async def test_slash_retry_on_a_completed_run_says_what_to_do_in_the_app_and_starts_nothing(
    db_path: Path, workspace: Path
) -> None:
    """Found by a trial: /retry on a completed run read "run state conflict: run 3fa2… completed;
    use follow-up to continue its job", the command line's words (a hex id, a CLI command)."""
    run_id = await finished_earlier(db_path, workspace, "summarise this folder")
    runtime = await open_runtime(db_path, workspace)
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            screen = main_screen(app)
            await wait_for_browser(pilot, app)
            await pilot.press("enter")
            await wait_until(
                pilot,
                lambda: screen.selected_run is not None and screen.selected_run.id == run_id,
            )
            screen.composer.focus_input()
            await pilot.press(*"/retry", "enter")
            await wait_until(pilot, lambda: any("/retry" in n for n in notifications(app)))
            [notice] = [n for n in notifications(app) if "/retry" in n]
            assert "completed" in notice and "f or /fork" in notice
            assert "conflict" not in notice and "use follow-up" not in notice
            assert run_id not in notice
        job_id = (await runtime.get_run(run_id)).job_id
        assert [r.id for r in await runtime.job_runs(job_id)] == [run_id]
    finally:
        await runtime.close()


async def test_a_bare_slash_model_offers_the_models_to_choose_from(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a trial: a bare /model only printed its usage (Claude Code offers a list)."""
    from textual.command import CommandPalette
    from textual.widgets import OptionList

    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        screen.composer.focus_input()
        await pilot.press(*"/model", "enter")  # the menu completes it: "/model "
        await wait_until(pilot, lambda: screen.composer.input.text == "/model ")
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, CommandPalette))
        listed = app.screen.query_one(OptionList)
        await wait_until(pilot, lambda: listed.option_count >= 2)
        shown = [str(listed.get_option_at_index(i).prompt) for i in range(listed.option_count)]
        # The model in effect first, said so; the offline demo always offered.
        assert shown[0].startswith(runtime.default_model) and "in effect" in shown[0]
        assert any(line.startswith("demo:instant") for line in shown)
        await pilot.press(*"instant")
        await wait_until(
            pilot,
            lambda: (
                listed.option_count == 1
                and str(listed.get_option_at_index(0).prompt).startswith("demo:instant")
            ),
        )
        await pilot.press("enter")
        await wait_until(pilot, lambda: screen.status.next_run == {"model": "demo:instant"})
        assert screen.composer.next_run.get(None) == {"model": "demo:instant"}
        assert screen.composer.input.text == ""


async def test_a_bare_slash_theme_lists_the_theme_in_use_first_and_says_so(
    runtime: Runtime, workspace: Path
) -> None:
    from textual.command import CommandPalette
    from textual.widgets import OptionList

    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        screen.composer.focus_input()
        in_use = app.theme
        await pilot.press(*"/theme", "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, CommandPalette))
        listed = app.screen.query_one(OptionList)
        await wait_until(pilot, lambda: listed.option_count == len(app.available_themes))
        first = str(listed.get_option_at_index(0).prompt)
        assert first.startswith(in_use) and "in use" in first
        await pilot.press(*"textual-light", "enter")
        await wait_until(pilot, lambda: app.theme == "textual-light")
