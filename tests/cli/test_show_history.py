"""`agent-tui show` and `export` of a fork include its inherited history, labelled; `show` of a
stopped run gives what it streamed and never committed."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from runtime.models import DraftKind
from runtime.store.sqlite import SqliteStore
from tests.cli.harness import Cli, boundary_of, json_lines
from tests.store.helpers import running_run, tool_calls, tool_use_message

pytestmark = pytest.mark.slow

PROMPT = "summarise this folder please"


def test_show_and_export_of_a_fork_label_the_history_it_inherited(cli: Cli) -> None:
    started = cli.run("run", PROMPT, "--json", "--model", "demo:instant")
    assert started.returncode == 3, started.stderr
    run_id = boundary_of(json_lines(started.stdout))["run_id"]
    source = json.loads(cli.run("show", run_id, "--json").stdout)
    checkpoint = source["checkpoints"][0]

    forked = cli.run("fork", checkpoint["id"], "only the README", "--json")
    assert forked.returncode in (0, 3), forked.stderr
    fork_run = boundary_of(json_lines(forked.stdout))["run_id"]

    shown = cli.run("show", fork_run)
    assert shown.returncode == 0, shown.stderr
    label = f"forked from job {source['job']['id']}"
    assert f"Inherited history ({label}" in shown.stdout
    assert "user (inherited):" in shown.stdout and PROMPT in shown.stdout
    assert shown.stdout.index("Inherited history") < shown.stdout.index("Messages:")
    data = json.loads(cli.run("show", fork_run, "--json").stdout)
    assert data["inherited"]["label"].startswith(label)
    assert data["inherited"]["messages"][0]["role"] == "user"
    assert data["partial_answer"] is None

    fork_job = data["job"]["id"]
    exported = cli.run("export", fork_job)
    assert exported.returncode == 0, exported.stderr
    assert "## Inherited history — " + label in exported.stdout
    assert "### User (inherited)" in exported.stdout and PROMPT in exported.stdout


def test_show_of_a_cancelled_run_gives_what_it_streamed_thinking_included(cli: Cli) -> None:
    async def cancelled_mid_stream() -> str:
        cli.db.parent.mkdir(parents=True, exist_ok=True)
        async with SqliteStore(cli.db) as store:
            await store.register_owner("elsewhere", lease_seconds=30)
            run, token = await running_run(
                store, owner_id="elsewhere", input="why?", workspace=str(cli.workspace)
            )
            await store.save_draft(
                run.id, token=token, message_id="m", text="Weighing it.", kind=DraftKind.THINKING
            )
            await store.save_draft(run.id, token=token, message_id="m", text="Because the")
            await store.cancel_run(run.id, reason="stopped")
            return run.id

    run_id = asyncio.run(cancelled_mid_stream())
    shown = cli.run("show", run_id)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("[partial] assistant"))
    assert lines[start + 1 : start + 3] == ["    [thinking] Weighing it.", "    Because the"]
    data = json.loads(cli.run("show", run_id, "--json").stdout)
    assert data["partial_answer"]["thinking"] == "Weighing it."
    assert data["partial_answer"]["text"] == "Because the"
    assert data["partial_answer"]["streaming"] is False


def test_show_of_a_running_run_gives_the_answer_streamed_so_far(cli: Cli) -> None:
    # A trial ran `show` on a run that was streaming: no text at all until it ended.
    async def streaming_elsewhere() -> str:
        cli.db.parent.mkdir(parents=True, exist_ok=True)
        async with SqliteStore(cli.db) as store:
            await store.register_owner("elsewhere", lease_seconds=300)
            run, token = await running_run(
                store, owner_id="elsewhere", input="why?", workspace=str(cli.workspace)
            )
            await store.save_draft(run.id, token=token, message_id="m", text="So far, the")
            return run.id

    run_id = asyncio.run(streaming_elsewhere())
    shown = cli.run("show", run_id)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("[streaming] assistant"))
    assert "the run is streaming it now" in lines[start]
    assert lines[start + 1] == "    So far, the"
    data = json.loads(cli.run("show", run_id, "--json").stdout)
    assert data["partial_answer"] == {
        "label": "the answer so far — the run is streaming it now",
        "text": "So far, the",
        "thinking": "",
        "partial": True,
        "streaming": True,
    }


def test_show_json_gives_the_step_in_progress_as_the_plain_show_names_it(cli: Cli) -> None:
    # `show` said "(step 1 in progress)" while `show --json` had only the steps counted.
    async def working_elsewhere() -> tuple[str, str]:
        cli.db.parent.mkdir(parents=True, exist_ok=True)
        async with SqliteStore(cli.db) as store:
            await store.register_owner("elsewhere", lease_seconds=300)
            calling, _ = await running_run(
                store, owner_id="elsewhere", input="why?", workspace=str(cli.workspace)
            )
            calls = tool_calls("read_file")
            tools, token = await running_run(
                store, owner_id="elsewhere", input="look", workspace=str(cli.workspace)
            )
            await store.commit_message(  # as the engine ends a step's model call
                tools.id, token=token, message=tool_use_message(calls), tool_calls=calls, step=1
            )
            return calling.id, tools.id

    def shown(run_id: str) -> tuple[str, dict[str, Any]]:
        plain = cli.run("show", run_id)
        as_json = cli.run("show", run_id, "--json")
        assert plain.returncode == 0 and as_json.returncode == 0, plain.stderr + as_json.stderr
        return plain.stdout, json.loads(as_json.stdout)

    model_call, tools_open = asyncio.run(working_elsewhere())
    text, data = shown(model_call)  # its first model call: no step counted yet
    assert "steps:   0 of at most 50 (step 1 in progress)" in text
    assert data["run"]["step"] == 0 and data["step_in_progress"] == 1
    text, data = shown(tools_open)  # the tools of its first step, counted, are open
    assert "steps:   1 of at most 50 (step 1 in progress)" in text
    assert data["run"]["step"] == 1 and data["step_in_progress"] == 1

    started = cli.run("run", PROMPT, "--json", "--model", "demo:instant")
    waiting = boundary_of(json_lines(started.stdout))["run_id"]
    text, data = shown(waiting)  # waits for a person: it works on no step
    assert "in progress" not in text and data["step_in_progress"] is None


def test_show_measures_the_context_against_the_folders_configured_window(cli: Cli) -> None:
    """``[defaults] context_window`` is the window compaction and ``/context`` use; ``show``
    gave the fill of the model's own 200,000 instead (found by a trial)."""
    (cli.workspace / "agent-tui.toml").write_text("[defaults]\ncontext_window = 4000\n")
    started = cli.run("run", PROMPT, "--json", "--model", "demo:instant")
    assert started.returncode == 3, started.stderr
    run_id = boundary_of(json_lines(started.stdout))["run_id"]
    shown = cli.run("show", run_id)
    assert shown.returncode == 0, shown.stderr
    [line] = [line for line in shown.stdout.splitlines() if line.strip().startswith("context:")]
    assert "4.0k window" in line and "200.0k" not in line, line
