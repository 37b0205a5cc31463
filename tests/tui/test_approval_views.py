"""Approvals that read well: a shell command as its text (no JSON escapes), an edit as its
diff only, the key hints visible whatever the size; snapshots at 80x24 and 140x45."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rich.syntax import Syntax
from textual.pilot import Pilot
from textual.widgets import Input, Static

from runtime.api import Runtime
from runtime.config import Config
from tests.fakes.scripted import ScriptedProvider, Turn
from tests.tui.helpers import open_runtime, wait_until
from tests.tui.test_snapshots import ROOT
from tui.app import Settings, create_app
from tui.screens.main import MainScreen
from tui.widgets.approval_prompt import ApprovalPrompt
from tui.widgets.tool_call_view import ToolCallView

COMMAND = (
    """grep -rn "TODO" src | sed 's/\\t/  /' > todo.txt && echo "done: $(wc -l < todo.txt)" """
)
SHELL = [Turn("Collecting the TODOs.", [("shell", {"command": COMMAND, "timeout": 30})])]
EDIT = [
    Turn(
        "Fixing the greeting.",
        [
            (
                "edit_file",
                {
                    "path": "src/main.py",
                    "old_string": 'print("hello")',
                    "new_string": 'print("hi")',
                },
            )
        ],
    )
]


def _app_factory(name: str, script: list[Turn]) -> Callable[[], Any]:
    base = ROOT / name
    shutil.rmtree(base, ignore_errors=True)
    workspace = base / "project"
    (workspace / "src").mkdir(parents=True)
    (workspace / "src" / "main.py").write_text('def main() -> None:\n    print("hello")\n')

    async def opener() -> Runtime:
        provider = ScriptedProvider(list(script))
        return await Runtime.open(
            db_path=base / "agent-tui.db",
            workspace=workspace,
            config=Config(),
            model="scripted:test",
            providers=lambda reference: provider,
        )

    def build() -> Any:
        settings = Settings(
            workspace=workspace,
            theme="agent-dusk",
            hide_ages=True,
            remember_theme=False,
            prompt_settle_seconds=0,  # shown settled, with its keys, which the test presses
        )
        return create_app(opener, settings)

    return build


async def _until_approval(pilot: Pilot[Any]) -> None:
    await pilot.pause()
    await pilot.press(*"do the task", "enter")
    screen = pilot.app.screen
    assert isinstance(screen, MainScreen)
    await wait_until(pilot, lambda: screen.query(ApprovalPrompt))
    await wait_until(pilot, lambda: isinstance(pilot.app.focused, ApprovalPrompt))

    def caught_up() -> bool:
        # The status line and the browser row show the wait too (they may lag the prompt).
        run = screen.selected_run
        node = screen.job_tree.run_node(run.id) if run else None
        return bool(
            node is not None
            and screen.job_tree.row_text(node).startswith("?")
            and "input required" in screen.status.text
        )

    await wait_until(pilot, caught_up)
    pilot.app.clear_notifications()
    await pilot.pause(0.3)
    await pilot.wait_for_scheduled_animations()


def _shown(prompt: ApprovalPrompt) -> list[str]:
    return [str(w.render()) for w in prompt.query(Static) if w.display]


@pytest.mark.parametrize("size", [(80, 24), (140, 45)], ids=["80x24", "140x45"])
async def test_a_shell_approval_shows_the_command_as_text_and_the_keys(
    request: pytest.FixtureRequest, size: tuple[int, int]
) -> None:
    app = _app_factory(request.node.name, SHELL)()
    async with app.run_test(size=size) as pilot:
        await _until_approval(pilot)
        prompt = app.screen.query_one(ApprovalPrompt)
        shown = "\n".join(_shown(prompt))
        assert "$ " + COMMAND in shown
        assert "this job's folder" not in shown  # the folder agent-tui was opened in
        assert '\\"' not in shown and "{" not in shown  # no JSON dump, no escapes
        assert "timeout=30" in shown
        keys = prompt.query_one(".prompt-keys")
        assert keys.region.height >= 1 and keys.region.y + 1 <= app.size.height
        assert prompt.region.height <= app.size.height // 2 + 1


@pytest.mark.parametrize("size", [(80, 24), (140, 45)], ids=["80x24", "140x45"])
async def test_an_edit_approval_shows_the_diff_only(
    request: pytest.FixtureRequest, size: tuple[int, int]
) -> None:
    app = _app_factory(request.node.name, EDIT)()
    async with app.run_test(size=size) as pilot:
        await _until_approval(pilot)
        prompt = app.screen.query_one(ApprovalPrompt)
        shown = "\n".join(_shown(prompt))
        assert "src/main.py" in shown
        diff = prompt.query_one(".prompt-diff", Static).content
        assert isinstance(diff, Syntax)
        assert '-    print("hello")' in diff.code and '+    print("hi")' in diff.code
        assert "old_string" not in shown and "new_string" not in shown
        assert prompt.query_one(".prompt-keys").region.height >= 1


SAME_WRITE = [
    Turn(
        "Saving it again.",
        [
            (
                "write_file",
                {"path": "src/main.py", "content": 'def main() -> None:\n    print("hello")\n'},
            )
        ],
    )
]


async def test_a_write_that_changes_nothing_says_so_instead_of_showing_its_arguments(
    request: pytest.FixtureRequest,
) -> None:
    app = _app_factory(request.node.name, SAME_WRITE)()
    async with app.run_test(size=(140, 45)) as pilot:
        await _until_approval(pilot)
        prompt = app.screen.query_one(ApprovalPrompt)
        shown = "\n".join(_shown(prompt))
        assert "src/main.py — no change" in shown
        assert "{" not in shown and "\\n" not in shown  # no JSON dump, no escapes
        assert not prompt.query(".prompt-arguments")


LONG_FILE = "".join(f"line {n}\n" for n in range(60))
LONG_EDIT = [
    Turn(
        "Rewriting the notes.",
        [("write_file", {"path": "notes.txt", "content": LONG_FILE.replace("line", "row")})],
    )
]


async def test_a_diff_taller_than_the_prompt_scrolls_by_keys_and_says_so(
    request: pytest.FixtureRequest,
) -> None:
    """Found by a new-user trial: at 80x24 the change itself was below the fold of the
    diff, and ↓ and PageDown did nothing (only Tab into the diff, then ↓, moved it)."""
    build = _app_factory(request.node.name, LONG_EDIT)
    app = build()
    workspace = app.settings.workspace
    (workspace / "notes.txt").write_text(LONG_FILE)
    async with app.run_test(size=(80, 24)) as pilot:
        await _until_approval(pilot)
        prompt = app.screen.query_one(ApprovalPrompt)
        details = prompt.query_one("#details")
        assert details.max_scroll_y > 0
        await wait_until(
            pilot, lambda: "↑↓ scroll" in str(prompt.query_one(".prompt-keys").render())
        )
        await pilot.press("down")
        await wait_until(pilot, lambda: details.scroll_y == 1)
        await pilot.press("pagedown")
        await wait_until(pilot, lambda: details.scroll_y > 2)
        await pilot.press("pageup", "up")
        await wait_until(pilot, lambda: details.scroll_y == 0)
        assert app.screen.query(ApprovalPrompt)  # still asking: scrolling decides nothing


async def test_tab_from_an_approval_goes_to_the_next_pane_in_one_press(
    request: pytest.FixtureRequest,
) -> None:
    """Found by a new-user trial: a diff taller than the prompt took a Tab stop of its own (a
    scrolled area is focusable), so Tab from the approval seemed to do nothing; ↑/↓ on the
    prompt scroll it."""
    build = _app_factory(request.node.name, LONG_EDIT)
    app = build()
    (app.settings.workspace / "notes.txt").write_text(LONG_FILE)
    async with app.run_test(size=(80, 24)) as pilot:
        await _until_approval(pilot)
        screen = app.screen
        assert isinstance(screen, MainScreen)
        assert screen.query_one(ApprovalPrompt).query_one("#details").max_scroll_y > 0
        await pilot.press("tab")
        await wait_until(pilot, lambda: app.focused is screen.job_tree)
        await pilot.press("shift+tab")
        await wait_until(pilot, lambda: isinstance(app.focused, ApprovalPrompt))


NOTES_WRITE = [
    Turn("Saving the notes.", [("write_file", {"path": "notes.md", "content": "agent notes\n"})]),
    Turn("Saved."),
]


async def test_a_file_changed_while_its_approval_is_on_screen_is_not_overwritten_unseen(
    request: pytest.FixtureRequest,
) -> None:
    """Found by a new-user trial: allowing a write showed a diff made when the agent asked;
    the file had been edited by hand since, and the edit was overwritten without being shown.
    Allowing now checks the file first: changed, nothing is answered and the approval comes
    back with the change as of now; allowed again, the write goes ahead."""
    app = _app_factory(request.node.name, NOTES_WRITE)()
    notes = app.settings.workspace / "notes.md"
    notes.write_text("first notes\n")
    async with app.run_test(size=(100, 36)) as pilot:
        await _until_approval(pilot)
        screen = app.screen
        assert isinstance(screen, MainScreen)
        prompt = screen.query_one(ApprovalPrompt)
        assert "-first notes" in "\n".join(_diff_lines(prompt))
        assert not prompt.query(".prompt-changed")

        notes.write_text("MY HAND EDIT\n")
        await pilot.press("y")

        def shown_again() -> bool:
            docked = screen.query(ApprovalPrompt)
            return bool(docked) and bool(docked.first().query(".prompt-changed"))

        await wait_until(pilot, shown_again)
        again = screen.query_one(ApprovalPrompt)
        diff = "\n".join(_diff_lines(again))
        assert "-MY HAND EDIT" in diff and "+agent notes" in diff
        assert notes.read_text() == "MY HAND EDIT\n"
        run = screen.selected_run
        assert run is not None
        stored = await app.runtime.store.get_run(run.id)
        assert stored.state.value == "input_required"
        await wait_until(pilot, lambda: isinstance(app.focused, ApprovalPrompt))

        await pilot.press("y")
        await wait_until(pilot, lambda: notes.read_text() == "agent notes\n")


def _diff_lines(prompt: ApprovalPrompt) -> list[str]:
    diffs = [w.content for w in prompt.query(".prompt-diff").results(Static)]
    return [line for diff in diffs if isinstance(diff, Syntax) for line in diff.code.splitlines()]


@pytest.mark.sandbox
@pytest.mark.parametrize("size", [(80, 24), (140, 45)], ids=["80x24", "140x45"])
def test_snapshot_of_a_shell_approval(
    snap_compare: Any, request: pytest.FixtureRequest, size: tuple[int, int]
) -> None:
    app = _app_factory(request.node.name, SHELL)()
    assert snap_compare(app, terminal_size=size, run_before=_until_approval)


@pytest.mark.sandbox
@pytest.mark.parametrize("size", [(80, 24), (140, 45)], ids=["80x24", "140x45"])
def test_snapshot_of_an_edit_approval(
    snap_compare: Any, request: pytest.FixtureRequest, size: tuple[int, int]
) -> None:
    app = _app_factory(request.node.name, EDIT)()
    assert snap_compare(app, terminal_size=size, run_before=_until_approval)


def _applied_diff(screen: MainScreen) -> str | None:
    for view in screen.query(ToolCallView):
        found = view.query("#applied-diff").results(Static)
        shown = next(found, None)
        if shown is None:
            continue  # mounted, its parts composed in a moment
        if view.tool_name == "edit_file" and shown.display:
            content = shown.content
            assert isinstance(content, Syntax)
            return content.code
    return None


async def test_after_an_approved_edit_the_transcript_shows_the_diff_it_applied(
    request: pytest.FixtureRequest,
) -> None:
    build = _app_factory(request.node.name, EDIT)
    app = build()
    async with app.run_test(size=(140, 45)) as pilot:
        await _until_approval(pilot)
        await pilot.press("y")
        screen = app.screen
        assert isinstance(screen, MainScreen)
        await wait_until(pilot, lambda: _applied_diff(screen) is not None)
        diff = _applied_diff(screen)
        assert diff is not None
        assert '-    print("hello")' in diff and '+    print("hi")' in diff
        assert "a/src/main.py" in diff and "b/src/main.py" in diff
        job_id = screen.selected_job.id if screen.selected_job else None
    assert job_id is not None

    base = ROOT / request.node.name  # the same database, opened again: the diff is still there

    async def reopen() -> Runtime:
        return await Runtime.open(
            db_path=base / "agent-tui.db", workspace=base / "project", config=Config()
        )

    settings = Settings(
        workspace=base / "project",
        remember_theme=False,
        open_job=job_id,
        prompt_settle_seconds=0,
    )
    app = create_app(reopen, settings)
    async with app.run_test(size=(140, 45)) as pilot:
        screen = app.screen
        assert isinstance(screen, MainScreen)
        await wait_until(pilot, lambda: _applied_diff(screen) is not None)
        assert '+    print("hi")' in (_applied_diff(screen) or "")


LONG_WRITE = [
    Turn(
        "Writing the notes.",
        [
            (
                "write_file",
                {"path": "notes.md", "content": "".join(f"- note {i}\n" for i in range(60))},
            )
        ],
    )
]


@pytest.mark.parametrize("size", [(80, 24), (140, 45)], ids=["80x24", "140x45"])
async def test_the_reason_field_of_a_denial_is_on_screen_however_long_the_diff(
    request: pytest.FixtureRequest, size: tuple[int, int]
) -> None:
    """r (deny with a reason) focused a field below the diff: at 80x24 it was cut off, and
    what a person typed there showed nowhere (found by a new-user trial)."""
    app = _app_factory(request.node.name, LONG_WRITE)()
    async with app.run_test(size=size) as pilot:
        await _until_approval(pilot)
        prompt = app.screen.query_one(ApprovalPrompt)
        await pilot.press("r")
        reason = prompt.query_one("#reason", Input)
        await wait_until(pilot, lambda: app.focused is reason)
        await pilot.press(*"too long")
        await pilot.pause()
        assert reason.region.height >= 1
        assert prompt.region.contains_region(reason.region)
        assert app.screen.region.contains_region(reason.region)
        assert reason.value == "too long"
        # The keys stay visible above it, and Esc goes back to them; the footer says so, and
        # what Enter does (it showed the screen's "esc Leave" and nothing about Enter).
        assert prompt.query_one(".prompt-keys").region.height >= 1
        footer = {
            key: active.binding.description
            for key, active in app.screen.active_bindings.items()
            if active.binding.show
        }
        assert footer.get("enter") == "Send the reason", footer
        assert footer.get("escape") == "Back to the keys", footer
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.focused is prompt)
        assert not prompt.has_class("-reason") and prompt.is_attached
        screen = app.screen
        assert isinstance(screen, MainScreen) and screen.selected_run is not None
        run = await screen.runtime.get_run(screen.selected_run.id)
        assert run.state.value == "input_required"  # still waiting for the answer


async def test_an_approval_of_a_job_in_another_folder_names_that_folder(
    db_path: Path, workspace: Path, tmp_path: Path
) -> None:
    """Found by a new-user trial: a job started in another folder asked to write
    agent-notes.md, and nothing said the file was not in the folder agent-tui was opened in."""
    other = tmp_path / "other-project"
    other.mkdir()
    (other / "README.md").write_text("# Other\n")
    elsewhere = await open_runtime(db_path, other)
    here = await open_runtime(db_path, workspace)
    try:
        run = await elsewhere.start("summarise")
        boundary = await elsewhere.wait(run.id, timeout=10)
        assert boundary.request is not None
        await elsewhere.respond(run.id, boundary.request.id, boundary.request.options[0])
        boundary = await elsewhere.wait(run.id, timeout=10)
        assert boundary.request is not None and boundary.request.kind.value == "approval"
        settings = Settings(
            workspace=workspace,
            open_job=run.job_id,
            remember_theme=False,
            prompt_settle_seconds=0,
        )
        app = create_app(here, settings)
        async with app.run_test(size=(100, 30)) as pilot:
            await wait_until(pilot, lambda: app.screen.query(ApprovalPrompt))
            shown = "\n".join(_shown(app.screen.query_one(ApprovalPrompt)))
            assert f"in {other.resolve()} — this job's folder, not this one" in shown
    finally:
        await here.close()
        await elsewhere.close()
