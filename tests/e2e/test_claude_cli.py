"""`agent-tui run --json` with Claude: the real anthropic SDK against the fake Messages server,
both as real processes on loopback."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sqlite3
from pathlib import Path

import pytest

from runtime.api import Runtime
from runtime.config import Config
from runtime.events import EVENT_ADAPTER
from runtime.models import RunState
from tests.cli.harness import Cli, boundary_of, json_lines
from tests.fakes.anthropic_server import (
    error_response,
    message_delta,
    message_start,
    spawn_fake_server,
    stream,
    text_block,
    text_response,
    thinking_block,
    tool_use_block,
)

API_KEY = "sk-ant-e2e-SECRET-0123456789"
MODEL = "anthropic:claude-sonnet-5"


def thinking_and_tool() -> dict[str, object]:
    encoded = json.dumps({"path": "notes.txt"})
    return stream(
        [
            message_start(input_tokens=150),
            *thinking_block(0, ["The notes ", "hold it."], signature="sig-e2e"),
            *text_block(1, ["Let me ", "read ", "the notes."]),
            *tool_use_block(2, "toolu_e2e", "read_file", [encoded[:9], encoded[9:]]),
            message_delta("tool_use", output_tokens=33),
            {"event": "message_stop", "data": {"type": "message_stop"}},
        ]
    )


def claude_env(cli: Cli, base_url: str) -> dict[str, str]:
    return {**cli.env, "ANTHROPIC_API_KEY": API_KEY, "ANTHROPIC_BASE_URL": base_url}


def test_run_json_streams_deltas_runs_a_tool_and_records_usage_and_cost(
    cli: Cli, tmp_path: Path
) -> None:
    script = [thinking_and_tool(), text_response(["The answer ", "is 42."], input_tokens=300)]
    with spawn_fake_server(script, directory=tmp_path) as server:
        cli.env = claude_env(cli, server.base_url)
        result = cli.run("run", "what is the answer?", "--json", "--model", MODEL)
        recorded = server.requests()
    assert result.returncode == 0, result.stderr
    lines = json_lines(result.stdout)
    assert boundary_of(lines)["state"] == "completed"
    events = [EVENT_ADAPTER.validate_python(line) for line in lines[:-1]]
    deltas = "".join(e.text for e in events if e.kind == "message_delta" and not e.thinking)
    assert "Let me read the notes." in deltas and "The answer is 42." in deltas
    tools = [e for e in events if e.kind == "tool_state_changed"]
    assert [t.to_state.value for t in tools] == ["pending", "running", "completed"]

    # What was sent back: the signed thinking block and the tool result, in order.
    second = recorded[1]["body"]["messages"]
    assert second[1]["content"][0] == {
        "type": "thinking",
        "thinking": "The notes hold it.",
        "signature": "sig-e2e",
    }
    result_block = next(b for b in second[2]["content"] if b["type"] == "tool_result")
    assert result_block["tool_use_id"] == "toolu_e2e"
    assert "the answer is 42" in json.dumps(result_block["content"])

    with sqlite3.connect(cli.db) as db:
        state, input_tokens, cost = db.execute(
            "SELECT state, input_tokens, cost_usd FROM runs"
        ).fetchone()
        job_cost = db.execute("SELECT cost_usd FROM jobs").fetchone()[0]
    assert state == "completed" and input_tokens == 450
    assert cost > 0 and job_cost == pytest.approx(cost)
    shown = cli.run("show", lines[0]["run_id"])
    assert "context: 300 tokens" in shown.stdout and "of the model's" in shown.stdout


def test_a_bad_key_fails_the_run_with_a_message_naming_the_variable(
    cli: Cli, tmp_path: Path
) -> None:
    script = [error_response(401, "authentication_error", "invalid x-api-key")]
    with spawn_fake_server(script, directory=tmp_path) as server:
        cli.env = claude_env(cli, server.base_url)
        result = cli.run("run", "hello", "--model", MODEL)
    assert result.returncode == 1
    assert "ANTHROPIC_API_KEY" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_rate_limit_is_retried_and_shown_as_a_notice(cli: Cli, tmp_path: Path) -> None:
    script = [
        error_response(429, "rate_limit_error", "slow down", retry_after=0),
        text_response("fine now"),
    ]
    with spawn_fake_server(script, directory=tmp_path) as server:
        cli.env = claude_env(cli, server.base_url)
        result = cli.run("run", "hello", "--json", "--model", MODEL)
    assert result.returncode == 0, result.stderr
    kinds = [line["kind"] for line in json_lines(result.stdout)]
    assert "notice" in kinds


def test_the_api_key_never_reaches_the_database_the_log_or_exports(
    cli: Cli, tmp_path: Path
) -> None:
    script = [thinking_and_tool(), error_response(401, "authentication_error", "revoked")]
    with spawn_fake_server(script, directory=tmp_path) as server:
        cli.env = claude_env(cli, server.base_url)
        run = cli.run("run", "read the notes", "--json", "--model", MODEL)
        sent = json.dumps(server.requests())
    assert API_KEY in sent  # it was really used...
    job_id = json_lines(run.stdout)[0]["job_id"]
    exports = [cli.run("export", job_id, "--format", fmt).stdout for fmt in ("md", "json")]
    shown = cli.run("show", json_lines(run.stdout)[0]["run_id"], "--json").stdout
    assert all(API_KEY not in text for text in [*exports, shown, run.stdout, run.stderr])
    for path in cli.db.parent.iterdir():  # the database, its WAL and the log
        assert API_KEY.encode() not in path.read_bytes(), path


async def test_the_default_model_is_claude_when_a_key_is_set(
    db_path: Path, workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC", "AGENT_TUI"))}
    with_key = await Runtime.open(
        db_path=db_path,
        workspace=workspace,
        config=Config(),
        env={**env, "ANTHROPIC_API_KEY": API_KEY},
    )
    assert with_key.default_model.startswith("anthropic:") and with_key.model_notice is None
    await with_key.close()
    without = await Runtime.open(db_path=db_path, workspace=workspace, config=Config(), env=env)
    assert without.default_model == "demo" and without.model_notice
    run = await without.start("hi")
    boundary = await without.wait(run.id, timeout=30)
    assert boundary.state in (RunState.INPUT_REQUIRED, RunState.COMPLETED)
    await without.close()
    await asyncio.sleep(0)
    assert API_KEY not in caplog.text
