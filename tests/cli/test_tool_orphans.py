"""A ``shell`` command dies with agent-tui: ``kill -9`` of a real ``agent-tui run`` (Claude, the
real SDK against the fake server on loopback) while an allowed command waits and then appends a
line to a file; the line never appears, with the bubblewrap sandbox and without it.

The command waits for a file the test creates only after the kill, not for a fixed time: under
load the kill could otherwise come after the command had finished on its own (CI once saw the
line written by a command that had slept its 2 s before the "started" event arrived)."""

from __future__ import annotations

import os
import secrets
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from runtime.tools.sandbox import sandbox_status
from tests.cli.harness import Cli, LineStream, boundary_of, finish, json_lines, kill_hard
from tests.fakes.anthropic_server import spawn_fake_server, text_response, tool_use_response

pytestmark = pytest.mark.slow

MODEL = "anthropic:claude-sonnet-5"


def live_processes_mentioning(marker: str) -> list[int]:
    """Host pids of running (non-zombie) processes whose command line contains ``marker``."""
    found: list[int] = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as handle:
                cmdline = handle.read()
            with open(f"/proc/{entry.name}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        if marker.encode() in cmdline and stat[stat.rfind(b")") + 2 :].split()[0] != b"Z":
            found.append(int(entry.name))
    return found


def wait_until_gone(marker: str, *, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while live_processes_mentioning(marker):
        if time.monotonic() > deadline:
            raise AssertionError(f"processes of the command survived: {marker}")
        time.sleep(0.05)  # polling the process table, bounded by the deadline


def started(item: dict[str, Any], seen: list[dict[str, Any]]) -> bool:
    return item.get("kind") == "tool_progress" and item.get("message") == "started"


@pytest.mark.parametrize("mode", ["sandboxed", "unconfined", "unconfined-nohup"])
def test_a_shell_command_dies_with_agent_tui_and_never_writes_after_a_kill(
    cli: Cli, tmp_path: Path, mode: str
) -> None:
    if mode == "sandboxed" and not sandbox_status().available:
        pytest.skip(f"no shell sandbox here: {sandbox_status().detail}")
    if mode.startswith("unconfined"):
        cli.env["AGENT_TUI_BWRAP"] = ""  # no sandbox: the fallback path
    (cli.workspace / "agent-tui.toml").write_text('[permissions]\nallow = ["shell"]\n')
    marker = f"go-{secrets.token_hex(8)}"  # unique: it names the command's processes
    command = f"echo started; until [ -e {marker} ]; do sleep 0.05; done; echo late >> orphan.log"
    script = [
        tool_use_response([("toolu_orphan", "shell", {"command": command})]),
        text_response("done"),
    ]
    with spawn_fake_server(script, directory=tmp_path) as server:
        cli.env.update(ANTHROPIC_API_KEY="sk-ant-test-orphans", ANTHROPIC_BASE_URL=server.base_url)
        proc = cli.spawn("run", "append a line later", "--json", "--model", MODEL)
        if mode.startswith("unconfined"):
            # Without a sandbox the allow rule does not count: the call asks first.
            code, out, err = finish(proc)
            boundary = boundary_of(json_lines(out))
            assert code == 3 and boundary["state"] == "input_required", err
            assert boundary["request"]["kind"] == "approval"
            if mode == "unconfined-nohup":
                # Started with SIGHUP ignored, as under nohup: a shell cannot trap a signal
                # ignored when it starts, so the supervisor must not inherit that.
                previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
                try:
                    proc = cli.spawn("respond", boundary["run_id"], "allow", "--json")
                finally:
                    signal.signal(signal.SIGHUP, previous)
            else:
                proc = cli.spawn("respond", boundary["run_id"], "allow", "--json")
        stream = LineStream(proc)
        try:
            stream.json_until(started, timeout=60)
            assert live_processes_mentioning(marker), "the command is not running"
            os.kill(proc.pid, signal.SIGKILL)  # agent-tui alone, not its session
            proc.wait(timeout=10)
        finally:
            kill_hard(proc)
    # The command would go on only once the file exists: every process of it must be gone
    # first. Then the file is created, and nothing is left to write the line.
    wait_until_gone(marker, timeout=10)
    (cli.workspace / marker).touch()
    assert not live_processes_mentioning(marker)
    assert not (cli.workspace / "orphan.log").exists()
