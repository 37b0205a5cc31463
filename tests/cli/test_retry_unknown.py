"""`agent-tui retry` of a run whose last call has an unknown outcome (issue 12 point 10): without
a choice it refuses in one line naming the call and the two flags; `--skip-unknown` continues
without running it."""

from __future__ import annotations

import asyncio
import json
import sqlite3

import pytest

from runtime.models import Failure, Role, RunState, TextBlock, ToolCallState, ToolUseBlock
from runtime.store.base import NewMessage, NewRun, NewToolCall, ToolStateChange
from runtime.store.sqlite import SqliteStore
from tests.cli.harness import Cli, json_lines

COMMAND = "sleep 3; echo again >> orphan.log"
TABLES = ("jobs", "runs", "messages", "tool_calls", "events")


async def _seed(cli: Cli) -> str:
    """A failed run whose shell call was running when agent-tui died (outcome unknown)."""
    cli.db.parent.mkdir(parents=True, exist_ok=True)
    store = SqliteStore(cli.db)
    await store.open()
    try:
        run = await store.create_run(
            NewRun(
                agent="default", model="demo", input="append a line", workspace=str(cli.workspace)
            )
        )
        claimed = await store.claim_run(run.id, owner_id="gone:1:x-1")
        token = claimed.execution_token or ""
        await store.commit_message(
            run.id,
            token=token,
            message=NewMessage(
                role=Role.ASSISTANT,
                content=[
                    TextBlock(text="Appending the line."),
                    ToolUseBlock(
                        id="toolu_1", tool_call_id="c1", name="shell", input={"command": COMMAND}
                    ),
                ],
            ),
            tool_calls=[
                NewToolCall(
                    id="c1", provider_id="toolu_1", name="shell", arguments={"command": COMMAND}
                )
            ],
            step=1,
        )
        await store.set_tool_states(
            run.id,
            token=token,
            changes=[
                ToolStateChange(tool_call_id="c1", to=ToolCallState.RUNNING),
                ToolStateChange(
                    tool_call_id="c1", to=ToolCallState.INDETERMINATE, error="it stopped"
                ),
            ],
        )
        await store.finish_run(
            run.id,
            token=token,
            to=RunState.FAILED,
            failure=Failure(code="tool_indeterminate", message="the outcome of shell is unknown"),
        )
        return run.id
    finally:
        await store.close()


def test_retry_refuses_an_unknown_outcome_without_a_choice_and_skip_continues_without_it(
    cli: Cli,
) -> None:
    run_id = asyncio.run(_seed(cli))
    refused = cli.run("retry", run_id)
    assert refused.returncode == 2
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1, refused.stderr
    assert f"shell {COMMAND}" in lines[0]
    assert "--rerun" in lines[0] and "--skip-unknown" in lines[0]
    shown = json.loads(cli.run("show", run_id, "--json").stdout)
    assert shown["run"]["state"] == "failed"

    skipped = cli.run("retry", run_id, "--skip-unknown", "--json")
    assert skipped.returncode in (0, 3), skipped.stderr
    events = json_lines(skipped.stdout)
    new_run_id = events[0]["run_id"]
    assert new_run_id != run_id
    calls = json.loads(cli.run("show", new_run_id, "--json").stdout)["tool_calls"]
    shell = [c for c in calls if c["name"] == "shell"]
    assert shell[0]["state"] == "failed"
    assert "outcome of this call is unknown" in shell[0]["error"]
    assert not (cli.workspace / "orphan.log").exists()


async def _seed_then_followed(cli: Cli) -> tuple[str, str]:
    """``_seed``'s failed run, then a follow-up in its job that completed."""
    run_id = await _seed(cli)
    store = SqliteStore(cli.db)
    await store.open()
    try:
        failed = await store.get_run(run_id)
        follow_up = await store.create_run(
            NewRun(
                job_id=failed.job_id,
                agent="default",
                model="demo",
                input="go on anyway",
                workspace=str(cli.workspace),
                history_run_id=run_id,
                history_position=0,
            )
        )
        claimed = await store.claim_run(follow_up.id, owner_id="gone:1:x-1")
        await store.finish_run(
            follow_up.id, token=claimed.execution_token or "", to=RunState.COMPLETED, outcome="ok"
        )
        return run_id, follow_up.id
    finally:
        await store.close()


def test_retry_of_a_failed_run_a_later_follow_up_went_past_is_refused_in_one_line(
    cli: Cli,
) -> None:
    """Found by a new-user trial: `retry --skip-unknown` of a run 13 follow-ups had gone past
    made a run that continued from the failed run's checkpoint, without their turns."""
    run_id, follow_up_id = asyncio.run(_seed_then_followed(cli))
    with sqlite3.connect(cli.db) as conn:
        counts = [conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES]
    for flags in ((), ("--skip-unknown",), ("--rerun",)):
        refused = cli.run("retry", run_id, *flags)
        assert (refused.returncode, refused.stdout) == (2, ""), refused.stderr
        [line] = refused.stderr.splitlines()
        assert line.startswith(
            f"agent-tui: error: run {run_id} cannot be retried: a later run continued its job "
            f"(the latest is run {follow_up_id})"
        )
        # The command names this database (the test's is not the default one).
        assert f"agent-tui --db {cli.db} follow-up" in line and "--rerun" not in line
    with sqlite3.connect(cli.db) as conn:
        assert [conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES] == counts
    listed = cli.run("runs", "--state", "interrupted")
    assert listed.returncode == 0 and run_id not in listed.stdout


@pytest.mark.parametrize(
    ("flag", "done"),
    [("--skip-unknown", "without running the call again"), ("--rerun", "running the call again")],
)
def test_retry_with_a_choice_says_what_it_did_with_the_call_not_that_the_run_was_interrupted(
    cli: Cli, flag: str, done: str
) -> None:
    """Found by a user trial: `retry --skip-unknown` printed "(the run was interrupted and
    re-queued)" while preparing its run, though nothing had been interrupted."""
    run_id = asyncio.run(_seed(cli))
    retried = cli.run("retry", run_id, flag)
    assert retried.returncode in (0, 3), retried.stderr
    assert "interrupted" not in retried.stderr
    assert f"(retried from the step whose call had an unknown outcome, {done})" in retried.stderr
