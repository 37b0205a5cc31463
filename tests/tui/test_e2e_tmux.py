"""End to end: the installed `agent-tui` command in a real terminal (tmux), driven by keys."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

TMUX = shutil.which("tmux")
AGENT_TUI = Path(sys.executable).parent / "agent-tui"


async def _tmux(*args: str) -> tuple[int, str]:
    assert TMUX is not None
    process = await asyncio.create_subprocess_exec(
        TMUX, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    output, _ = await process.communicate()
    return process.returncode or 0, output.decode(errors="replace")


async def _screen(session: str) -> str:
    _, text = await _tmux("capture-pane", "-p", "-t", session)
    return text


async def _wait_for_text(session: str, text: str, *, timeout: float = 20.0) -> str:
    """Poll the terminal until ``text`` shows; fail with the last screen after ``timeout``."""
    screen = ""
    try:
        async with asyncio.timeout(timeout):
            while text not in screen:
                screen = await _screen(session)
                if text not in screen:
                    await asyncio.sleep(0.1)
    except TimeoutError:
        pytest.fail(f"{text!r} never appeared; the screen was:\n{screen}")
    return screen


async def _wait_for_exit(session: str, *, timeout: float = 15.0) -> None:
    async with asyncio.timeout(timeout):
        while (await _tmux("has-session", "-t", session))[0] == 0:
            await asyncio.sleep(0.1)


def _command(db_path: Path, workspace: Path, home: Path) -> str:
    env = {
        "AGENT_TUI_MODEL": "demo:instant",
        "XDG_CONFIG_HOME": str(home / "config"),
        "XDG_DATA_HOME": str(home / "data"),
        "TERM": "xterm-256color",
        "ANTHROPIC_API_KEY": "",
    }
    exports = " ".join(f"{key}={value!r}" for key, value in env.items())
    return (
        f"cd {str(workspace)!r} && env {exports} {str(AGENT_TUI)!r} "
        f"--db {str(db_path)!r} --workspace {str(workspace)!r}"
    )


@pytest.mark.skipif(TMUX is None, reason="tmux is not installed (apt-get install -y tmux)")
@pytest.mark.skipif(not AGENT_TUI.exists(), reason="the agent-tui command is not installed")
async def test_a_task_answered_by_keys_survives_quit_and_relaunch(
    db_path: Path, workspace: Path, tmp_path: Path
) -> None:
    session = f"agent-tui-e2e-{uuid.uuid4().hex[:8]}"
    command = _command(db_path, workspace, tmp_path)
    start = ("new-session", "-d", "-s", session, "-x", "140", "-y", "40", command)
    assert (await _tmux(*start))[0] == 0
    try:
        await _wait_for_text(session, "New job")
        await _tmux("send-keys", "-t", session, "-l", "summarise this project")
        await _tmux("send-keys", "-t", session, "Enter")
        await _wait_for_text(session, "What should the notes focus on")
        await _tmux("send-keys", "-t", session, "1")
        await _wait_for_text(session, "Allow write_file")
        await _tmux("send-keys", "-t", session, "y")
        await _wait_for_text(session, "completed")
        await _tmux("send-keys", "-t", session, "C-q")
        await _wait_for_exit(session)
        assert (workspace / "agent-notes.md").exists()

        assert (await _tmux(*start))[0] == 0
        # The job is in the browser (its title may be ellipsised in a narrow pane).
        screen = await _wait_for_text(session, "✓ summarise")
        assert "$0.00" in screen
        await _tmux("send-keys", "-t", session, "C-q")
        await _wait_for_exit(session)
    finally:
        await _tmux("kill-session", "-t", session)
    assert os.path.exists(db_path)
