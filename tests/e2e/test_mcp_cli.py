"""MCP servers from the command line: a stdio server configured in agent-tui.toml, called by a
model (the fake Anthropic server), its progress printed, its crash and its form handled."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.harness import Cli, LineStream, boundary_of, finish, json_lines, kill_hard
from tests.fakes.anthropic_server import spawn_fake_server, text_response, tool_use_response
from tests.fakes.mcp_servers import stdio_config

MODEL = "anthropic:claude-sonnet-5"


def configure(cli: Cli, *, allow: list[str] | None = None, timeout: float = 20) -> None:
    server = stdio_config("basic", timeout=timeout)
    lines = [
        "[mcp_servers.basic]",
        f"command = {json.dumps(server.command)}",
        f"args = {json.dumps(server.args)}",
        f"cwd = {json.dumps(server.cwd)}",
        f"timeout = {timeout}",
        "[mcp_servers.basic.env]",
        *(f"{key} = {json.dumps(value)}" for key, value in server.env.items()),
    ]
    if allow:
        lines += ["[permissions]", f"allow = {json.dumps(allow)}"]
    (cli.workspace / "agent-tui.toml").write_text("\n".join(lines) + "\n")


def use_fake(cli: Cli, base_url: str) -> None:
    cli.env = {**cli.env, "ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": base_url}


def test_server_progress_prints_as_tool_progress_lines_and_the_result_is_committed(
    cli: Cli, tmp_path: Path
) -> None:
    configure(cli)
    script = [
        tool_use_response([("toolu_p", "basic__progress", {"steps": 3})]),
        text_response("Counted."),
    ]
    with spawn_fake_server(script, directory=tmp_path) as server:
        use_fake(cli, server.base_url)
        result = cli.run("run", "count to three", "--json", "--model", MODEL)
    assert result.returncode == 0, result.stderr
    lines = json_lines(result.stdout)
    progress = [line for line in lines if line["kind"] == "tool_progress"]
    assert [p["progress"] for p in progress] == [1, 2, 3]
    assert progress[-1]["message"] == "step 3 of 3"
    finished = [
        line for line in lines if line["kind"] == "tool_state_changed" and line["to"] == "completed"
    ]
    assert finished and finished[0]["result"] == "counted to 3"
    assert boundary_of(lines)["state"] == "completed"


def test_a_server_that_crashes_mid_call_fails_the_run_as_indeterminate(
    cli: Cli, tmp_path: Path
) -> None:
    configure(cli, allow=["basic__crash"])
    script = [tool_use_response([("toolu_c", "basic__crash", {})])]
    with spawn_fake_server(script, directory=tmp_path) as server:
        use_fake(cli, server.base_url)
        result = cli.run("run", "crash it", "--json", "--model", MODEL)
    assert result.returncode == 1
    boundary = boundary_of(json_lines(result.stdout))
    assert boundary["state"] == "failed"
    assert boundary["failure"]["code"] == "tool_indeterminate"
    assert "exited while running 'crash'" in result.stdout


def test_a_hanging_server_ends_the_call_without_hanging_the_run(cli: Cli, tmp_path: Path) -> None:
    configure(cli, timeout=2)
    script = [tool_use_response([("toolu_h", "basic__hang_readonly", {})]), text_response("ok")]
    with spawn_fake_server(script, directory=tmp_path) as server:
        use_fake(cli, server.base_url)
        result = cli.run("run", "wait", "--json", "--model", MODEL)
    assert result.returncode == 0, result.stderr
    failed = [
        line
        for line in json_lines(result.stdout)
        if line["kind"] == "tool_state_changed" and line["to"] == "failed"
    ]
    assert failed and "did not answer within 2" in failed[0]["error"]


def test_an_elicitation_round_trip_through_show_and_respond(cli: Cli, tmp_path: Path) -> None:
    configure(cli, allow=["basic__ask"])
    script = [tool_use_response([("toolu_a", "basic__ask", {})]), text_response("Greeted.")]
    with spawn_fake_server(script, directory=tmp_path) as server:
        use_fake(cli, server.base_url)
        holder = cli.spawn("run", "who am I?", "--json", "--model", MODEL)
        try:
            stream = LineStream(holder)
            seen = stream.json_until(
                lambda item, _: (
                    item["kind"] == "run_state_changed" and item["to"] == "input_required"
                )
            )
            request = seen[-1]["request"]
            assert request["kind"] == "elicitation"
            run_id = seen[-1]["run_id"]

            shown = cli.run("show", run_id)
            assert shown.returncode == 0, shown.stderr
            assert "Who are you?" in shown.stdout and "age" in shown.stdout
            assert "name" in shown.stdout

            answer = cli.run("respond", run_id, '{"name": "Ada", "age": 36}')
            assert answer.returncode == 0, answer.stderr
            code, out, err = finish(holder, timeout=60)
        except BaseException:
            kill_hard(holder)
            raise
    assert code == 0, err
    lines = [json.loads(line) for line in [*stream.lines, *out.splitlines()] if line.strip()]
    completed = [
        line for line in lines if line["kind"] == "tool_state_changed" and line["to"] == "completed"
    ]
    assert completed and completed[0]["result"] == "hello Ada, aged 36"


def test_a_shared_mcp_json_with_entries_agent_tui_cannot_use_is_warned_about_not_refused(
    cli: Cli,
) -> None:
    server = stdio_config("basic")
    entries = {
        "basic": {
            "command": server.command,
            "args": server.args,
            "env": server.env,
            "cwd": server.cwd,
            "description": "a key another tool uses",
        },
        "legacy": {"type": "sse", "url": "http://127.0.0.1:9/sse"},
        "off": {"command": "agent-tui-no-such-command", "disabled": True},
        "ws": {"type": "websocket", "url": "ws://127.0.0.1:9"},
    }
    (cli.workspace / ".mcp.json").write_text(json.dumps({"mcpServers": entries}, indent=2))

    ran = cli.run("run", "hello", "--json", "--model", "demo")
    doctor = cli.run("doctor")

    # The demo task runs (and stops at its question): the config was not refused.
    assert ran.returncode == 3, ran.stderr
    assert boundary_of(json_lines(ran.stdout))["state"] == "input_required"
    assert "mcpServers.off.disabled: disabled; skipped" in doctor.stdout
    assert "mcpServers.ws.type: unknown server type 'websocket'" in doctor.stdout
    assert "mcpServers.basic.description: unknown key, ignored" in doctor.stdout
    assert "basic (stdio): starts" in doctor.stdout
    assert "not offered: basic__background (requires MCP tasks)" in doctor.stdout
    assert "legacy (sse): error: could not connect to http://127.0.0.1:9/sse" in doctor.stdout


def test_respond_after_the_process_holding_the_form_died_says_why_and_how_to_go_on(
    cli: Cli, tmp_path: Path
) -> None:
    # Found by a new-user trial: the answer was refused with "it is failed: nothing to
    # answer", and only `show` said that the form's MCP session had ended.
    configure(cli, allow=["basic__ask"])
    script = [tool_use_response([("toolu_a", "basic__ask", {})])]
    with spawn_fake_server(script, directory=tmp_path) as server:
        use_fake(cli, server.base_url)
        holder = cli.spawn("run", "who am I?", "--json", "--model", MODEL)
        try:
            seen = LineStream(holder).json_until(
                lambda item, _: (
                    item["kind"] == "run_state_changed" and item["to"] == "input_required"
                )
            )
        finally:
            kill_hard(holder)
    run_id = seen[-1]["run_id"]

    answer = cli.run("respond", run_id, '{"name": "Ada", "age": 36}')
    assert (answer.returncode, answer.stdout) == (2, "")
    assert answer.stderr == (
        f"agent-tui: error: run {run_id} is not waiting for input: it failed — the request"
        " for input 'Who are you?' can no longer be answered: the MCP server"
        " session that asked for this ended when agent-tui stopped; retry it to be asked again"
        f" (agent-tui --db {cli.db} retry {run_id})\n"
    )
