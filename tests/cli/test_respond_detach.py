"""`agent-tui respond --detach` on a run another agent-tui executes (a TUI, say): the answer is
left to that process, which goes on with the run; with no such process alive it is refused, one
line, nothing changed."""

from __future__ import annotations

import asyncio
import os

import pytest

from runtime.api import Runtime
from runtime.models import InputRequestState, RunState
from tests.cli.harness import Cli, json_lines
from tests.fakes.scripted import ScriptedProvider, Turn, open_scripted

pytestmark = pytest.mark.slow


async def _owner(cli: Cli) -> Runtime:
    cli.db.parent.mkdir(parents=True, exist_ok=True)
    provider = ScriptedProvider(
        [Turn("", [("ask_user", {"question": "Which colour?"})]), Turn("Blue it is.")]
    )
    return await open_scripted(provider, cli.db, cli.workspace)


async def test_respond_detach_leaves_the_run_to_the_live_process_that_runs_it(cli: Cli) -> None:
    owner = await _owner(cli)
    try:
        run = await owner.start("pick a colour")
        assert (await owner.wait(run.id, timeout=15)).run.state is RunState.INPUT_REQUIRED
        answered = await asyncio.to_thread(cli.run, "respond", run.id, "blue", "--detach", "--json")
        assert answered.returncode == 0, answered.stderr
        assert json_lines(answered.stdout) == [
            {"kind": "answered", "run_id": run.id, "state": "queued"}
        ]
        # It says which process goes on with it; "(queued)" read as waiting for someone to
        # pick it up (a new-user trial).
        [said] = answered.stderr.splitlines()
        assert said.startswith(
            f"Answered run {run.id}; it goes back to the agent-tui that was running it"
            f" (pid {os.getpid()}), which goes on with it now; watch it with: "
        )
        assert said.endswith(f" show {run.id}") and "(queued)" not in said
        # The process that ran it goes on with it (before, nobody did: it stayed queued).
        done = await owner.wait(run.id, timeout=15)
        assert done.run.state is RunState.COMPLETED
        assert done.run.owner_id == owner.owner_id
    finally:
        await owner.close()


async def test_respond_detach_with_no_live_process_to_go_on_is_refused_and_changes_nothing(
    cli: Cli,
) -> None:
    owner = await _owner(cli)
    run = await owner.start("pick a colour")
    boundary = await owner.wait(run.id, timeout=15)
    assert boundary.request is not None
    await owner.close()
    before = cli.db.read_bytes()

    refused = await asyncio.to_thread(cli.run, "respond", run.id, "blue", "--detach")
    assert refused.returncode == 2
    assert "no process would go on" in refused.stderr
    assert len(refused.stderr.splitlines()) == 1
    assert cli.db.read_bytes() == before

    reader = await Runtime.open(db_path=cli.db, workspace=cli.workspace, read_only=True)
    try:
        request = await reader.store.get_input_request(boundary.request.id)
        assert request.state is InputRequestState.PENDING
    finally:
        await reader.close()
