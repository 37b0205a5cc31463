"""Texts that are not ours (a person's prompt, a typed name, a path, an error's words, a
server's choices, a command file's description) show as written wherever they reach a widget
that reads Textual markup by default. Read as markup, "fix [/usr] path" raised MarkupError and
the app quit; "app/[slug]/page.tsx" lost its "[slug]", "[WIP] draft" its "[WIP]"."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations
from textual.widget import Widget
from textual.widgets import OptionList, Select, SelectionList, Static
from textual.widgets._toast import Toast

from runtime.api import Runtime
from runtime.mcp import InMemoryServer, McpManager
from tests.fakes.scripted import ScriptedProvider, Turn, open_scripted
from tests.tui.helpers import (
    SIZE,
    main_screen,
    make_app,
    open_runtime,
    wait_for_browser,
    wait_until,
)
from tui.app import AgentTuiApp
from tui.widgets.elicitation_form import ElicitationForm

CRASHED = "fix [/usr] path please"
"""Read as markup: a closing tag that closes nothing, MarkupError."""
ROUTE = "app/[slug]/page.tsx"
"""Read as markup: ``[slug]`` is a style, dropped."""


def drawn(widget: Widget) -> str:
    """The screen's text where ``widget`` lies, row by row: what a person reads there."""
    strips = widget.screen._compositor.render_strips()
    region = widget.region
    return "\n".join(
        strips[y].crop(region.x, region.right).text.rstrip() for y in range(region.y, region.bottom)
    )


def toasts(app: AgentTuiApp) -> list[str]:
    """The text of each notification on screen (title, then message)."""
    return [str(toast.render()) for toast in app.screen.query(Toast)]


async def test_a_notice_quoting_what_was_typed_shows_it_as_written(
    runtime: Runtime, workspace: Path
) -> None:
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        screen = main_screen(app)
        screen.composer.focus_input()
        await pilot.press(*"/theme [/usr]", "enter")
        await wait_until(pilot, lambda: any("[/usr]" in toast for toast in toasts(app)))
        screen.composer.input.text = ""
        await pilot.press(*"/theme [slug]", "enter")
        await wait_until(pilot, lambda: any("'[slug]'" in toast for toast in toasts(app)))
        assert app.is_running


async def test_a_start_up_notice_quoting_a_theme_setting_shows_it_as_written(
    runtime: Runtime, workspace: Path
) -> None:
    """The config's ``[defaults] theme`` is quoted at every start when it is not installed:
    read as markup, "[/usr]" in it quit the app at every start."""
    app = make_app(runtime, workspace, theme="fix[/usr]")
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_until(pilot, lambda: toasts(app))
        assert toasts(app) == ["Theme\ntheme 'fix[/usr]' is not installed; using the default"]
        assert app.is_running


async def test_a_saved_screenshot_names_a_folder_with_brackets_as_written(
    db_path: Path, tmp_path: Path
) -> None:
    """Textual's own notice styled the path with markup: in a folder ``site[b]`` it read
    ``site``."""
    workspace = tmp_path / "site[b]"
    workspace.mkdir()
    runtime = await open_runtime(db_path, workspace)
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE, notifications=True) as pilot:
            app.action_screenshot()
            await wait_until(
                pilot, lambda: any(n.title == "Screenshot" for n in app._notifications)
            )
            [picture] = (workspace / ".agent-tui" / "exports").glob("*.svg")
            await wait_until(pilot, lambda: toasts(app))
            assert toasts(app) == [f"Screenshot\nSaved screenshot to {str(picture)!r}"]
    finally:
        await runtime.close()


async def test_the_inbox_shows_titles_and_questions_with_brackets_as_written(
    runtime: Runtime, workspace: Path
) -> None:
    from tui.screens.inbox import InboxScreen

    for task in (CRASHED, f"see {ROUTE}"):
        run = await runtime.start(task)
        boundary = await runtime.wait(run.id, timeout=10)
        assert boundary.request is not None  # the demo model's question
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_browser(pilot, app)
        await pilot.press("i")
        await wait_until(pilot, lambda: isinstance(app.screen, InboxScreen))
        await pilot.pause()
        shown = drawn(app.screen.query_one("#inbox-list", OptionList))
        assert CRASHED in shown and f"see {ROUTE}" in shown
        assert app.is_running


@pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=["120x40", "80x24"])
async def test_the_inbox_shows_as_much_of_a_title_and_question_as_fits_on_their_rows(
    runtime: Runtime, workspace: Path, size: tuple[int, int]
) -> None:
    """Found by a new-user trial: a job's title was cut at 30 characters beside an empty rest of
    the row, and at 80x24 a long question wrapped back under the kind's column."""
    from tui.screens.inbox import InboxScreen

    indent = len("question    ")  # the kind's column
    title = "summarise the second task with a fairly long title that runs on " * 2
    run = await runtime.start(title)
    await runtime.wait(run.id, timeout=10)
    app = make_app(runtime, workspace)
    async with app.run_test(size=size) as pilot:
        await wait_for_browser(pilot, app)
        await pilot.press("i")
        await wait_until(pilot, lambda: isinstance(app.screen, InboxScreen))
        inbox = app.screen.query_one("#inbox-list", OptionList)
        await wait_until(pilot, lambda: inbox.option_count == 1 and inbox.options[0].id)
        await pilot.pause()
        rows = [row for row in drawn(inbox).splitlines() if row.strip()]
    margin = len(rows[0]) - len(rows[0].lstrip())  # the options' own padding
    rows = [row[margin:] for row in rows]
    # Two rows, each cut to the list's width: no third, wrapped back to the left edge.
    assert len(rows) == 2, rows
    assert rows[0].startswith("question") and rows[1].startswith(" " * indent)
    shown_title = rows[0][indent:].strip()
    assert shown_title.endswith("…") and len(shown_title) > 40
    assert title.startswith(shown_title.removesuffix("…"))


async def test_the_composer_menus_say_what_was_typed_as_written(
    runtime: Runtime, workspace: Path
) -> None:
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        screen.composer.focus_input()
        menu = screen.query_one("#completions", OptionList)
        await pilot.press(*"/[slug]")
        await wait_until(pilot, lambda: "no command starts with" in drawn(menu))
        assert "no command starts with /[slug]" in drawn(menu)
        screen.composer.input.text = ""
        await pilot.press(*"/[/usr]")
        await wait_until(pilot, lambda: "no command starts with /[/usr]" in drawn(menu))
        screen.composer.input.text = ""
        await pilot.press(*f"@{ROUTE}")
        await wait_until(pilot, lambda: "no file matches" in drawn(menu))
        assert f"no file matches '{ROUTE}'" in drawn(menu)
        assert app.is_running


async def test_a_search_without_hits_repeats_the_words_as_written(
    runtime: Runtime, workspace: Path
) -> None:
    await runtime.start("count the herons")
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        await pilot.press("slash", *"[/usr]", "enter")
        results = screen.query_one("#search-results", OptionList)
        await wait_until(pilot, lambda: results.display and results.option_count)
        await pilot.pause()
        assert "No message matches '[/usr]'" in drawn(results)
        assert app.is_running


async def test_the_permissions_screen_names_a_broken_file_in_a_folder_with_brackets_as_written(
    db_path: Path, tmp_path: Path
) -> None:
    from tui.screens.permissions import PermissionsScreen

    workspace = tmp_path / "site [b]"
    workspace.mkdir()
    (workspace / "agent-tui.toml").write_text('permissions = "[/usr]"\n')
    runtime = await open_runtime(db_path, workspace)
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            app.action_permissions()
            await wait_until(pilot, lambda: isinstance(app.screen, PermissionsScreen))
            await pilot.pause()
            status = app.screen.query_one("#permissions-status", Static)
            assert str(status.render()) == (
                f"⚠ {workspace / 'agent-tui.toml'}: permissions: must be a table"
            )
    finally:
        await runtime.close()


async def test_the_palette_shows_a_command_files_description_as_written(
    runtime: Runtime, workspace: Path
) -> None:
    from textual.command import CommandList, CommandPalette

    commands = workspace / ".agent-tui" / "commands"
    commands.mkdir(parents=True)
    (commands / "review.md").write_text(
        f"---\ndescription: Review the [WIP] change, {CRASHED}\n---\nReview $ARGUMENTS\n"
    )
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+p")
        await wait_until(pilot, lambda: isinstance(app.screen, CommandPalette))
        await pilot.press(*"/review")
        hits = app.screen.query_one(CommandList)
        await wait_until(pilot, lambda: "Command /review" in drawn(hits))
        assert f"Review the [WIP] change, {CRASHED}" in drawn(hits)
        assert app.is_running


# --- a form of an MCP server -------------------------------------------------------------------

CHOICES = [CRASHED, "[WIP] draft", ":smile:"]
FORM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "one": {
            "type": "string",
            "title": "One",
            "oneOf": [{"const": f"c{i}", "title": title} for i, title in enumerate(CHOICES)],
            "default": "c0",
        },
        "many": {
            "type": "array",
            "title": "Many",
            "items": {"anyOf": [{"const": f"c{i}", "title": t} for i, t in enumerate(CHOICES)]},
        },
    },
}


def _form_server() -> MCPServer:
    server = MCPServer("forms")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def pick(ctx: Context) -> str:
        """Ask for a choice."""
        answer = await ctx.session.elicit_form(
            "Pick", FORM_SCHEMA, related_request_id=ctx.request_id
        )
        return answer.action

    return server


