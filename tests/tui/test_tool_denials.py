"""A tool call refused before it ran says at a glance who refused it — a ``before_tool`` hook
(named by its shown command, secrets masked), the permission rules, the person — on a line of
its own, not only folded in its result like any failed call (found by a new-user trial: a
hook's denial looked like a tool error)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from runtime.api import Runtime
from runtime.config import Config, Permissions
from runtime.hooks import HookEntry, HooksConfig
from runtime.models import RunState, ToolCallState
from tests.fakes.scripted import ScriptedProvider, Turn
from tests.tui.helpers import SIZE, main_screen, make_app, screen_text, wait_until
from tui.widgets.tool_call_view import ToolCallView

WAIT = 30
SECRET = "s3cret-token-value"
DENY_LOCKS = """
import json, sys
call = json.load(sys.stdin)
path = str(call["arguments"].get("path", ""))
if path.endswith(".lock"):
    print(json.dumps({"decision": "deny", "reason": f"{path} is generated; edit the manifest"}))
"""


@pytest.fixture(autouse=True)
def user_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No hooks or rules of the machine's own user config."""
    home = tmp_path / "home"
    (home / ".config").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))


async def _refused_calls(db_path: Path, workspace: Path, tmp_path: Path) -> tuple[Runtime, str]:
    """A runtime whose one run asked for three calls: a write a hook denies, a shell call the
    rules deny, a read that fails on its own; the job's id."""
    hook = tmp_path / "hooks" / "no_locks.py"
    hook.parent.mkdir()
    hook.write_text(DENY_LOCKS)
    config = Config(
        permissions=Permissions(allow=["write_file", "read_file"], deny=["shell"]),
        hooks=HooksConfig(
            before_tool=[
                HookEntry(matcher="write_file", command=f"TOKEN={SECRET} {sys.executable} {hook}")
            ]
        ),
    )
    calls = [
        ("write_file", {"path": "poetry.lock", "content": "pinned"}),
        ("shell", {"command": "rm -rf build"}),
        ("read_file", {"path": "missing.txt"}),
    ]
    provider = ScriptedProvider([Turn(tool_calls=calls), Turn("done")])
    runtime = await Runtime.open(
        db_path=db_path,
        workspace=workspace,
        config=config,
        model="scripted:test",
        providers=lambda reference: provider,
    )
    run = await runtime.start("update things")
    assert (await runtime.wait(run.id, timeout=WAIT)).state is RunState.COMPLETED
    states = {c.name: c.state for c in await runtime.tool_calls(run.id)}
    assert set(states.values()) == {ToolCallState.FAILED}, states
    return runtime, run.job_id


async def test_a_hooks_denial_names_the_hook_on_its_own_line_and_reads_like_the_rules(
    db_path: Path, workspace: Path, tmp_path: Path
) -> None:
    runtime, job_id = await _refused_calls(db_path, workspace, tmp_path)
    try:
        app = make_app(runtime, workspace, open_job=job_id)
        async with app.run_test(size=SIZE) as pilot:
            screen = main_screen(app)

            def blocks() -> dict[str, ToolCallView]:
                return {view.tool_name: view for view in screen.query(ToolCallView)}

            await wait_until(pilot, lambda: len(blocks()) == 3)
            await pilot.pause()
            shown = screen_text(app)
            hook_line = (
                f"denied by hook `{sys.executable} {tmp_path / 'hooks' / 'no_locks.py'}`:"
                " poetry.lock is generated; edit the manifest"
            )
            assert hook_line in shown
            assert "denied by the permission rules" in shown
            assert SECRET not in shown
            # The result folds stay folded: the lines above are what a glance shows.
            assert not any(view.result_expanded for view in blocks().values())
            denied = [name for name, view in blocks().items() if view.has_class("-denied")]
            assert sorted(denied) == ["shell", "write_file"]
            # A call that failed on its own is no denial.
            assert not blocks()["read_file"].query_one(".tool-denial").display
    finally:
        await runtime.close()
