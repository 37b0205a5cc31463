"""End to end in a real terminal (tmux): `kill PID` (SIGTERM) of the TUI while a run streams
quits as ctrl+q does — the terminal is given back as it was, the run is released as
interrupted (resumable) rather than left "running" by a process that is gone, and the quit
says so. Left to SIGTERM's default action, the process ended on the spot with the terminal
still in the app's alternate screen, mouse reporting on and the cursor hidden (a trial).
SIGHUP, and closing the terminal, end it as cleanly."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sqlite3
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.tui.test_e2e_tmux import AGENT_TUI, TMUX, _tmux, _wait_for_text

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(TMUX is None, reason="tmux is not installed (apt-get install -y tmux)"),
    pytest.mark.skipif(not AGENT_TUI.exists(), reason="the agent-tui command is not installed"),
]


async def _pane(session: str, formats: str) -> str:
    code, out = await _tmux("display-message", "-p", "-t", session, formats)
    assert code == 0, out
    return out.strip()


def _run_rows(db_path: Path) -> list[tuple[str, int]]:
    with sqlite3.connect(db_path) as conn:
        return list(conn.execute("SELECT state, interrupted FROM runs").fetchall())


async def _until(condition: object, what: str, *, timeout: float = 60.0) -> None:
    assert callable(condition)
    try:
        async with asyncio.timeout(timeout):
            while not await condition():
                await asyncio.sleep(0.05)
    except TimeoutError:
        pytest.fail(f"timed out waiting for {what}")


@contextlib.asynccontextmanager
async def _streaming_tui(
    db_path: Path, workspace: Path, tmp_path: Path
) -> AsyncIterator[tuple[str, int]]:
    """agent-tui in a tmux session, its run streaming: the session and agent-tui's pid. The
    shell around it stays, to say how it ended, with the terminal as it left it."""
    env = {
        "AGENT_TUI_MODEL": "demo",
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "TERM": "xterm-256color",
    }
    if "PYTHONPATH" in os.environ:  # the code under test, whatever environment tmux has
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    exports = " ".join(f"{key}={value!r}" for key, value in env.items())
    command = (
        f"cd {str(workspace)!r} && env -u ANTHROPIC_API_KEY -u OPENAI_API_KEY {exports} "
        f"{str(AGENT_TUI)!r} --db {str(db_path)!r} --workspace {str(workspace)!r}; "
        'echo "agent-tui exited with $?"; exec sleep 600'
    )
    session = f"agent-tui-signal-{uuid.uuid4().hex[:8]}"
    started = await _tmux("new-session", "-d", "-s", session, "-x", "140", "-y", "40", command)
    assert started[0] == 0, started[1]
    try:
        await _wait_for_text(session, "New job", timeout=60)
        # 200 KiB at the demo's reading pace: still streaming when the signal comes.
        assert (await _tmux("send-keys", "-t", session, "-l", "//stream 200"))[0] == 0
        await _wait_for_text(session, "//stream 200")
        assert (await _tmux("send-keys", "-t", session, "Enter"))[0] == 0

        async def streaming() -> bool:
            return db_path.exists() and _run_rows(db_path) == [("running", 0)]

        await _until(streaming, "the run to stream")
        assert await _pane(session, "#{alternate_on} #{mouse_any_flag}") == "1 1"
        shell = int(await _pane(session, "#{pane_pid}"))
        (pid,) = [
            int(child)
            for child in Path(f"/proc/{shell}/task/{shell}/children").read_text().split()
            if b"agent-tui" in Path(f"/proc/{child}/cmdline").read_bytes()
        ]
        yield session, pid
    finally:
        await _tmux("kill-session", "-t", session)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
async def test_a_stop_signal_while_a_run_streams_gives_the_terminal_back_and_releases_the_run(
    db_path: Path, workspace: Path, tmp_path: Path, signum: signal.Signals
) -> None:
    """SIGHUP sent with the terminal still there is as SIGTERM: 128 + its number."""
    async with _streaming_tui(db_path, workspace, tmp_path) as (session, pid):
        os.kill(pid, signum)

        await _wait_for_text(session, f"agent-tui exited with {128 + signum}")
        # The terminal as it was: main screen, no mouse reporting, the cursor shown.
        assert await _pane(session, "#{alternate_on} #{mouse_any_flag} #{cursor_flag}") == "0 0 1"
        # Released as a quit releases it: interrupted, waiting for a retry, not "running".
        assert _run_rows(db_path) == [("queued", 1)]
        await _wait_for_text(session, "1 run was still working")


async def test_closing_the_terminal_while_a_run_streams_releases_the_run_and_ends_the_process(
    db_path: Path, workspace: Path, tmp_path: Path
) -> None:
    """Found by a user trial: closing the terminal (SIGHUP) ended agent-tui on the spot, its
    run left "running (its process is gone)" until another agent-tui recovered it. Handled as
    SIGTERM is, the quit hung on the closed terminal and the process stayed."""
    async with _streaming_tui(db_path, workspace, tmp_path) as (session, pid):
        assert (await _tmux("kill-session", "-t", session))[0] == 0  # the terminal hangs up

        async def ended() -> bool:
            try:
                status = Path(f"/proc/{pid}/status").read_text()
            except FileNotFoundError:
                return True
            return "State:\tZ" in status

        await _until(ended, "agent-tui to exit")
        assert _run_rows(db_path) == [("queued", 1)]
