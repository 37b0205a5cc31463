"""A process that stays open (the TUI) recovers runs of a process killed meanwhile."""

from __future__ import annotations

from runtime.api import Runtime
from runtime.config import Config
from runtime.models import RunState
from tests.cli.harness import Cli, LineStream, kill_hard


async def test_a_run_killed_while_another_process_is_open_is_recovered_there(cli: Cli) -> None:
    cli.db.parent.mkdir(parents=True, exist_ok=True)
    watcher = await Runtime.open(
        db_path=cli.db, workspace=cli.workspace, config=Config(), lease_seconds=0.6
    )
    try:
        proc = cli.spawn("run", "summarise this folder", "--json", "--model", "demo")
        stream = LineStream(proc)
        try:
            seen = stream.json_until(lambda item, _: item["kind"] == "message_delta")
        finally:
            kill_hard(proc)
        run_id = seen[0]["run_id"]
        # The watcher was open all along: it notices the dead owner and frees the run.
        boundary = await watcher.wait(run_id, timeout=30)
        assert boundary.state is RunState.QUEUED and boundary.run.interrupted
        retried = await watcher.retry(run_id)
        assert retried.id == run_id
        resumed = await watcher.wait(run_id, timeout=30)
        assert resumed.state is RunState.INPUT_REQUIRED  # the demo's question, as before
    finally:
        await watcher.close()
