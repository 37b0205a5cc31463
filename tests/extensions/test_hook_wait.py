"""A tool call that a ``before_tool`` hook checks first is not running until the hook lets it
through (DESIGN §4.2, §16): while a slow hook decides, the call stays ``pending`` in the store
(so ``agent-tui show`` says so), says which hook it waits for (``tool_progress``), and a
``kill -9`` meanwhile leaves a call that never ran, not one whose outcome is unknown. Before,
the call was ``running`` from before the hook started: the TUI and ``show`` said the tool ran
while a 20-second hook was still deciding whether it might."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from runtime.api import Runtime
from runtime.config import Config, Permissions
from runtime.events import ToolProgress
from runtime.hooks import HookEntry, HooksConfig
from runtime.models import RunState, ToolCallState
from tests.cli.harness import agent_tui_command
from tests.extensions.conftest import Factory
from tests.fakes.scripted import ScriptedProvider, Turn

ROOT = Path(__file__).resolve().parents[2]
WAIT = 30

HELD_HOOK = """
import json, os, sys, time
json.load(sys.stdin)
ready, release = sys.argv[1], sys.argv[2]
with open(ready + ".tmp", "w") as marker:
    marker.write(str(os.getpid()))
os.rename(ready + ".tmp", ready)
deadline = time.monotonic() + 60
while not os.path.exists(release):
    if time.monotonic() > deadline:
        sys.exit("never released")
    time.sleep(0.01)
"""


def held_hook(folder: Path) -> tuple[str, Path, Path]:
    """A hook command that lets the call through once ``release`` exists (after at most a
    minute it fails instead); it writes its pid to ``ready`` as it starts."""
    hook = folder / "hooks" / "held.py"
    hook.parent.mkdir(parents=True, exist_ok=True)
    hook.write_text(HELD_HOOK)
    ready, release = folder / "hook.ready", folder / "hook.release"
    return f"{sys.executable} {hook} {ready} {release}", ready, release


async def _agent_tui_show(db: Path, run_id: str, env: dict[str, str]) -> str:
    process = await asyncio.create_subprocess_exec(
        *agent_tui_command(),
        "--db",
        str(db),
        "show",
        run_id,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    async with asyncio.timeout(WAIT):
        out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    return out.decode()


async def test_a_call_waits_pending_and_names_its_hook_until_the_hook_lets_it_run(
    make_runtime: Factory, db_path: Path, tmp_path: Path
) -> None:
    command, _, release = held_hook(tmp_path)
    config = Config(
        hooks=HooksConfig(before_tool=[HookEntry(matcher="read_file", command=command)]),
    )
    runtime, _ = await make_runtime(
        [Turn(tool_calls=[("read_file", {"path": "notes.txt"})]), Turn(text="done")],
        config=config,
    )

    async def first_progress() -> ToolProgress:
        async for event in runtime.observe():
            if isinstance(event, ToolProgress):
                return event
        raise AssertionError("the events ended")

    # Observing from before the run starts: the progress is live only.
    progress = asyncio.create_task(first_progress())
    run = await runtime.start("read the notes")
    async with asyncio.timeout(WAIT):
        checking = await progress
    assert checking.message == f"checking with hook `{command}`…"

    [call] = await runtime.tool_calls(run.id)
    assert checking.tool_call_id == call.id
    assert call.state is ToolCallState.PENDING and call.started_at is None
    shown = await _agent_tui_show(db_path, run.id, dict(os.environ))
    assert f"{call.id}  read_file  pending" in shown
    assert "running" not in shown.split("Tool calls:")[1]

    release.touch()
    assert (await runtime.wait(run.id, timeout=WAIT)).state is RunState.COMPLETED
    [call] = await runtime.tool_calls(run.id)
    assert call.state is ToolCallState.COMPLETED and call.result is not None
    assert "the answer is 42" in call.result


CHILD = """
import asyncio, sys
from runtime.api import Runtime
from runtime.config import Config, Permissions
from runtime.hooks import HookEntry, HooksConfig
from tests.fakes.scripted import ScriptedProvider, Turn

async def main(db, workspace, command):
    provider = ScriptedProvider(
        [Turn(tool_calls=[("write_file", {"path": "out.txt", "content": "written"})])]
    )
    config = Config(
        permissions=Permissions(allow=["write_file"]),
        hooks=HooksConfig(before_tool=[HookEntry(matcher="write_file", command=command)]),
    )
    runtime = await Runtime.open(
        db_path=db, workspace=workspace, config=config, model="scripted:test",
        providers=lambda reference: provider,
    )
    run = await runtime.start("write it")
    print(run.id, flush=True)
    await asyncio.Event().wait()

asyncio.run(main(*sys.argv[1:]))
"""


def _wait_for_file(path: Path) -> None:
    deadline = time.monotonic() + WAIT
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


def test_a_kill_while_the_hook_decides_leaves_a_call_that_never_ran_and_a_retry_checks_it_again(
    db_path: Path, workspace: Path, tmp_path: Path
) -> None:
    command, ready, release = held_hook(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(db_path), str(workspace), command],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert proc.stdout is not None
        run_id = proc.stdout.readline().strip()
        _wait_for_file(ready)
        with sqlite3.connect(db_path) as conn:
            [(state,)] = conn.execute("SELECT state FROM tool_calls WHERE run_id = ?", (run_id,))
        assert state == "pending"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=WAIT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=WAIT)
        if ready.exists():
            # The hook runs in a session of its own (its supervisor ends it when agent-tui
            # dies); make sure it is gone before the retry starts a new one.
            try:
                os.killpg(int(ready.read_text()), signal.SIGKILL)
            except (ProcessLookupError, PermissionError, ValueError):
                pass
            ready.unlink()

    async def recover_then_retry() -> tuple[RunState, bool, ToolCallState, RunState]:
        provider = ScriptedProvider([Turn(text="done")])
        config = Config(
            permissions=Permissions(allow=["write_file"]),
            hooks=HooksConfig(before_tool=[HookEntry(matcher="write_file", command=command)]),
        )
        runtime = await Runtime.open(
            db_path=db_path,
            workspace=workspace,
            config=config,
            model="scripted:test",
            providers=lambda reference: provider,
        )
        try:
            recovered = await runtime.get_run(run_id)
            [call] = await runtime.tool_calls(run_id)
            pending = call.state
            release.touch()
            await runtime.retry(run_id)
            finished = await runtime.wait(run_id, timeout=WAIT)
            return recovered.state, recovered.interrupted, pending, finished.state
        finally:
            await runtime.close()

    recovered, interrupted, call_state, finished = asyncio.run(recover_then_retry())
    # Not failed with an outcome "unknown": the tool never started, so nothing is in doubt.
    assert (recovered, interrupted, call_state) == (RunState.QUEUED, True, ToolCallState.PENDING)
    assert finished is RunState.COMPLETED
    assert ready.exists(), "the retry asked the hook again"
    assert (workspace / "out.txt").read_text() == "written"
