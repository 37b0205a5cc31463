"""End to end in a real terminal (tmux), the installed `agent-tui` with Claude (the real SDK
against the fake Anthropic server on loopback):

- `kill -9` of the TUI while an allowed `shell` call waits and then appends a line to a file: the
  line never appears; on relaunch the run reads `failed · tool outcome unknown`, `R` shows the
  command and asks; "continue without it" completes the run without running the command, and
  "run it again" runs it exactly once (issue 12 point 10);
- `kill -9` 0.2 s after Enter on a new task leaves the job and its prompt in the database
  (issue 12 point 11).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import pytest

from runtime.tools.sandbox import sandbox_status
from tests.cli.test_tool_orphans import live_processes_mentioning
from tests.fakes.anthropic_server import (
    gate,
    spawn_fake_server,
    stream,
    text_response,
    tool_use_response,
)
from tests.tui.test_e2e_tmux import AGENT_TUI, TMUX, _screen, _tmux, _wait_for_text

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(TMUX is None, reason="tmux is not installed (apt-get install -y tmux)"),
    pytest.mark.skipif(not AGENT_TUI.exists(), reason="the agent-tui command is not installed"),
]

MODEL = "anthropic:claude-sonnet-5"
KEY = "sk-ant-test-retry-crash"


def _command(db_path: Path, workspace: Path, home: Path, base_url: str) -> str:
    """The TUI with Claude against the fake server; ``exec`` so the pane's pid is agent-tui."""
    env = {
        "AGENT_TUI_MODEL": MODEL,
        "ANTHROPIC_API_KEY": KEY,
        "ANTHROPIC_BASE_URL": base_url,
        "XDG_CONFIG_HOME": str(home / "config"),
        "XDG_DATA_HOME": str(home / "data"),
        "XDG_CACHE_HOME": str(home / "cache"),
        "TERM": "xterm-256color",
    }
    exports = " ".join(f"{key}={value!r}" for key, value in env.items())
    return (
        f"cd {str(workspace)!r} && exec env {exports} {str(AGENT_TUI)!r} "
        f"--db {str(db_path)!r} --workspace {str(workspace)!r}"
    )


def _rows(db_path: Path, sql: str, *args: object) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db_path) as conn:
        return list(conn.execute(sql, args).fetchall())


async def _until(condition: Any, what: str, *, timeout: float = 60.0) -> None:
    """Poll ``condition()`` (the database, the process table) until it holds, bounded."""
    try:
        async with asyncio.timeout(timeout):
            while not condition():
                await asyncio.sleep(0.05)
    except TimeoutError:
        pytest.fail(f"timed out waiting for {what}")


class Tui:
    """One tmux session running the TUI."""

    def __init__(self, command: str) -> None:
        self.session = f"agent-tui-retry-{uuid.uuid4().hex[:8]}"
        self.command = command

    async def start(self) -> None:
        started = await _tmux(
            "new-session", "-d", "-s", self.session, "-x", "150", "-y", "45", self.command
        )
        assert started[0] == 0, started[1]

    async def pid(self) -> int:
        code, out = await _tmux("display-message", "-p", "-t", self.session, "#{pane_pid}")
        assert code == 0, out
        return int(out.strip())

    async def keys(self, *keys: str, literal: bool = False) -> None:
        flags = ["-l"] if literal else []
        code, out = await _tmux("send-keys", "-t", self.session, *flags, *keys)
        assert code == 0, out

    async def wait_for(self, text: str, *, timeout: float = 60.0) -> str:
        return await _wait_for_text(self.session, text, timeout=timeout)

    async def open_job_under_cursor(self, shown: str) -> None:
        """Tab to the browser (the app starts in the composer), then Enter on its row until
        ``shown`` is on screen (the browser may still be filling its first page when the first
        Enter arrives)."""
        await self.keys("Tab")
        await self.wait_for("n New job")  # the browser's keys, in the footer
        async with asyncio.timeout(60):
            while shown not in await _screen(self.session):
                await self.keys("Enter")
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(3):
                        while shown not in await _screen(self.session):
                            await asyncio.sleep(0.1)

    async def kill_app(self) -> None:
        """``kill -9`` of agent-tui alone (not its session, nor the tools it started); returns
        once tmux saw it die."""
        pid = await self.pid()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        assert b"agent-tui" in cmdline  # the app itself, not a shell around it
        os.kill(pid, signal.SIGKILL)
        async with asyncio.timeout(30):
            while (await _tmux("has-session", "-t", self.session))[0] == 0:
                await asyncio.sleep(0.1)

    async def close(self) -> None:
        await _tmux("kill-session", "-t", self.session)


