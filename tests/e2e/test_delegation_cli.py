"""Jobs with several agents from the command line (no key: the demo model delegates)."""

from __future__ import annotations

import sqlite3
from typing import Any

from tests.cli.harness import Cli, LineStream, boundary_of, json_lines, kill_hard

TEAM = """
[agents.coordinator]
instructions = "Split the work."
delegates = ["researcher", "reviewer"]

[agents.researcher]
description = "Looks things up."

[agents.reviewer]
description = "Reviews."
"""


def runs_in_db(cli: Cli) -> list[dict[str, Any]]:
    with sqlite3.connect(cli.db) as db:
        db.row_factory = sqlite3.Row
        return [dict(r) for r in db.execute("SELECT * FROM runs ORDER BY created_at")]


def test_a_childs_question_stops_the_cli_naming_the_child_and_respond_finishes_the_job(
    cli: Cli,
) -> None:
    (cli.workspace / "agent-tui.toml").write_text(TEAM)
    first = cli.run(
        "run", "survey the project", "--agent", "coordinator", "--json", "--model", "demo:instant"
    )
    assert first.returncode == 3, first.stderr
    lines = json_lines(first.stdout)
    root_id = lines[0]["run_id"]
    boundary = boundary_of(lines)
    child_id = boundary["run_id"]
    assert child_id != root_id
    assert boundary["request"]["prompt"] == "Which part of the workspace matters most?"
    assert child_id in first.stderr  # the way to answer names the child's run

    listed = json_lines(cli.run("runs", "--json").stdout)
    parents = {item["id"]: item["parent_run_id"] for item in listed}
    assert parents[root_id] is None and parents[child_id] == root_id

    answered = cli.run("respond", child_id, "2", "--json")
    assert answered.returncode == 0, answered.stderr
    assert boundary_of(json_lines(answered.stdout))["state"] == "completed"
    runs = runs_in_db(cli)
    assert len(runs) == 3 and {r["state"] for r in runs} == {"completed"}
    root = next(r for r in runs if r["id"] == root_id)
    children = [r for r in runs if r["parent_run_id"] == root_id]
    assert len(children) == 2
    with sqlite3.connect(cli.db) as db:
        job_input = db.execute("SELECT input_tokens FROM jobs").fetchone()[0]
    assert job_input == sum(r["input_tokens"] for r in runs) > root["input_tokens"]


def test_after_kill_9_while_children_work_the_job_recovers_without_starting_a_child_twice(
    cli: Cli,
) -> None:
    (cli.workspace / "agent-tui.toml").write_text(TEAM)
    proc = cli.spawn(
        "run", "survey the project", "--agent", "coordinator", "--json", "--model", "demo"
    )
    stream = LineStream(proc)
    try:
        seen = stream.json_until(
            lambda item, seen: (
                item["kind"] == "message_delta" and item["run_id"] != seen[0]["run_id"]
            )
        )
    finally:
        kill_hard(proc)
    root_id = seen[0]["run_id"]
    before = runs_in_db(cli)
    assert len(before) == 3  # the coordinator and both children exist, mid-work

    retried = cli.run("retry", root_id, "--json")
    assert retried.returncode == 3, retried.stderr
    waiting = boundary_of(json_lines(retried.stdout))
    assert waiting["run_id"] != root_id
    done = cli.run("respond", waiting["run_id"], "1", "--json")
    assert done.returncode == 0, done.stderr
    after = runs_in_db(cli)
    assert sorted(r["id"] for r in after) == sorted(r["id"] for r in before)
    assert {r["state"] for r in after} == {"completed"}


def test_cancelling_the_coordinator_cancels_its_children_in_the_database(cli: Cli) -> None:
    (cli.workspace / "agent-tui.toml").write_text(TEAM)
    first = cli.run(
        "run", "survey the project", "--agent", "coordinator", "--json", "--model", "demo:instant"
    )
    assert first.returncode == 3
    root_id = json_lines(first.stdout)[0]["run_id"]
    cancelled = cli.run("cancel", root_id)
    assert cancelled.returncode == 0, cancelled.stderr
    states = {r["id"]: r["state"] for r in runs_in_db(cli)}
    assert states[root_id] == "cancelled"
    assert all(state in ("cancelled", "completed") for state in states.values())
    assert "cancelled" in [s for rid, s in states.items() if rid != root_id]
