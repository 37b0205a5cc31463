"""Retrying, in the TUI, a run whose last call has an unknown outcome (issue 12 point 10): `R`
or `/retry` shows the call (the shell command, the file, the tool and its arguments) and offers
run it again / continue without it / fork; nothing runs until the person chooses, and the state
text is the database's (`failed · tool outcome unknown`). A Claude run retried with no key is a
clear configuration error that adds no run (point 12)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from runtime.api import Runtime
from runtime.config import Config, Permissions
from runtime.errors import ToolOutcomeUnknown
from runtime.models import Role, RunState, ToolResultBlock
from runtime.tools.base import ToolContext, ToolOutput
from tests.fakes.anthropic_server import FakeAnthropicServer, error_response
from tests.fakes.scripted import ScriptedProvider, Turn
from tests.tui.helpers import SIZE, make_app, notifications, screen_text, wait_until
from tests.tui.test_snapshots import ROOT
from tui.app import AgentTuiApp, Settings, create_app
from tui.screens.main import MainScreen
from tui.widgets.key_footer import FooterKey
from tui.widgets.retry_choice import RetryChoice
from tui.widgets.status_line import StatusLine

WAIT = 30


class UnknownOnce:
    """A tool that acts; its first call ends with an unknown outcome (as when agent-tui dies
    while it runs, or an MCP server stops answering mid-call)."""

    read_only = False
    approval_default = "allow"

    def __init__(self, name: str, properties: dict[str, Any]) -> None:
        self.name = name
        self.description = f"the {name} tool of the test"
        self.input_schema: dict[str, Any] = {"type": "object", "properties": properties}
        self.calls = 0

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        self.calls += 1
        if self.calls == 1:
            raise ToolOutcomeUnknown("the process running it stopped")
        return ToolOutput(content=f"ran {self.name} again")

    def approval_detail(self, arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        return {}


class Look(UnknownOnce):
    read_only = True

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        return ToolOutput(content="looked")


SHELL_COMMAND = "sleep 2; echo x >> out.log"
CALLS = {
    "shell": ({"command": {"type": "string"}}, {"command": SHELL_COMMAND}, f"$ {SHELL_COMMAND}"),
    "write_file": (
        {"path": {"type": "string"}, "content": {"type": "string"}},
        {"path": "notes/todo.md", "content": "- one\n"},
        "notes/todo.md",
    ),
    "files__move": (
        {"source": {"type": "string"}, "target": {"type": "string"}},
        {"source": "a.txt", "target": "b.txt"},
        '{"source": "a.txt", "target": "b.txt"}',
    ),
}


async def _failed_runtime(
    db_path: Path, workspace: Path, name: str, *, look_first: bool = False, after: int = 1
) -> tuple[Runtime, ScriptedProvider, UnknownOnce, str, str]:
    """A runtime whose one job's run failed with ``name``'s call in doubt; the scripted model
    answers ``after`` more turns with "all done"."""
    properties, arguments, _ = CALLS[name]
    tool = UnknownOnce(name, properties)
    script = [Turn("", [(name, arguments)])]
    if look_first:
        script.insert(0, Turn("first a look", [("look", {})]))
    script += [Turn("all done")] * after
    provider = ScriptedProvider(script)
    runtime = await Runtime.open(
        db_path=db_path,
        workspace=workspace,
        config=Config(permissions=Permissions(allow=[name, "look"])),
        model="scripted:test",
        providers=lambda reference: provider,
        tools={name: tool, "look": Look("look", {})},
    )
    run = await runtime.start("do the thing")
    failed = await runtime.wait(run.id, timeout=WAIT)
    assert failed.state is RunState.FAILED, failed
    assert failed.run.failure is not None and failed.run.failure.code == "tool_indeterminate"
    return runtime, provider, tool, run.id, run.job_id


def _main(app: AgentTuiApp) -> MainScreen:
    screen = app.screen
    assert isinstance(screen, MainScreen)
    return screen


async def _open_failed_run(pilot: Any, app: AgentTuiApp, run_id: str) -> MainScreen:
    """Until the failed run is on screen with its state, then focus off the composer."""
    screen = _main(app)
    await wait_until(
        pilot,
        lambda: (
            screen.selected_run is not None
            and screen.selected_run.id == run_id
            and "failed · tool outcome unknown" in str(screen.query_one(StatusLine).render())
        ),
    )
    await pilot.press("escape")  # from the composer to the browser: letters are keys there
    await wait_until(pilot, lambda: not screen.typing())
    return screen


async def _press_retry(pilot: Any, screen: MainScreen) -> RetryChoice:
    await pilot.press("R")
    await wait_until(pilot, lambda: bool(screen.query(RetryChoice)))
    choice = screen.query_one(RetryChoice)
    await wait_until(pilot, lambda: screen.focused is choice)
    return choice


def _key_errors(app: AgentTuiApp) -> int:
    return sum("ANTHROPIC_API_KEY is not set" in n for n in notifications(app))


def _last_tool_results(provider: ScriptedProvider) -> list[tuple[str, bool]]:
    [tool_message] = [m for m in provider.requests[-1].messages if m.role is Role.TOOL][-1:]
    return [
        (b.content if isinstance(b.content, str) else str(b.content), b.is_error)
        for b in tool_message.content
        if isinstance(b, ToolResultBlock)
    ]


async def test_the_notice_of_runs_waiting_here_names_a_tool_in_doubt_as_such(
    db_path: Path, workspace: Path
) -> None:
    """Found by a new-user trial: a run that failed because its MCP server died mid-call was
    counted as "interrupted by a quit or a crash"."""
    runtime, _, _, _, _ = await _failed_runtime(db_path, workspace, "write_file")
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(pilot, lambda: any("to be resumed" in n for n in notifications(app)))
            [notice] = [n for n in notifications(app) if "to be resumed" in n]
            assert "1 run waits to be resumed here (1 with a tool's outcome unknown;" in notice
            assert "quit or a crash" not in notice
    finally:
        await runtime.close()


@pytest.mark.parametrize(
    "name", [pytest.param("shell", marks=pytest.mark.sandbox), *(n for n in CALLS if n != "shell")]
)
async def test_retry_shows_the_call_in_doubt_and_runs_nothing_until_the_person_chooses(
    db_path: Path, workspace: Path, name: str
) -> None:
    runtime, _, tool, run_id, job_id = await _failed_runtime(db_path, workspace, name)
    try:
        app = make_app(runtime, workspace, open_job=job_id)
        async with app.run_test(size=SIZE) as pilot:
            screen = await _open_failed_run(pilot, app, run_id)
            status = str(screen.query_one(StatusLine).render())
            assert "failed · tool outcome unknown" in status and "interrupted" not in status
            assert "Failed · tool outcome unknown" in screen_text(app)  # the banner

            choice = await _press_retry(pilot, screen)
            shown = screen_text(app)
            assert "The outcome of this call is unknown" in shown
            assert f"{name}  {CALLS[name][2]}" in shown
            assert "1. Run it again" in shown
            assert "2. Continue without it (the model is told the outcome is unknown)" in shown
            assert "3. Fork — no checkpoint before the call" in shown  # it was the first step
            assert not screen.composer.display
            assert tool.calls == 1 and len(await runtime.job_runs(job_id)) == 1

            # Only the choice's keys work (and show in the footer) while it is open; other
            # letters do nothing (n would start a new job elsewhere).
            enabled = {b.binding.action for b in app.active_bindings.values() if b.enabled}
            assert "choose('skip')" in enabled and "dismiss" in enabled
            assert not enabled & {"new_job", "retry", "archive_job", "cancel_run"}
            await pilot.press("n", "x", "R")
            # Fork is not possible without a checkpoint: refused, nothing created.
            await pilot.press("3")
            await wait_until(pilot, lambda: any("no checkpoint" in n for n in notifications(app)))
            assert screen.query_one(RetryChoice) is choice

            await pilot.press("escape")
            await wait_until(pilot, lambda: not screen.query(RetryChoice))
            assert any("Nothing was retried" in n for n in notifications(app))
            assert screen.composer.display
            assert tool.calls == 1
            runs = await runtime.job_runs(job_id)
            assert [(r.id, r.state) for r in runs] == [(run_id, RunState.FAILED)]
            assert len((await runtime.list_jobs()).items) == 1
    finally:
        await runtime.close()


@pytest.mark.sandbox
async def test_continue_without_it_completes_the_run_and_tells_the_model_what_was_attempted(
    db_path: Path, workspace: Path
) -> None:
    runtime, provider, tool, run_id, job_id = await _failed_runtime(db_path, workspace, "shell")
    try:
        app = make_app(runtime, workspace, open_job=job_id)
        async with app.run_test(size=SIZE) as pilot:
            screen = _main(app)
            await wait_until(
                pilot, lambda: screen.selected_run is not None and screen.selected_run.id == run_id
            )
            # /retry in the composer offers the same choice as R.
            screen.composer.focus_input()
            await wait_until(pilot, lambda: screen.typing())
            await pilot.press(*"/retry", "enter")
            await wait_until(pilot, lambda: bool(screen.query(RetryChoice)))
            await pilot.press("2")
            await wait_until(
                pilot,
                lambda: (
                    screen.selected_run is not None
                    and screen.selected_run.id != run_id
                    and screen.selected_run.state is RunState.COMPLETED
                ),
                timeout=WAIT,
            )
            assert "completed" in str(screen.query_one(StatusLine).render())
        assert tool.calls == 1  # not run again
        [(text, is_error)] = _last_tool_results(provider)
        assert is_error and "outcome of this call is unknown" in text
        assert f"shell {SHELL_COMMAND}" in text
        runs = await runtime.job_runs(job_id)
        assert [r.state for r in runs] == [RunState.FAILED, RunState.COMPLETED]
        assert runs[1].retry_of_run_id == run_id
    finally:
        await runtime.close()


@pytest.mark.sandbox
async def test_run_it_again_runs_the_call_once_more_and_completes(
    db_path: Path, workspace: Path
) -> None:
    runtime, provider, tool, run_id, job_id = await _failed_runtime(db_path, workspace, "shell")
    try:
        app = make_app(runtime, workspace, open_job=job_id)
        async with app.run_test(size=SIZE) as pilot:
            screen = await _open_failed_run(pilot, app, run_id)
            await _press_retry(pilot, screen)
            await pilot.press("r")
            await wait_until(
                pilot,
                lambda: (
                    screen.selected_run is not None
                    and screen.selected_run.id != run_id
                    and screen.selected_run.state is RunState.COMPLETED
                ),
                timeout=WAIT,
            )
        assert tool.calls == 2
        assert _last_tool_results(provider) == [("ran shell again", False)]
        runs = await runtime.job_runs(job_id)
        assert [r.state for r in runs] == [RunState.FAILED, RunState.COMPLETED]
    finally:
        await runtime.close()


@pytest.mark.sandbox
async def test_fork_from_the_choice_starts_a_new_job_from_the_last_checkpoint(
    db_path: Path, workspace: Path
) -> None:
    runtime, _, tool, run_id, job_id = await _failed_runtime(
        db_path, workspace, "shell", look_first=True
    )
    try:
        [*_, checkpoint] = await runtime.checkpoints(run_id)
        app = make_app(runtime, workspace, open_job=job_id)
        async with app.run_test(size=SIZE) as pilot:
            screen = await _open_failed_run(pilot, app, run_id)
            await _press_retry(pilot, screen)
            assert "3. Fork from the last checkpoint" in screen_text(app)
            await pilot.press("f")
            await wait_until(
                pilot,
                lambda: (
                    screen.selected_job is not None
                    and screen.selected_job.id != job_id
                    and screen.selected_run is not None
                    and screen.selected_run.state is RunState.COMPLETED
                ),
                timeout=WAIT,
            )
            forked = screen.selected_run
        assert forked.forked_from_checkpoint_id == checkpoint.id
        assert tool.calls == 1  # the fork's model answered without calling it
        assert [r.id for r in await runtime.job_runs(job_id)] == [run_id]  # left as it was
    finally:
        await runtime.close()


async def test_retrying_a_claude_run_without_a_key_says_so_and_adds_no_run(
    db_path: Path, workspace: Path
) -> None:
    async with FakeAnthropicServer(
        [error_response(400, "invalid_request_error", "this request is refused")]
    ) as server:
        keyed = await Runtime.open(
            db_path=db_path,
            workspace=workspace,
            config=Config(),
            model="anthropic:claude-test",
            env={"ANTHROPIC_API_KEY": "sk-ant-test", "ANTHROPIC_BASE_URL": server.base_url},
        )
        try:
            run = await keyed.start("summarise this project")
            assert (await keyed.wait(run.id, timeout=WAIT)).state is RunState.FAILED
        finally:
            await keyed.close()

    runtime = await Runtime.open(db_path=db_path, workspace=workspace, config=Config(), env={})
    try:
        app = make_app(runtime, workspace, open_job=run.job_id)
        async with app.run_test(size=SIZE) as pilot:
            screen = _main(app)
            await wait_until(
                pilot, lambda: screen.selected_run is not None and screen.selected_run.id == run.id
            )
            await pilot.press("escape")
            await wait_until(pilot, lambda: not screen.typing())
            for _ in range(2):  # each R says so again, and adds nothing
                app.clear_notifications()
                await pilot.press("R")
                await wait_until(pilot, lambda: _key_errors(app) == 1)
                assert not any("Error:" in n for n in notifications(app))  # not internal
                assert not screen.query(RetryChoice)
                assert len(await runtime.job_runs(run.job_id)) == 1
        runs = await runtime.job_runs(run.job_id)
        assert [r.id for r in runs] == [run.id]
        assert runs[0].state is RunState.FAILED
    finally:
        await runtime.close()


async def test_ctrl_t_from_the_browser_while_the_retry_choice_is_open_says_to_choose_first(
    db_path: Path, workspace: Path
) -> None:
    """ctrl+t gave the keys to the composer hidden under the open choice: what was typed next
    went into a box nobody saw, and nothing said why."""
    runtime, _, tool, run_id, job_id = await _failed_runtime(db_path, workspace, "write_file")
    try:
        app = make_app(runtime, workspace, open_job=job_id)
        async with app.run_test(size=SIZE) as pilot:
            screen = await _open_failed_run(pilot, app, run_id)
            choice = await _press_retry(pilot, screen)
            screen.job_tree.focus()
            await wait_until(pilot, lambda: screen.focused is screen.job_tree)
            await pilot.press("ctrl+t")
            await wait_until(
                pilot, lambda: any("Choose how to retry" in n for n in notifications(app))
            )
            await wait_until(pilot, lambda: screen.focused is choice)
            await pilot.press("z")  # not a choice's key: nothing, and not typed out of sight
            assert not screen.composer.display
            assert screen.composer.input.text == ""
            assert screen.query_one(RetryChoice) is choice
            assert tool.calls == 1
    finally:
        await runtime.close()


def _snapshot_app(name: str) -> Any:
    """The app on a database whose one run failed with a shell call in doubt, at a fixed path
    (the path is on screen); it opens that run (``--continue``)."""
    base = ROOT / name
    shutil.rmtree(base, ignore_errors=True)
    workspace = base / "project"
    workspace.mkdir(parents=True)

    async def opener() -> Runtime:
        runtime, *_ = await _failed_runtime(base / "agent-tui.db", workspace, "shell")
        return runtime

    settings = Settings(
        workspace=workspace,
        theme="agent-dusk",
        hide_ages=True,
        remember_theme=False,
        continue_last=True,
        prompt_settle_seconds=0,
    )
    return create_app(opener, settings)


async def _until_choice(pilot: Pilot[Any]) -> None:
    screen = _main(pilot.app)  # type: ignore[arg-type]
    await wait_until(
        pilot,
        lambda: (
            screen.selected_run is not None
            and "failed · tool outcome unknown" in screen.status.text
        ),
    )
    await pilot.press("escape")
    await wait_until(pilot, lambda: not screen.typing())
    await _press_retry(pilot, screen)
    pilot.app.clear_notifications()
    await pilot.pause(0.3)
    await pilot.wait_for_scheduled_animations()


@pytest.mark.sandbox
@pytest.mark.parametrize("size", [(80, 24), (140, 45)], ids=["80x24", "140x45"])
async def test_the_retry_choice_fits_with_its_keys_visible(
    request: pytest.FixtureRequest, size: tuple[int, int]
) -> None:
    app = _snapshot_app(request.node.name)
    async with app.run_test(size=size) as pilot:
        await _until_choice(pilot)
        choice = app.screen.query_one(RetryChoice)
        keys = choice.query_one(".retry-keys")
        assert keys.region.height >= 1 and keys.region.bottom <= app.size.height
        assert f"$ {SHELL_COMMAND}" in screen_text(app)


@pytest.mark.sandbox
@pytest.mark.parametrize("size", [(80, 24), (140, 45)], ids=["80x24", "140x45"])
def test_snapshot_of_the_retry_choice(
    snap_compare: Any, request: pytest.FixtureRequest, size: tuple[int, int]
) -> None:
    app = _snapshot_app(request.node.name)
    assert snap_compare(app, terminal_size=size, run_before=_until_choice)


def _footer(screen: MainScreen) -> list[str]:
    """The footer's keys as drawn: "R Retry", "f Fork", …"""
    return [f"{key.key} {key.description}" for key in screen.query(FooterKey)]


