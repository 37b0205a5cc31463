"""Issue 16 in the TUI, by Pilot on a real Runtime, SQLite file and the instant demo model: skills
and custom commands as slash commands and in the palette, phase moves and compactions in the
transcript, ``/context`` and ``/compact``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widget import Widget
from textual.widgets import OptionList, Static

from runtime.api import Runtime
from runtime.commands import BUILTIN_COMMAND_NAMES
from runtime.config import Config, Defaults
from runtime.kinds import Role
from runtime.models import RunState
from runtime.skills import discover_skills, skill_text
from tests.fakes.scripted import ScriptedProvider, Turn, open_scripted
from tests.tui.helpers import (
    SIZE,
    finish_run,
    main_screen,
    make_app,
    notifications,
    open_runtime,
    screen_text,
    wait_for_browser,
    wait_until,
)
from tui.app import AgentTuiApp
from tui.formatting import format_tokens
from tui.screens.help import HelpScreen
from tui.screens.report import ReportBody, ReportScreen
from tui.widgets.composer import SLASH_COMMANDS, ComposerInput
from tui.widgets.key_footer import FooterKey
from tui.widgets.message_view import MessageView
from tui.widgets.status_line import StatusLine


@pytest.fixture(autouse=True)
def user_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    (home / ".config").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    return home


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


async def root_inputs(runtime: Runtime) -> list[str]:
    inputs: list[str] = []
    for job in (await runtime.list_jobs()).items:
        for run in await runtime.job_runs(job.id):
            if run.parent_run_id is None and run.input is not None:
                inputs.append(run.input)
    return inputs


async def test_custom_commands_and_skills_complete_after_slash_and_expand_into_the_message(
    runtime: Runtime, workspace: Path
) -> None:
    write(
        workspace / ".claude" / "commands" / "review.md",
        "---\ndescription: Review a file\nargument-hint: FILE\n---\nReview $ARGUMENTS carefully.",
    )
    write(
        workspace / ".agent-tui" / "skills" / "explain" / "SKILL.md",
        "---\ndescription: Explain code to a newcomer\n---\nEXPLAIN-BODY: use small words.",
    )
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await pilot.press(*"/rev")
        menu = screen.composer.query_one("#completions", OptionList)

        def offered() -> list[str]:
            return [str(menu.get_option_at_index(i).prompt) for i in range(menu.option_count)]

        await wait_until(pilot, lambda: any("Review a file" in o for o in offered()))
        assert offered() == ["/review FILE  Review a file"]
        await pilot.press("tab")
        assert screen.composer.input.text == "/review "
        await pilot.press(*"src/main.py", "enter")
        await wait_until(pilot, lambda: screen.selected_run is not None)
        review = screen.selected_run
        assert review is not None
        await finish_run(runtime, review.id)
        # Its run's row reads as its job's, as typed (it read "Review src/main.py carefully.").
        await wait_until(pilot, lambda: screen.job_tree.job_node(review.job_id) is not None)
        assert screen.job_tree._run_title(review) == "/review src/main.py"

        titles = {command.title for command in app.get_system_commands(app.screen)}
        assert {"Skill /explain", "Command /review"} <= titles
        # As a person reads "Follow-up in: …" before pressing ctrl+t: pressed earlier, while
        # the composer still addressed a new job, it would switch to a follow-up instead.
        await wait_until(pilot, lambda: screen.composer.follow_up_job_id is not None)
        # And the cursor in the box: the prompts the run showed were answered from here (not
        # by keys), and the last one gives the focus back as it closes, on a loaded machine a
        # moment later. Elsewhere ctrl+t means "follow up the selected job" (twice in 12 runs
        # with both cores busy it went to the browser's binding and the wait below timed out).
        await wait_until(pilot, lambda: app.focused is screen.composer.input)
        await pilot.press("ctrl+t")  # a new job for the skill
        await wait_until(pilot, lambda: screen.composer.follow_up_job_id is None)
        await pilot.press(*"/explain the parser", "enter")
        await wait_until(pilot, lambda: len(screen.job_tree.job_ids) == 2)
    inputs = await root_inputs(runtime)
    assert "Review src/main.py carefully." in inputs
    skill_input = next(i for i in inputs if "EXPLAIN-BODY" in i)
    assert "Arguments: the parser" in skill_input
    # The jobs are titled as typed, not by what the commands expand to (a new-user trial's
    # browser read "# Skill: explain␊␊S…").
    titles = sorted(job.title for job in (await runtime.list_jobs()).items)
    assert titles == ["/explain the parser", "/review src/main.py"]


def _rows_of(app: AgentTuiApp, widget: Widget) -> list[str]:
    """The rows of ``widget``'s content on screen (inside its border), as a person reads them."""
    region = widget.content_region
    strips = app.screen._compositor.render_strips()
    return [
        strips[y].crop(region.x, region.right).text.strip() for y in range(region.y, region.bottom)
    ]


