"""A stdio MCP server dies with agent-tui: ``kill -9`` of a real ``agent-tui run`` (Claude, the
real SDK against the fake server on loopback) that has used a server which outlives its stdin —
a worker thread keeps its interpreter up — and started a helper process; neither is left running.

Most servers end when their stdin closes, and so with agent-tui; this one does not, as a server
whose thread or child process is still busy does not (``lingering`` in tests.fakes.mcp_servers)."""

from __future__ import annotations

import json
import os
import secrets
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tests.cli.harness import Cli, LineStream, kill_hard
from tests.fakes.anthropic_server import (
    gate,
    message_start,
    spawn_fake_server,
    stream,
    tool_use_response,
)
from tests.fakes.mcp_servers import stdio_config

pytestmark = pytest.mark.slow

MODEL = "anthropic:claude-sonnet-5"


def running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not: it is dead, and init may never collect it)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 :].split()[0] != b"Z"


def started_with(marker: str) -> list[int]:
    """Running processes whose environment holds ``marker`` (the server's, and its children's)."""
    found: list[int] = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as handle:
                environ = handle.read()
        except OSError:
            continue
        if marker.encode() in environ.split(b"\0") and running(int(entry.name)):
            found.append(int(entry.name))
    return found


def wait_until_gone(pids: dict[str, int], *, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while alive := [name for name, pid in pids.items() if running(pid)]:
        if time.monotonic() > deadline:
            raise AssertionError(f"left running after agent-tui was killed: {alive} ({pids})")
        time.sleep(0.05)  # polling the process table, bounded by the deadline


def write_config(workspace: Path, marker: str) -> None:
    server = stdio_config("lingering")
    variables = {**server.env, "AGENT_TUI_TEST_MARKER": marker}
    env = ", ".join(f"{key} = {json.dumps(value)}" for key, value in variables.items())
    (workspace / "agent-tui.toml").write_text(
        "[mcp_servers.lingering]\n"
        f"command = {json.dumps(server.command)}\n"
        f"args = {json.dumps(list(server.args))}\n"
        f"cwd = {json.dumps(str(server.cwd))}\n"
        f"env = {{ {env} }}\n"
    )


def pids_reported(item: dict[str, Any], seen: list[dict[str, Any]]) -> bool:
    return (
        item.get("kind") == "tool_state_changed"
        and item.get("name") == "lingering__pids"
        and item.get("to") == "completed"
    )


def test_a_stdio_mcp_server_that_outlives_its_input_dies_with_agent_tui_killed_hard(
    cli: Cli, tmp_path: Path
) -> None:
    marker = f"AGENT_TUI_TEST_MARKER=mcp-{secrets.token_hex(8)}"
    write_config(cli.workspace, marker.partition("=")[2])
    script = [
        tool_use_response([("toolu_pids", "lingering__pids", {})]),
        stream([message_start(), gate("never")]),  # agent-tui waits here, the server still up
    ]
    try:
        with spawn_fake_server(script, directory=tmp_path) as server:
            cli.env.update(ANTHROPIC_API_KEY="sk-ant-test-mcp", ANTHROPIC_BASE_URL=server.base_url)
            proc = cli.spawn("run", "use the server", "--json", "--model", MODEL)
            try:
                seen = LineStream(proc).json_until(pids_reported, timeout=60)
                pids: dict[str, int] = json.loads(seen[-1]["result"])
                assert running(pids["server"]) and running(pids["helper"])
                os.kill(proc.pid, signal.SIGKILL)  # agent-tui alone, not its session
                proc.wait(timeout=10)
            finally:
                kill_hard(proc)
        wait_until_gone(pids, timeout=10)
    finally:
        for pid in started_with(marker):  # whatever survived a failed check
            os.kill(pid, signal.SIGKILL)
