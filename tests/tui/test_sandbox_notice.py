"""Where bubblewrap is missing or cannot start, the TUI says so once (a notification, and the
status line for as long as it runs) and a `shell` call that a rule allows asks first anyway; where
the sandbox works, nothing is said and the rule counts (issue 12, "a sandboxed shell")."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.api import Runtime
from runtime.config import Config, Permissions
from runtime.models import InputKind, RunState
from runtime.tools.sandbox import ENV_BWRAP, sandbox_status
from tests.fakes.scripted import ScriptedProvider, Turn
from tests.tui.helpers import SIZE, make_app, notifications, wait_until
from tui.screens.main import MainScreen
from tui.widgets.approval_prompt import ApprovalPrompt
from tui.widgets.status_line import SANDBOX_HINT, StatusLine

WAIT = 30


def _broken_bwrap(folder: Path) -> Path:
    program = folder / "bwrap"
    program.write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n"
    )
    program.chmod(0o755)
    return program


async def _open(db_path: Path, workspace: Path, provider: ScriptedProvider) -> Runtime:
    return await Runtime.open(
        db_path=db_path,
        workspace=workspace,
        config=Config(permissions=Permissions(allow=["shell"])),
        model="scripted:test",
        providers=lambda reference: provider,
    )


@pytest.mark.parametrize("broken", ["missing", "cannot start"])
async def test_without_a_working_sandbox_the_status_line_says_so_and_an_allowed_shell_call_asks(
    db_path: Path,
    workspace: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    broken: str,
) -> None:
    program = tmp_path / "no-such-bwrap" if broken == "missing" else _broken_bwrap(tmp_path)
    monkeypatch.setenv(ENV_BWRAP, str(program))
    why = "no-such-bwrap not found" if broken == "missing" else "No permissions to create"
    provider = ScriptedProvider(
        [Turn("", [("shell", {"command": "echo hi > said.txt"})]), Turn("done")]
    )
    runtime = await _open(db_path, workspace, provider)
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            screen = app.screen
            assert isinstance(screen, MainScreen)
            status = screen.query_one(StatusLine)
            await wait_until(pilot, lambda: SANDBOX_HINT in str(status.render()))
            await wait_until(pilot, lambda: any(why in n for n in notifications(app)))
            assert sum(why in n for n in notifications(app)) == 1

            await pilot.press(*"write a file", "enter")
            await wait_until(pilot, lambda: bool(screen.query(ApprovalPrompt)), timeout=WAIT)
            assert screen.open_request is not None
            assert screen.open_request.kind is InputKind.APPROVAL
            assert screen.open_request.prompt == "Allow shell?"
            assert not (workspace / "said.txt").exists()  # the allow rule did not run it
            assert SANDBOX_HINT in str(status.render())  # still said while the run waits

            run_id = screen.open_request.run_id
            await pilot.press("y")
            await wait_until(
                pilot,
                lambda: (
                    screen.selected_run is not None
                    and screen.selected_run.state is RunState.COMPLETED
                ),
                timeout=WAIT,
            )
            assert (workspace / "said.txt").read_text() == "hi\n"
            # Said once: no second notification however many calls ask (the first one may
            # have timed out by now on a slow machine).
            assert sum(why in n for n in notifications(app)) <= 1
        assert (await runtime.get_run(run_id)).state is RunState.COMPLETED
    finally:
        await runtime.close()


async def test_where_the_sandbox_works_nothing_is_said_and_the_allow_rule_counts(
    db_path: Path, workspace: Path
) -> None:
    if not sandbox_status().available:
        pytest.skip(f"no shell sandbox here: {sandbox_status().detail}")
    provider = ScriptedProvider(
        [Turn("", [("shell", {"command": "echo hi > said.txt"})]), Turn("done")]
    )
    runtime = await _open(db_path, workspace, provider)
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            screen = app.screen
            assert isinstance(screen, MainScreen)
            await pilot.press(*"write a file", "enter")
            await wait_until(
                pilot,
                lambda: (
                    screen.selected_run is not None
                    and screen.selected_run.state is RunState.COMPLETED
                ),
                timeout=WAIT,
            )
            assert not screen.query(ApprovalPrompt)
            assert (workspace / "said.txt").read_text() == "hi\n"
            assert SANDBOX_HINT not in str(screen.query_one(StatusLine).render())
            assert not any("sandbox" in n for n in notifications(app))
    finally:
        await runtime.close()