async def _user_message(pilot: Pilot[Any], app: AgentTuiApp) -> MessageView:
    screen = main_screen(app)
    await wait_until(
        pilot, lambda: any(v.role is Role.USER for v in screen.conversation.message_views)
    )
    view = next(v for v in screen.conversation.message_views if v.role is Role.USER)
    await wait_until(pilot, lambda: view.region.height > 0)
    await pilot.pause()
    return view


async def test_a_skill_invoked_shows_as_typed_with_its_instructions_folded_the_model_reads_them_all(
    db_path: Path, workspace: Path
) -> None:
    """Found by a new-user trial: ``/review src/app.py`` showed as the skill's whole body, as if
    the person had typed it, after a restart too (and as the run's row in the browser, and as
    what ↑ recalled in the composer)."""
    write(
        workspace / ".agent-tui" / "skills" / "review" / "SKILL.md",
        "---\ndescription: Review a file\n---\nREVIEW-BODY: read it all.\nThen list problems.",
    )
    provider = ScriptedProvider([Turn(text="Reviewed.")])
    runtime = await open_scripted(provider, db_path, workspace)
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            screen = main_screen(app)
            await pilot.press(*"/review src/app.py", "enter")
            await wait_until(
                pilot,
                lambda: (
                    "Reviewed." in screen_text(app)
                    or any("Reviewed." in v.text for v in screen.conversation.message_views)
                ),
            )
            view = await _user_message(pilot, app)
            rows = _rows_of(app, view)
            assert rows[0] == "/review src/app.py"
            assert any(row.endswith("skill: review — 6 lines") for row in rows), rows
            assert not any("REVIEW-BODY" in row or "# Skill" in row for row in rows), rows

            screen.conversation.focus()
            await pilot.press("t")  # opens it, as it opens thinking
            await wait_until(pilot, lambda: any("REVIEW-BODY" in r for r in _rows_of(app, view)))
            assert any("Arguments: src/app.py" in row for row in _rows_of(app, view))
        [request] = provider.requests
        sent = [m for m in request.messages if m.role is Role.USER]
        assert sent[0].text == (
            "# Skill: review\n\nREVIEW-BODY: read it all.\nThen list problems.\n\n"
            "Arguments: src/app.py"
        )
    finally:
        await runtime.close()

    again = await open_runtime(db_path, workspace)  # a restart: read from the database
    try:
        app = make_app(again, workspace)
        async with app.run_test(size=SIZE) as pilot:
            await wait_for_browser(pilot, app)
            await pilot.press("enter")
            view = await _user_message(pilot, app)
            rows = _rows_of(app, view)
            assert rows[0] == "/review src/app.py"
            assert not any("REVIEW-BODY" in row for row in rows), rows

            # The browser's run row and the composer's history read it as typed too.
            screen = main_screen(app)
            tree = screen.job_tree

            def browser_rows() -> list[str]:
                return [str(tree.render_line(y).text) for y in range(tree.last_line + 1)]

            await wait_until(
                pilot, lambda: sum("/review src/app.py" in row for row in browser_rows()) == 2
            )
            assert not any("# Skill" in row for row in browser_rows())
            screen.composer.input.focus()
            await pilot.press("up")
            assert screen.composer.input.text == "/review src/app.py"
    finally:
        await again.close()


