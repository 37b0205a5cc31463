"""Headless runs of the demo model: JSON events, exit codes, answering with `respond`."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runtime.events import EVENT_ADAPTER
from runtime.providers.demo import NOTES_FILE
from tests.cli.harness import Cli, boundary_of, json_lines

pytestmark = pytest.mark.slow

PROMPT = "summarise this folder"


def _events_and_boundary(stdout: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    lines = json_lines(stdout)
    boundary = boundary_of(lines)
    events = lines[:-1]
    for event in events:
        EVENT_ADAPTER.validate_python(event)
    return events, boundary


def _start(cli: Cli) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    result = cli.run("run", PROMPT, "--json", "--model", "demo:instant")
    assert result.returncode == 3, result.stderr
    return _events_and_boundary(result.stdout)


def test_run_json_prints_every_event_then_stops_at_the_question(cli: Cli) -> None:
    events, boundary = _start(cli)

    assert boundary["state"] == "input_required"
    assert boundary["request"]["kind"] == "question"
    assert boundary["request"]["options"]
    durable = [e["seq"] for e in events if "seq" in e]
    assert durable == sorted(durable) and len(durable) == len(set(durable))
    assert durable[0] == 1 and durable == list(range(1, durable[-1] + 1))
    kinds = {e["kind"] for e in events}
    assert {"run_state_changed", "message_committed", "tool_state_changed"} <= kinds
    assert {"checkpoint_created", "message_delta"} <= kinds
    assert events[-1]["kind"] == "run_state_changed" and events[-1]["to"] == "input_required"
    assert all(e["run_id"] == boundary["run_id"] for e in events)


def test_respond_answers_each_request_until_the_run_completes(cli: Cli) -> None:
    _, first = _start(cli)
    run_id = first["run_id"]
    notes = cli.workspace / NOTES_FILE

    shown = cli.run("show", run_id)
    assert shown.returncode == 0, shown.stderr
    assert first["request"]["prompt"] in shown.stdout
    for option in first["request"]["options"]:
        assert option in shown.stdout
    assert f"agent-tui --db {cli.db} respond {run_id}" in shown.stdout  # not the default db

    answered = cli.run("respond", run_id, "1", "--json")
    assert answered.returncode == 3, answered.stderr
    events, second = _events_and_boundary(answered.stdout)
    assert second["request"]["kind"] == "approval"
    assert second["request"]["detail"]["tool"] == "write_file"
    assert events[0]["kind"] == "run_state_changed" and events[0]["to"] == "queued"
    assert not notes.exists()

    approved = cli.run("respond", run_id, "allow", "--json")
    assert approved.returncode == 0, approved.stderr
    events, last = _events_and_boundary(approved.stdout)
    assert last == {"kind": "boundary", "run_id": run_id, "state": "completed"}
    assert notes.exists()
    assert any(e["kind"] == "tool_state_changed" and e["to"] == "completed" for e in events)


def test_respond_without_json_streams_the_answer_and_explains_the_next_request(cli: Cli) -> None:
    result = cli.run("run", PROMPT, "--model", "demo:instant")
    assert result.returncode == 3
    assert "## Plan" in result.stdout
    assert "What should the notes focus on?" in result.stderr
    assert "Using the offline demo model" in result.stderr
    assert f"agent-tui --db {cli.db} respond" in result.stderr
    assert "{" not in result.stdout.splitlines()[0]


def test_a_refused_retry_prints_its_error_alone(cli: Cli) -> None:
    """Found by a new-user trial: `retry` of a completed run printed the demo model's notice
    before its error, as if it were going to run."""
    _, first = _start(cli)
    run_id = first["run_id"]
    assert cli.run("respond", run_id, "1").returncode in (0, 3)
    assert cli.run("respond", run_id, "allow").returncode == 0
    refused = cli.run("retry", run_id)
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.strip().splitlines() == [
        f"agent-tui: error: run {run_id} completed; use follow-up to continue its job"
    ]


def test_an_answer_that_does_not_fit_changes_nothing(cli: Cli) -> None:
    _, first = _start(cli)
    run_id = first["run_id"]
    before = json.loads(cli.run("show", run_id, "--json").stdout)

    for answer in ("7", ""):
        refused = cli.run("respond", run_id, answer)
        assert refused.returncode == 2
        assert refused.stderr.startswith("agent-tui: error:")
        assert "Traceback" not in refused.stderr

    after = json.loads(cli.run("show", run_id, "--json").stdout)
    assert after["run"]["state"] == "input_required"
    assert after["request"]["id"] == before["request"]["id"]
    assert after["run"]["revision"] == before["run"]["revision"]
    assert len(after["messages"]) == len(before["messages"])

    assert cli.run("respond", run_id, "1").returncode == 3
    wrong_kind = cli.run("respond", run_id, "maybe")
    assert wrong_kind.returncode == 2
    assert "allow" in wrong_kind.stderr


def test_responding_to_a_run_that_is_not_waiting_is_a_clear_error(cli: Cli) -> None:
    _, first = _start(cli)
    run_id = first["run_id"]
    request_id = first["request"]["id"]
    assert cli.run("respond", run_id, "1").returncode == 3
    assert cli.run("respond", run_id, "allow").returncode == 0

    again = cli.run("respond", run_id, "allow")
    assert again.returncode == 2
    assert "not waiting for input" in again.stderr
    assert len(again.stderr.splitlines()) == 1

    same_request = cli.run("respond", run_id, "2", "--request", request_id)
    assert same_request.returncode == 2
    assert "already answered" in same_request.stderr


def test_show_json_has_the_run_its_messages_and_the_open_request(cli: Cli) -> None:
    _, first = _start(cli)
    shown = cli.run("show", first["run_id"], "--json")
    assert shown.returncode == 0
    data = json.loads(shown.stdout)
    assert set(data) >= {"run", "messages", "tool_calls", "request", "checkpoints"}
    assert data["run"]["parent_run_id"] is None
    assert data["request"]["kind"] == "question"
    assert data["messages"][0]["content"][0]["text"] == PROMPT
    assert {c["name"] for c in data["tool_calls"]} >= {"list_dir", "ask_user"}
    assert data["checkpoints"]


def test_runs_lists_newest_first_with_parent_run_id(cli: Cli) -> None:
    _, first = _start(cli)
    second = cli.run("run", "another task", "--json", "--model", "demo:instant")
    second_id = boundary_of(json_lines(second.stdout))["run_id"]

    listed = cli.run("runs", "--json")
    assert listed.returncode == 0
    rows = json_lines(listed.stdout)
    assert [r["id"] for r in rows] == [second_id, first["run_id"]]
    assert all("parent_run_id" in r for r in rows)
    assert rows[0]["job_title"] == "another task"

    table = cli.run("runs", "--state", "input_required", "--limit", "1")
    assert table.returncode == 0
    assert second_id in table.stdout and first["run_id"] not in table.stdout
    assert "STATE" in table.stdout.splitlines()[0]
    assert cli.run("runs", "--state", "completed").stdout == ""


def test_cancel_prints_the_new_state_and_refuses_a_finished_run(cli: Cli) -> None:
    _, first = _start(cli)
    run_id = first["run_id"]
    cancelled = cli.run("cancel", run_id)
    assert cancelled.returncode == 0, cancelled.stderr
    assert cancelled.stdout.strip() == f"{run_id} cancelled"

    again = cli.run("cancel", run_id)
    assert again.returncode == 2
    assert "already cancelled" in again.stderr


def _complete(cli: Cli) -> str:
    _, first = _start(cli)
    run_id: str = first["run_id"]
    assert cli.run("respond", run_id, "2").returncode == 3
    assert cli.run("respond", run_id, "allow").returncode == 0
    return run_id


def test_export_contains_the_conversation_as_markdown_and_json(cli: Cli) -> None:
    run_id = _complete(cli)
    job_id = json.loads(cli.run("show", run_id, "--json").stdout)["run"]["job_id"]

    markdown = cli.run("export", job_id)
    assert markdown.returncode == 0, markdown.stderr
    assert PROMPT in markdown.stdout
    assert "Summary" in markdown.stdout

    exported = cli.run("export", job_id, "--format", "json")
    assert exported.returncode == 0, exported.stderr
    data = json.loads(exported.stdout)
    text = json.dumps(data)
    assert PROMPT in text and "Summary" in text


def test_follow_up_and_fork_run_to_completion(cli: Cli) -> None:
    run_id = _complete(cli)
    shown = json.loads(cli.run("show", run_id, "--json").stdout)
    job_id = shown["run"]["job_id"]

    follow = cli.run("follow-up", job_id, "now look for main functions", "--json")
    assert follow.returncode == 0, follow.stderr
    events, boundary = _events_and_boundary(follow.stdout)
    assert boundary["state"] == "completed"
    assert boundary["run_id"] != run_id
    assert all(e["run_id"] == boundary["run_id"] for e in events)

    checkpoint_id = shown["checkpoints"][0]["id"]
    fork = cli.run("fork", checkpoint_id, "try something else")
    assert fork.returncode in (0, 3), fork.stderr
    runs = json_lines(cli.run("runs", "--json").stdout)
    forked = runs[0]
    assert forked["forked_from_checkpoint_id"] == checkpoint_id
    assert forked["job_id"] != job_id


def test_an_unknown_model_is_a_configuration_error(cli: Cli) -> None:
    result = cli.run("run", PROMPT, "--model", "nonsense:thing")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "nonsense" in result.stderr


@pytest.mark.parametrize("model", ["", "  "])
def test_an_empty_model_is_refused_not_taken_for_the_default(cli: Cli, model: str) -> None:
    # It ran with the default model (the demo), saying nothing (a trial).
    result = cli.run("run", PROMPT, "--model", model)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        "agent-tui: error: --model is empty: give a model reference, e.g. demo or anthropic:NAME\n"
    )


@pytest.mark.parametrize("markers", [0, 2])
def test_the_demo_notes_count_the_todo_markers_the_workspace_really_has(
    cli: Cli, markers: int
) -> None:
    if markers:
        (cli.workspace / "plan.txt").write_text("TODO: one\nfine\n# TODO two\n", encoding="utf-8")
    _, first = _start(cli)
    run_id = first["run_id"]
    assert cli.run("respond", run_id, "1").returncode == 3
    assert cli.run("respond", run_id, "allow").returncode == 0
    notes = (cli.workspace / NOTES_FILE).read_text(encoding="utf-8")
    assert f"`TODO` markers found: {markers}" in notes


def test_a_demo_follow_up_counts_only_the_lines_its_search_matched(cli: Cli) -> None:
    (cli.workspace / "plan.txt").write_text("the budget\nthe budget again\n", encoding="utf-8")
    _, first = _start(cli)
    run_id = first["run_id"]
    assert cli.run("respond", run_id, "1").returncode == 3
    assert cli.run("respond", run_id, "allow").returncode == 0
    job_id = json.loads(cli.run("show", run_id, "--json").stdout)["run"]["job_id"]
    found = cli.run("follow-up", job_id, "what about the budget", "--model", "demo:instant")
    assert found.returncode == 0, found.stderr
    assert "gave 2 matching line(s)" in found.stdout.replace("*", "")
    missing = cli.run("follow-up", job_id, "what about zebras", "--model", "demo:instant")
    assert "gave 0 matching line(s)" in missing.stdout.replace("*", "")


def test_show_gives_a_waiting_writes_diff_against_the_file_as_it_is_now(cli: Cli) -> None:
    """Found by a new-user trial: the approval's diff was the one made when the agent asked;
    the file had been edited by hand since, and allowing overwrote the edit unseen."""
    _, first = _start(cli)
    run_id = first["run_id"]
    assert cli.run("respond", run_id, "1", "--json").returncode == 3
    notes = cli.workspace / NOTES_FILE
    notes.write_text("MY HAND EDIT - important\n", encoding="utf-8")

    shown = cli.run("show", run_id)
    assert shown.returncode == 0, shown.stderr
    assert "The file changed since the agent asked" in shown.stdout
    assert "-MY HAND EDIT - important" in shown.stdout
    assert notes.read_text(encoding="utf-8") == "MY HAND EDIT - important\n"  # show writes nothing