@pytest.mark.parametrize("choice", ["continue without it", "run it again"])
async def test_a_shell_call_cut_off_by_kill_9_never_acts_alone_and_the_retry_asks_first(
    db_path: Path, workspace: Path, tmp_path: Path, choice: str
) -> None:
    if not sandbox_status().available:
        pytest.skip(f"no shell sandbox here (an allowed shell call would ask): {sandbox_status()}")
    (workspace / "agent-tui.toml").write_text('[permissions]\nallow = ["shell"]\n')
    # The command writes its line only once the test lets it (the file ``go``, made once no
    # process of the command is left): however loaded the machine, agent-tui is killed before
    # the line could be written (a command that slept 2 s, then 6 s, was once not killed in
    # time under two busy loops and a parallel test run). The marker, unique, names the
    # command's processes.
    marker = f"go{secrets.randbelow(10**6):06d}"
    command = f"until [ -e {marker} ]; do sleep 0.1; done; echo x >> out.log"
    out_log = workspace / "out.log"
    script = [
        tool_use_response([("toolu_crash", "shell", {"command": command})]),
        text_response("Finished after the retry."),
    ]
    with spawn_fake_server(script, directory=tmp_path) as server:
        tui_command = _command(db_path, workspace, tmp_path, server.base_url)
        first, second = Tui(tui_command), Tui(tui_command)
        try:
            await first.start()
            await first.wait_for("New job")
            await first.keys("append a line later", literal=True)
            await first.wait_for("append a line later")
            await first.keys("Enter")
            await _until(
                lambda: (
                    _rows(db_path, "SELECT state FROM tool_calls") == [("running",)]
                    and live_processes_mentioning(marker)
                ),
                "the shell call to run",
            )
            await first.kill_app()
            await _until(
                lambda: not live_processes_mentioning(marker),
                "the command's processes to die with agent-tui",
            )
            # Let it write: a process of the command left behind would now act alone.
            (workspace / marker).touch()
            assert not out_log.exists()

            await second.start()
            # The relaunch finds the run (its owner is dead) and fails it: the outcome is unknown.
            await _until(
                lambda: _rows(db_path, "SELECT state FROM tool_calls") == [("indeterminate",)],
                "the call to be marked indeterminate",
            )
            await second.wait_for("append a line", timeout=30)  # the job, in the browser
            await second.open_job_under_cursor("failed · tool outcome unknown (R retry")
            screen = await _screen(second.session)
            assert "interrupted (R" not in screen
            await second.keys("R")
            screen = await second.wait_for("The outcome of this call is unknown")
            assert f"$ {command[:30]}" in screen  # the rest wraps
            assert "1. Run it again" in screen and "2. Continue without it" in screen
            assert len(_rows(db_path, "SELECT id FROM runs")) == 1  # nothing ran yet
            assert not out_log.exists()

            await second.keys("2" if choice == "continue without it" else "1")
            await _until(
                lambda: (
                    _rows(db_path, "SELECT state FROM runs WHERE retry_of_run_id IS NOT NULL")
                    == [("completed",)]
                ),
                "the retry to complete",
            )
            await second.wait_for("Finished after the retry.")
            await second.wait_for("completed")
        finally:
            await first.close()
            await second.close()
        requests = [r for r in server.requests() if r["path"].endswith("/messages")]

    assert len(requests) == 2  # the first run's step, then the retry's
    [result] = [
        block
        for message in requests[1]["body"]["messages"]
        for block in (message["content"] if isinstance(message["content"], list) else [])
        if block.get("type") == "tool_result"
    ]
    states = _rows(db_path, "SELECT state FROM runs ORDER BY created_at")
    assert states == [("failed",), ("completed",)]
    if choice == "continue without it":
        assert not out_log.exists()  # never ran again
        text = result["content"] if isinstance(result["content"], str) else str(result["content"])
        assert result.get("is_error") is True
        assert "outcome of this call is unknown" in text and command in text
    else:
        assert out_log.read_text() == "x\n"  # exactly once
        assert not result.get("is_error")


async def test_a_kill_0_2_s_after_enter_leaves_the_claude_task_and_its_prompt_in_the_database(
    db_path: Path, workspace: Path, tmp_path: Path
) -> None:
    prompt = f"remember this task {uuid.uuid4().hex[:6]}"
    # The model never answers (held at a gate): nothing but the send can have stored the task.
    script = [stream([gate("never")])]
    with spawn_fake_server(script, directory=tmp_path) as server:
        tui = Tui(_command(db_path, workspace, tmp_path, server.base_url))
        try:
            await tui.start()
            await tui.wait_for("New job")
            await tui.keys(prompt, literal=True)
            await tui.wait_for(prompt)  # typed: the app has the text
            await tui.keys("Enter")
            await asyncio.sleep(0.2)  # the scenario: the app dies 0.2 s after Enter
            await tui.kill_app()
        finally:
            await tui.close()
    [(run_id, task)] = _rows(db_path, "SELECT id, input FROM runs")
    assert task == prompt
    assert len(_rows(db_path, "SELECT id FROM jobs")) == 1
    said = _rows(db_path, "SELECT content FROM messages WHERE run_id = ? AND role = 'user'", run_id)
    assert len(said) == 1 and prompt in said[0][0]