async def test_the_footer_offers_retry_on_a_failed_run_nothing_went_past(
    db_path: Path, workspace: Path
) -> None:
    runtime, _, tool, run_id, job_id = await _failed_runtime(db_path, workspace, "write_file")
    try:
        app = make_app(runtime, workspace, open_job=job_id)
        async with app.run_test(size=SIZE) as pilot:
            screen = await _open_failed_run(pilot, app, run_id)
            await pilot.press("g")  # the conversation pane
            await wait_until(
                pilot, lambda: screen.focused in screen.conversation.walk_children(with_self=True)
            )
            await wait_until(pilot, lambda: "R Retry" in _footer(screen))
            assert "f Fork" not in _footer(screen)  # in the conversation, as it always was
        assert tool.calls == 1
    finally:
        await runtime.close()


async def test_r_on_a_failed_run_a_later_follow_up_went_past_shows_the_refusal_and_runs_nothing(
    db_path: Path, workspace: Path
) -> None:
    """Found by a new-user trial: the retry of such a run went on from its checkpoint without
    the later turns, and the TUI drew one straight conversation as if nothing was dropped."""
    runtime, _, tool, run_id, job_id = await _failed_runtime(db_path, workspace, "write_file")
    try:
        follow_up = await runtime.follow_up(job_id, "go on anyway")
        assert (await runtime.wait(follow_up.id, timeout=WAIT)).state is RunState.COMPLETED
        app = make_app(runtime, workspace, open_job=job_id)
        async with app.run_test(size=SIZE) as pilot:
            screen = _main(app)
            await wait_until(
                pilot,
                lambda: screen.selected_run is not None and screen.selected_run.id == follow_up.id,
            )
            node = screen.job_tree.job_node(job_id)
            assert node is not None and not node.data.interrupted  # no ⚠ on the job
            # The person opens the failed run from the browser.
            tree = screen.job_tree
            await wait_until(pilot, lambda: tree.run_node(run_id) is not None)
            tree.focus()
            tree.select_run(run_id)
            await pilot.press("enter")
            screen = await _open_failed_run(pilot, app, run_id)
            shown = screen_text(app)
            assert "Later runs continued this job: f fork from its last checkpoint" in shown
            assert "R to choose" not in shown
            assert "R retry" not in str(screen.query_one(StatusLine).render())
            # Found by review: the footer still offered R Retry, a key that only refuses.
            for pane in ("b", "g"):  # the browser, the conversation
                await pilot.press(pane)
                await wait_until(pilot, lambda: "f Fork" in _footer(screen))
                assert not any("Retry" in key for key in _footer(screen)), _footer(screen)

            await pilot.press("R")
            await wait_until(
                pilot, lambda: any("cannot be retried" in n for n in notifications(app))
            )
            [refusal] = [n for n in notifications(app) if "cannot be retried" in n]
            assert f"the latest is run {follow_up.id}" in refusal
            assert not screen.query(RetryChoice)
            assert not any("to be resumed" in n for n in notifications(app))
        assert tool.calls == 1
        runs = await runtime.job_runs(job_id)
        assert [(r.id, r.state) for r in runs] == [
            (run_id, RunState.FAILED),
            (follow_up.id, RunState.COMPLETED),
        ]
    finally:
        await runtime.close()