async def test_a_pasted_skill_md_is_shown_and_recalled_as_typed_not_as_the_skills_command(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a review: a person pasting a SKILL.md (``# Skill: deploy`` … ``Arguments:
    --prod``) saw ``/deploy --prod`` in the conversation and the browser, and ↑ put
    ``/deploy --prod`` in the box, which Enter runs. Only a skill's exact expansion reads as
    its command."""
    write(
        workspace / ".agent-tui" / "skills" / "deploy" / "SKILL.md",
        "---\ndescription: Deploy\n---\nDEPLOY-BODY: ship it.",
    )
    pasted = "# Skill: deploy\n\nSteps:\n1. build\n\nArguments: --prod"
    run = await runtime.start(pasted)
    await finish_run(runtime, run.id)
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_browser(pilot, app)
        screen = main_screen(app)
        await pilot.press("enter")
        await _user_message(pilot, app)
        shown = screen_text(app)
        assert "Skill: deploy" in shown and "1. build" in shown, shown
        assert "/deploy --prod" not in shown and "skill: deploy —" not in shown, shown
        tree = screen.job_tree
        assert tree.run_node(run.id) is not None
        assert not any(
            "/deploy --prod" in str(tree.render_line(y).text) for y in range(tree.last_line + 1)
        )
        screen.composer.input.focus()
        await pilot.press("up")
        assert screen.composer.input.text == pasted


async def test_the_transcript_shows_the_phase_moves_and_context_lists_what_is_in_effect(
    runtime: Runtime, workspace: Path
) -> None:
    write(workspace / "AGENTS.md", "Use British spelling.")
    phases = workspace / ".agent-tui" / "phases" / "default"
    write(phases / "plan" / "PHASE.md", "---\ninitial: true\ntarget: build\n---\nPlan first.")
    write(phases / "build" / "PHASE.md", "---\ntarget: plan\n---\nNow build it.")
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await pilot.press(*"summarise this folder", "enter")
        await wait_until(pilot, lambda: "◆ phase: plan → build" in screen_text(app))
        assert "◆ phase: starts in plan" in screen_text(app)
        assert "§ instructions: AGENTS.md" in screen_text(app)
        assert screen.selected_run is not None
        await finish_run(runtime, screen.selected_run.id)
        # As in the /compact test below: the prompts were answered through the runtime, and a
        # prompt the screen shows late takes the keys; once it shows the run completed, with
        # the composer focused, every earlier event has been shown.
        status = screen.query_one(StatusLine)
        await wait_until(
            pilot,
            lambda: "completed" in str(status.render()) and isinstance(app.focused, ComposerInput),
        )
        await pilot.press(*"/context", "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, ReportScreen))
        shown = screen_text(app)
        assert str(workspace / "AGENTS.md") in shown
        assert "build" in shown and "plan (initial)" in shown
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is screen)

        # Reopened from the database, the notes are still where they happened.
        run_id = screen.selected_run.id
        screen.open_run(run_id)
        await wait_until(pilot, lambda: screen._loading_run_id is None)
        await wait_until(pilot, lambda: "◆ phase: plan → build" in screen_text(app))


def _footer(app: AgentTuiApp) -> list[tuple[str, str]]:
    return [
        (key.key_display, key.description)
        for key in app.screen.query(FooterKey)
        if not key.has_class("-command-palette")
    ]


async def test_context_is_a_report_over_the_conversation_that_esc_closes_not_a_toast(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial: ``/context`` showed its twenty lines as a toast that stayed
    half a minute over the conversation and the windows beside it, and toasts piled up."""
    write(workspace / "AGENTS.md", "Use British spelling.")
    for number in range(6):
        write(
            workspace / ".agent-tui" / "skills" / f"skill{number}" / "SKILL.md",
            f"---\nname: skill{number}\ndescription: does thing {number}\n---\nBody.",
        )
    app = make_app(runtime, workspace)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = main_screen(app)
        composer_input = screen.composer.input
        await pilot.press(*"/context", "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, ReportScreen))
        report = app.screen
        assert isinstance(report, ReportScreen)
        await pilot.pause()
        assert not notifications(app)
        shown = screen_text(app)
        assert str(workspace / "AGENTS.md") in shown and "skill5: does thing 5" in shown
        # More than fits at 80x24: the keys scroll it, and the footer says so.
        body = report.query_one(ReportBody)
        assert app.focused is body and body.max_scroll_y > 0
        assert ("↑↓", "Scroll") in _footer(app) and ("esc", "Close") in _footer(app)
        await pilot.press("end")
        await wait_until(pilot, lambda: body.scroll_y == body.max_scroll_y)
        await pilot.press("pageup")
        await wait_until(pilot, lambda: body.scroll_y < body.max_scroll_y)
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is screen)
        assert app.focused is composer_input  # where the command was typed, to go on typing
        await pilot.resize_terminal(140, 44)
        await pilot.press(*"/context", "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, ReportScreen))
        await pilot.pause()
        body = app.screen.query_one(ReportBody)
        await wait_until(pilot, lambda: body.max_scroll_y == 0)
        # All of it in view: no scroll keys in the footer, only what works.
        assert _footer(app) == [("esc", "Close"), ("c", "Copy")]
        await pilot.press("q")
        await wait_until(pilot, lambda: app.screen is screen)
        assert not notifications(app)


async def test_the_context_windows_last_line_can_be_scrolled_into_view_at_80_by_24(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial: at 80x24 End, Down and PageDown stopped with ``Agents:`` as the
    last row seen; the window's title took a row the scrolling part did not leave it, so the
    last line (``default (built in)``) stayed under the window's bottom edge."""
    for number in range(6):
        write(
            workspace / ".agent-tui" / "skills" / f"skill{number}" / "SKILL.md",
            f"---\nname: skill{number}\ndescription: does thing {number}\n---\nBody.",
        )
    app = make_app(runtime, workspace)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press(*"/context", "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, ReportScreen))
        report = app.screen
        body = report.query_one(ReportBody)
        await wait_until(pilot, lambda: body.max_scroll_y > 0)
        last_line = list(body.query(Static))[-1]
        assert str(last_line.render()) == "default (built in)"
        for key in ("end", "pagedown", "down"):
            await pilot.press("home", *[key] * 20)
            await wait_until(pilot, lambda: body.scroll_y == body.max_scroll_y)
            await pilot.pause()
            # What a person sees there: the last line, not the window's edge over it.
            x, y = last_line.region.offset
            assert report.get_widget_at(x, y)[0] is last_line, key


async def test_slash_compact_records_a_visible_compaction_and_keeps_every_message(
    runtime: Runtime, workspace: Path
) -> None:
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await pilot.press(*"summarise this folder", "enter")
        await wait_until(pilot, lambda: screen.selected_run is not None)
        assert screen.selected_run is not None
        run_id = screen.selected_run.id
        await finish_run(runtime, run_id)
        await wait_until(pilot, lambda: screen.composer.follow_up_job_id is not None)
        # The run's prompts were answered through the runtime, not by key: the screen shows
        # each as its event arrives, possibly after the answer, and a "/" pressed while one
        # holds the focus is the prompt's (the rest then went out as the message "compact").
        # Once the screen shows the run completed, every earlier event has been shown.
        status = screen.query_one(StatusLine)
        await wait_until(
            pilot,
            lambda: "completed" in str(status.render()) and isinstance(app.focused, ComposerInput),
        )
        before = len(await runtime.all_messages(run_id))
        await pilot.press(*"/compact", "enter")
        await wait_until(pilot, lambda: "⇲ compacted" in screen_text(app))
    [note] = [n for n in await runtime.extensions.notes(run_id) if n.note == "compaction"]
    assert note.data["summary"].startswith("- The person asked: summarise this folder")
    assert len(await runtime.all_messages(run_id)) == before
    assert (await runtime.get_run(run_id)).state is RunState.COMPLETED


async def test_slash_compact_counts_the_summary_call_in_the_status_line_and_the_browser_rows(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a trial: after ``/compact`` ``agent-tui runs`` counted the summary call's tokens
    in the run's total (14.8k) while the status line and the browser's rows kept the total from
    before it (11.4k) until agent-tui was started again."""
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await pilot.press(*"summarise this folder", "enter")
        await wait_until(pilot, lambda: screen.selected_run is not None)
        assert screen.selected_run is not None
        run_id = screen.selected_run.id
        await finish_run(runtime, run_id)
        status = screen.query_one(StatusLine)
        await wait_until(
            pilot,
            lambda: "completed" in str(status.render()) and isinstance(app.focused, ComposerInput),
        )
        before = (await runtime.get_run(run_id)).usage.total_tokens
        await pilot.press(*"/compact", "enter")
        await wait_until(pilot, lambda: "⇲ compacted" in screen_text(app))
        run = await runtime.get_run(run_id)
        job = await runtime.get_job(run.job_id)
        assert run.usage.total_tokens > before  # the summary call counts
        counted = format_tokens(run.usage.total_tokens)
        await wait_until(pilot, lambda: f"{counted} tok" in str(status.render()))
        tree = screen.job_tree
        run_row, job_row = tree.run_node(run_id), tree.job_node(run.job_id)
        assert run_row is not None and job_row is not None
        await wait_until(pilot, lambda: counted in tree.row_text(run_row))
        assert format_tokens(job.usage.total_tokens) in tree.row_text(job_row)


async def test_the_help_lists_this_workspaces_skills_and_commands(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial: F1 listed the built-in commands only."""
    write(
        workspace / ".claude" / "commands" / "review.md",
        "---\ndescription: Review a file\nargument-hint: FILE\n---\nReview $ARGUMENTS carefully.",
    )
    write(
        workspace / ".agent-tui" / "skills" / "explain" / "SKILL.md",
        "---\ndescription: Explain code to a newcomer\n---\nEXPLAIN-BODY: use small words.",
    )
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        main_screen(app)
        await pilot.press("f1")
        await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen))
        help_screen = app.screen
        assert isinstance(help_screen, HelpScreen)
        assert ("/review FILE", "Review a file") in help_screen.workspace_commands
        assert ("/explain [ARGS]", "skill: Explain code to a newcomer") in (
            help_screen.workspace_commands
        )
        shown = " ".join(
            str(w.render()) for w in help_screen.query(".help-section").results(Static)
        )
        assert "This workspace's commands" in shown


async def test_context_in_a_job_says_what_its_context_holds_part_by_part(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial: ``/context`` listed the files in effect but not what the
    job's context held (Claude Code's /context shows the parts and the room left)."""
    run = await runtime.start("list the files here")
    await finish_run(runtime, run.id)
    shown = await _context_report(runtime, workspace, run.job_id)
    assert "Context of this job:" in shown and "its window:" in shown
    for part in ("system prompt", "tool definitions", "messages: you", "tool results", "free"):
        assert part in shown, part
    usage = await runtime.context_usage(run.job_id)
    assert f"({usage.tool_count} tools)" in shown
    assert "compaction cannot help" not in shown  # a large window: it can


async def _context_report(runtime: Runtime, workspace: Path, job_id: str) -> str:
    """The screen's text once ``/context`` was typed in the composer of job ``job_id``."""
    app = make_app(runtime, workspace)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        await pilot.press("enter")
        await wait_until(pilot, lambda: screen.composer.follow_up_job_id == job_id)
        screen.composer.focus_input()
        await pilot.press(*"/context", "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, ReportScreen))
        await pilot.pause()
        return screen_text(app)


async def test_context_says_when_the_tool_definitions_leave_compaction_no_room(
    db_path: Path, workspace: Path
) -> None:
    """``/context`` showed the figures but not that compacting could not bring the request
    under ``compact_at`` (the engine says it once an execution, in a notice that passes): the
    built-in tools' definitions alone are past 80% of a 1,000-token window."""
    runtime = await Runtime.open(
        db_path=db_path,
        workspace=workspace,
        config=Config(defaults=Defaults(context_window=1000, compact_at=0.8)),
        model="demo:instant",
    )
    try:
        run = await runtime.start("list the files here")
        await finish_run(runtime, run.id)
        usage = await runtime.context_usage(run.job_id)
        shown = " ".join((await _context_report(runtime, workspace, run.job_id)).split())
    finally:
        await runtime.close()
    overhead = usage.system + usage.tools
    assert overhead > 800
    assert (
        f"compaction cannot help: the system prompt and the tool definitions take"
        f" ~{overhead:,} tokens, more than the 800 compact_at (80%) of the window allows"
    ) in shown
    assert "offer fewer tools" in shown


async def test_a_message_left_by_a_skill_named_like_a_built_in_is_shown_and_recalled_as_sent(
    db_path: Path, workspace: Path
) -> None:
    """Found by a review: ``agent-tui run "/help me"`` expanded a skill named ``help`` before
    built-ins won there too. The TUI showed that message as ``/help me`` (in the conversation
    and the browser) and ↑ put ``/help me`` in the box, which opens the help: it reads as the
    text the model read."""
    write(
        workspace / ".agent-tui" / "skills" / "help" / "SKILL.md",
        "---\ndescription: Our help\n---\nHELP-BODY: explain the repo.",
    )
    [skill] = discover_skills(workspace).skills.values()
    sent = skill_text(skill, "me")
    runtime = await open_scripted(ScriptedProvider([Turn(text="Explained.")]), db_path, workspace)
    try:
        run = await runtime.start(sent)
        await runtime.wait(run.id, timeout=10)
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            await wait_for_browser(pilot, app)
            screen = main_screen(app)
            await pilot.press("enter")
            view = await _user_message(pilot, app)
            rows = _rows_of(app, view)
            assert rows[0] == "# Skill: help", rows
            assert "HELP-BODY: explain the repo." in rows, rows
            tree = screen.job_tree
            assert not any(
                "/help me" in str(tree.render_line(y).text) for y in range(tree.last_line + 1)
            )
            screen.composer.input.focus()
            await pilot.press("up")
            assert screen.composer.input.text == sent
    finally:
        await runtime.close()


def test_the_tuis_command_table_is_the_runtimes_list_of_built_in_names() -> None:
    """``run``, ``doctor`` and ``/context`` say what a built-in shadows from the runtime's list:
    a command added to the TUI's table and not there would shadow silently again."""
    assert {command.name for command in SLASH_COMMANDS} == BUILTIN_COMMAND_NAMES


async def test_a_command_named_like_a_built_in_runs_the_built_in_and_context_says_shadowed(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a trial: ``help.md`` was listed by ``/context`` as ``/help``, while ``/help``
    opened the help: the report says now that the file is shadowed."""
    help_file = workspace / ".agent-tui" / "commands" / "help.md"
    write(help_file, "---\ndescription: Our help\n---\nExplain $ARGUMENTS.")
    app = make_app(runtime, workspace)
    async with app.run_test(size=(160, 44)) as pilot:
        screen = main_screen(app)
        await pilot.press(*"/help me", "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen))
        assert ("/help [ARGS]", "Our help") not in app.screen.workspace_commands
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is screen)
        screen.composer.focus_input()
        await pilot.press(*"/context", "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, ReportScreen))
        report = app.screen
        assert isinstance(report, ReportScreen)
        line = next(line for line in report.lines if str(help_file) in line)
        assert "shadowed by the built-in /help: never runs" in line
    assert (await runtime.list_jobs()).items == []