@pytest.fixture
async def form_runtime(db_path: Path, workspace: Path) -> AsyncIterator[Runtime]:
    model = ScriptedProvider([Turn(tool_calls=[("forms__pick", {})]), Turn(text="Noted.")])
    manager = McpManager({"forms": InMemoryServer(_form_server(), timeout=30)}, workspace=workspace)
    opened = await open_scripted(model, db_path, workspace, mcp=manager)
    try:
        yield opened
    finally:
        await opened.close()


async def test_a_forms_choices_with_brackets_show_as_written(
    form_runtime: Runtime, workspace: Path
) -> None:
    app = make_app(form_runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await pilot.press(*"pick", "enter")
        await wait_until(pilot, lambda: screen.query(ElicitationForm), timeout=20)
        form = screen.query_one(ElicitationForm)
        await pilot.pause()
        one = form.query_one("#input-one", Select)
        assert CRASHED in drawn(one)
        many = drawn(form.query_one("#input-many", SelectionList))
        assert all(choice in many for choice in CHOICES)
        await wait_until(pilot, lambda: app.focused is one)  # the form's first field
        await pilot.press("enter")  # its drop-down, open
        await wait_until(pilot, lambda: one.expanded)
        await pilot.pause()
        listed = drawn(one.query_one(OptionList))
        assert all(choice in listed for choice in CHOICES)
        assert app.is_running


# --- a run's own texts (already plain: these guard them) ---------------------------------------

PAGE = "export default function Page() { return '[/usr]' }\n"


@pytest.fixture
async def scripted_runtime(db_path: Path, workspace: Path) -> AsyncIterator[Runtime]:
    """A run that writes ``app/[slug]/page.tsx`` (approval), asks a question whose options
    read as markup, and answers with such words."""
    model = ScriptedProvider(
        [
            Turn(tool_calls=[("write_file", {"path": ROUTE, "content": PAGE})]),
            Turn(
                tool_calls=[("ask_user", {"question": "Keep [WIP] or [/usr]?", "options": CHOICES})]
            ),
            Turn(text=f"Wrote {ROUTE}: [bold]x[/bold] :smile: a [b] c"),
        ]
    )
    opened = await open_scripted(model, db_path, workspace)
    try:
        yield opened
    finally:
        await opened.close()


async def test_a_runs_approval_question_tool_call_and_answer_show_brackets_as_written(
    scripted_runtime: Runtime, workspace: Path
) -> None:
    from tui.widgets.approval_prompt import ApprovalPrompt
    from tui.widgets.question_prompt import QuestionPrompt

    app = make_app(scripted_runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await pilot.press(*CRASHED, "enter")
        await wait_until(pilot, lambda: screen.query(ApprovalPrompt))
        await pilot.pause()
        approval = drawn(screen.query_one(ApprovalPrompt))
        assert (
            f"{ROUTE} (new file)" in approval
            and "+export default function Page() { return '[/usr]' }" in approval
        )
        await pilot.press("y")
        await wait_until(pilot, lambda: screen.query(QuestionPrompt))
        await pilot.pause()
        question = drawn(screen.query_one(QuestionPrompt))
        assert "? Keep [WIP] or [/usr]?" in question
        assert all(f"{n}. {choice}" in question for n, choice in enumerate(CHOICES, 1))
        await pilot.press("1", "enter")
        await wait_until(pilot, lambda: "[bold]x[/bold] :smile: a [b] c" in drawn(screen))
        shown = drawn(screen)
        assert f"write_file(path={ROUTE}" in shown  # the tool calls, their results
        assert f"+++ b/{ROUTE}" in shown and "ask_user(question=Keep [WIP] or [/usr]?" in shown
        assert CRASHED in shown  # the prompt, in the conversation and as the job's title
        assert app.is_running


async def test_the_help_and_the_context_report_show_command_files_as_written(
    runtime: Runtime, workspace: Path
) -> None:
    """A command file's description in the help, and in ``/context`` the problem of a file
    ``[slug].md`` (not a usable name). Already plain: this guards them."""
    from tui.screens.help import HelpScreen
    from tui.screens.report import ReportScreen

    commands = workspace / ".agent-tui" / "commands"
    commands.mkdir(parents=True)
    (commands / "review.md").write_text(
        f"---\ndescription: Review the [WIP] change, {CRASHED}\n---\nReview $ARGUMENTS\n"
    )
    (commands / "[slug].md").write_text("Not a usable name\n")
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        screen.composer.focus_input()
        await pilot.press("f1")
        await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen))
        app.screen.query_one("#help-body").scroll_end(animate=False)
        await pilot.pause()
        assert "/review [ARGS]         Review the [WIP] change, fix [/usr] path" in drawn(
            app.screen
        )
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is screen)
        await pilot.press(*"/context", "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, ReportScreen))
        await pilot.pause()
        report = "\n".join(str(line.render()) for line in app.screen.query(Static))
        assert "'[slug]' is not a usable command name" in report
        assert app.is_running
