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
APPROVAL_KEYS = "n deny"
"""In an approval's keys line (its long and short forms), which shows once it takes answers:
keys sent before that are text for the message box (``tui.widgets._prompt_base``)."""


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
    try:
        async with asyncio.timeout(timeout):
            while (await _tmux("has-session", "-t", session))[0] == 0:
                await asyncio.sleep(0.1)
    except TimeoutError:
        screen = await _screen(session)
        pytest.fail(f"agent-tui did not exit within {timeout:.0f} s; the screen was:\n{screen}")


def _command(db_path: Path, workspace: Path, home: Path) -> str:
    env = {
        "AGENT_TUI_MODEL": "demo:instant",
        "XDG_CONFIG_HOME": str(home / "config"),
        "XDG_DATA_HOME": str(home / "data"),
        "XDG_CACHE_HOME": str(home / "cache"),
        "TERM": "xterm-256color",
        "ANTHROPIC_API_KEY": "",
    }
    exports = " ".join(f"{key}={value!r}" for key, value in env.items())
    # A crash would close the pane and take its traceback with it (and, with the last pane,
    # the tmux server: a test then saw only "no server running"); the pane stays open instead,
    # showing what the app printed and its exit status, for the failure message to carry.
    return (
        f"cd {str(workspace)!r} && env {exports} {str(AGENT_TUI)!r} "
        f"--db {str(db_path)!r} --workspace {str(workspace)!r}; status=$?; "
        f'[ $status -eq 0 ] || {{ echo "agent-tui exited with status $status"; sleep 600; }}'
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
        await _wait_for_text(session, "Enter: choose")  # the prompt itself, not the call line
        await _tmux("send-keys", "-t", session, "1", "Enter")  # an option's number, then Enter
        await _wait_for_text(session, APPROVAL_KEYS)
        await _tmux("send-keys", "-t", session, "y")
        await _wait_for_text(session, "completed")
        await _tmux("send-keys", "-t", session, "C-q")
        await _wait_for_exit(session)
        assert (workspace / "agent-notes.md").exists()

        assert (await _tmux(*start))[0] == 0
        # The job is in the browser (its title may be ellipsised in a narrow pane).
        await _wait_for_text(session, "✓ summarise")  # the first page, before the runtime opens
        await _wait_for_text(session, "$0.00")  # its figures, once it is open
        await _tmux("send-keys", "-t", session, "C-q")
        await _wait_for_exit(session)
    finally:
        await _tmux("kill-session", "-t", session)
    assert os.path.exists(db_path)


async def _paste(session: str, text: str) -> None:
    """A bracketed paste, as a terminal sends one when text is pasted into it."""
    buffer = f"buf-{session}"
    assert (await _tmux("set-buffer", "-b", buffer, text))[0] == 0
    assert (await _tmux("paste-buffer", "-p", "-d", "-b", buffer, "-t", session))[0] == 0


def _demo_command(db_path: Path, workspace: Path, home: Path, model: str) -> str:
    return _command(db_path, workspace, home).replace("demo:instant", model)


async def _read_db(db_path: Path, sql: str) -> list[tuple[object, ...]]:
    import sqlite3

    with sqlite3.connect(db_path) as conn:
        return list(conn.execute(sql).fetchall())


@pytest.mark.sandbox
@pytest.mark.skipif(TMUX is None, reason="tmux is not installed (apt-get install -y tmux)")
@pytest.mark.skipif(not AGENT_TUI.exists(), reason="the agent-tui command is not installed")
async def test_keys_in_a_real_terminal_paste_answer_interrupt_queue_and_help(
    db_path: Path, workspace: Path, tmp_path: Path
) -> None:
    session = f"agent-tui-keys-{uuid.uuid4().hex[:8]}"
    command = _demo_command(db_path, workspace, tmp_path, "demo")  # streams at reading speed
    start = ("new-session", "-d", "-s", session, "-x", "120", "-y", "40", command)
    assert (await _tmux(*start))[0] == 0
    try:
        await _wait_for_text(session, "New job")
        # /help opens the help and creates no job.
        await _tmux("send-keys", "-t", session, "-l", "/help")
        await _tmux("send-keys", "-t", session, "Enter")
        await _wait_for_text(session, "Esc to close")
        await _tmux("send-keys", "-t", session, "Escape")
        async with asyncio.timeout(20):  # the help is closed: the composer has focus again
            while "Esc to close" in await _screen(session):
                await asyncio.sleep(0.1)
        assert await _read_db(db_path, "SELECT count(*) FROM jobs") == [(0,)]

        # A bracketed paste of a 3-line task: every line reaches the stored user message.
        await _paste(session, "summarise this project\nsecond line of the task\nthird line")
        await _tmux("send-keys", "-t", session, "Enter")
        await _wait_for_text(session, "What should the notes focus on", timeout=60)
        await _wait_for_text(session, "Enter: choose")  # its keys line: it takes answers
        [(task,)] = await _read_db(db_path, "SELECT input FROM runs")
        assert task == "summarise this project\nsecond line of the task\nthird line"

        # A plain-word answer typed straight into the question prompt, with action letters in
        # it (c cancels, f forks elsewhere): recorded as the answer; nothing cancelled or forked.
        await _tmux("send-keys", "-t", session, "-l", "cool, focus on files")
        await _tmux("send-keys", "-t", session, "Enter")
        await _wait_for_text(session, APPROVAL_KEYS, timeout=60)
        answers = await _read_db(
            db_path, "SELECT answer FROM input_requests WHERE kind = 'question'"
        )
        assert answers == [('"cool, focus on files"',)]
        assert await _read_db(db_path, "SELECT count(*) FROM jobs") == [(1,)]
        assert await _read_db(db_path, "SELECT state FROM runs") == [("input_required",)]
        await _tmux("send-keys", "-t", session, "y")
        await _wait_for_text(session, "completed", timeout=60)

        # A follow-up that streams; a message typed meanwhile is queued, then Esc stops the
        # stream within 2 s with its text on screen, and the queue comes back to the box.
        await _tmux("send-keys", "-t", session, "-l", "//stream 200")
        await _tmux("send-keys", "-t", session, "Enter")
        await _wait_for_text(session, "The durable runtime commits", timeout=60)
        await _tmux("send-keys", "-t", session, "Escape")
        loop = asyncio.get_running_loop()
        pressed = loop.time()
        async with asyncio.timeout(10):
            while True:
                rows = await _read_db(db_path, "SELECT state FROM runs WHERE input = '/stream 200'")
                if rows == [("cancelled",)]:
                    break
                await asyncio.sleep(0.05)
        assert loop.time() - pressed < 2.0
        screen = await _screen(session)
        assert "The durable runtime commits" in screen  # the streamed text stays

        # While a run works, Enter queues the message; it becomes the job's next root run.
        await _tmux("send-keys", "-t", session, "-l", "//stream 3")
        await _tmux("send-keys", "-t", session, "Enter")
        async with asyncio.timeout(30):
            while await _read_db(db_path, "SELECT state FROM runs WHERE input = '/stream 3'") != [
                ("running",)
            ]:
                await asyncio.sleep(0.05)
        await _tmux("send-keys", "-t", session, "-l", "and then say thanks")
        await _tmux("send-keys", "-t", session, "Enter")
        await _wait_for_text(session, "queued: and then say thanks", timeout=30)
        async with asyncio.timeout(240):  # the demo streams at reading speed; a loaded CI
            while not await _read_db(
                db_path, "SELECT state FROM runs WHERE input = 'and then say thanks'"
            ):
                await asyncio.sleep(0.1)
        jobs = await _read_db(db_path, "SELECT count(DISTINCT job_id) FROM runs")
        assert jobs == [(1,)]
        roots = await _read_db(db_path, "SELECT input FROM runs WHERE parent_run_id IS NULL")
        assert [row[0] for row in roots][-2:] == ["/stream 3", "and then say thanks"]

        await _tmux("send-keys", "-t", session, "C-q")
        await _wait_for_exit(session)
    finally:
        await _tmux("kill-session", "-t", session)
