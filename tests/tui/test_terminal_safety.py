"""The TUI never sends control characters from model text, tool output, file names or job titles
to the terminal, and never reads them as Rich markup: they are shown visibly (``␛]0;…␇``)."""

from __future__ import annotations

import re
from pathlib import Path

from runtime.api import Runtime
from runtime.models import RunState
from tests.tui.helpers import SIZE, finish_run, make_app, wait_for_browser, wait_until
from tui.screens.main import MainScreen
from tui.widgets.approval_prompt import ApprovalPrompt
from tui.widgets.job_tree import JobTree
from tui.widgets.message_view import MessageView
from tui.widgets.question_prompt import QuestionPrompt
from tui.widgets.tool_call_view import ToolCallView

TITLE = "\x1b]0;pwned\x07"
CLEAR = "\x1b[2J"
CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4=\x07"
RAW_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


async def test_escapes_in_the_prompt_files_and_results_are_shown_visibly_never_sent_raw(
    runtime: Runtime, workspace: Path
) -> None:
    (workspace / "README.md").write_text(f"{CLIPBOARD}Readme [bold red]not markup[/] {CLEAR}\n")
    (workspace / f"{TITLE}.txt").write_text(f"{CLEAR}cleared {TITLE}\n")
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, MainScreen)
        # The composer takes typed text; the escape arrives as pasted text would.
        composer = screen.query_one("#composer-input")
        composer.value = f"summarise {TITLE}[b]this[/b]"  # type: ignore[attr-defined]
        await pilot.press("enter")
        await wait_until(pilot, lambda: screen.query(QuestionPrompt))
        await pilot.press("1", "enter")  # an option's number, then Enter
        await wait_until(pilot, lambda: screen.query(ApprovalPrompt))
        approval_text = app.export_screenshot()
        await pilot.press("y")
        await wait_until(
            pilot,
            lambda: (
                screen.selected_run is not None and screen.selected_run.state is RunState.COMPLETED
            ),
        )
        await pilot.pause()
        shown = [view.text for view in screen.query(MessageView)]
        results = [view._result_text() for view in screen.query(ToolCallView)]
        headers = [view._header() for view in screen.query(ToolCallView)]
        tree = screen.query_one(JobTree)
        labels = [str(tree._label(node)) for node in tree.root.children]
        screenshot = app.export_screenshot()

    everything = "\n".join([*shown, *results, *headers, *labels])
    assert RAW_CONTROL.search(everything) is None, everything
    assert RAW_CONTROL.search(screenshot) is None
    assert RAW_CONTROL.search(approval_text) is None
    assert any("␛]0;pwned␇[b]this[/b]" in text for text in shown)  # the prompt, markup literal
    assert any("␛]52;c;cm0gLXJmIH4=␇Readme [bold red]not markup[/]" in r for r in results)
    assert any("␛[2Jcleared ␛]0;pwned␇" in r for r in results)  # a file's content
    assert any("␛]0;pwned␇.txt" in h for h in headers)  # a file name in the arguments
    assert any("␛]0;pwned␇" in label for label in labels)  # the job title


async def test_a_title_written_over_several_lines_is_one_line_in_the_browser_and_the_composer(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial: rows read ``# Skill: explain␊␊S…`` and ``line one ␊line two``;
    a title is one line, its runs of whitespace (newlines too) one space."""
    first = await runtime.start("explain it", title="# Skill: explain\n\nSay why")
    await finish_run(runtime, first.id)
    # A follow-up's row reads its input (the run that started the job reads the job's title).
    run = await runtime.follow_up(first.job_id, "line one \nline two\n\n\tand three")
    await finish_run(runtime, run.id)
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, MainScreen)
        await wait_for_browser(pilot, app)
        tree = screen.query_one(JobTree)
        screen.open_job(run.job_id)
        await wait_until(pilot, lambda: tree.run_node(run.id) is not None)
        await pilot.pause()
        job_node = tree.root.children[0]
        run_node, first_node = tree.run_node(run.id), tree.run_node(first.id)
        assert run_node is not None and first_node is not None
        job_row, run_row = str(tree._label(job_node)), str(tree._label(run_node))
        first_row = str(tree._label(first_node))
        composer_title = str(screen.composer.query_one("#mode").render())
    assert "# Skill: explain Say why" in job_row and "␊" not in job_row
    assert "# Skill: explain Say why" in first_row and "␊" not in first_row
    assert "line one line two and three" in run_row and "␊" not in run_row
    assert "Follow-up in: # Skill: explain Say why" in composer_title
