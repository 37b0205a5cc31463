"""End to end (tmux): one database shared by a TUI that runs the demo task, a process polling
`runs --json` all the while, and a second TUI (issue 12 point 1). The poller never writes and
never steals the run; both TUIs show it and either can answer its prompts."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
import uuid
from pathlib import Path

import pytest

from runtime.api import Runtime
from runtime.config import Config
from runtime.models import RunState
from tests.tui.test_e2e_tmux import (
    AGENT_TUI,
    APPROVAL_KEYS,
    TMUX,
    _command,
    _screen,
    _tmux,
    _wait_for_text,
)

pytestmark = pytest.mark.slow

POLL_FOR = 30.0
POLL_EVERY = 0.2


async def _poll_runs(db_path: Path, workspace: Path, pids: list[int], stop: asyncio.Event) -> int:
    """`agent-tui --db SAME runs --json` every 0.2 s until ``stop``; how many calls failed."""
    failures = 0
    while not stop.is_set():
        process = await asyncio.create_subprocess_exec(
            str(AGENT_TUI),
            "--db",
            str(db_path),
            "--workspace",
            str(workspace),
            "runs",
            "--json",
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        pids.append(process.pid)
        async with asyncio.timeout(60):
            failures += await process.wait() != 0
        await asyncio.sleep(POLL_EVERY)
    return failures


async def _open_from_inbox(session: str) -> None:
    """Enter on the inbox's entry until the question shows (the list may still be mounting)."""
    async with asyncio.timeout(30):
        while "1. A short overview" not in await _screen(session):
            await _tmux("send-keys", "-t", session, "Enter")
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(2):
                    while "1. A short overview" not in await _screen(session):
                        await asyncio.sleep(0.1)


def _owners(db_path: Path) -> list[str]:
    with sqlite3.connect(db_path) as conn:
        return [r[0] for r in conn.execute("SELECT owner_id FROM owners ORDER BY owner_id")]


async def _run_facts(db_path: Path, workspace: Path) -> tuple[str, RunState, list[str]]:
    """The one run's id, state and the states it went through (read-only)."""
    reader = await Runtime.open(
        db_path=db_path, workspace=workspace, config=Config(), read_only=True
    )
    try:
        [run] = (await reader.list_runs()).items
        states = [
            e.to_state.value
            for e in await reader.events(run_id=run.id, limit=1000)
            if e.kind == "run_state_changed"
        ]
        return run.id, run.state, states
    finally:
        await reader.close()


@pytest.mark.skipif(TMUX is None, reason="tmux is not installed (apt-get install -y tmux)")
@pytest.mark.skipif(not AGENT_TUI.exists(), reason="the agent-tui command is not installed")
async def test_a_poller_never_steals_the_tuis_run_and_a_second_tui_can_answer_it(
    db_path: Path, workspace: Path, tmp_path: Path
) -> None:
    first = f"agent-tui-owner-{uuid.uuid4().hex[:8]}"
    second = f"agent-tui-watch-{uuid.uuid4().hex[:8]}"
    command = _command(db_path, workspace, tmp_path)
    assert (await _tmux("new-session", "-d", "-s", first, "-x", "140", "-y", "40", command))[0] == 0
    stop = asyncio.Event()
    poller_pids: list[int] = []
    poller: asyncio.Task[int] | None = None
    try:
        await _wait_for_text(first, "New job")
        poller = asyncio.create_task(_poll_runs(db_path, workspace, poller_pids, stop))
        started = time.monotonic()
        await _tmux("send-keys", "-t", first, "-l", "summarise this project")
        await _tmux("send-keys", "-t", first, "Enter")
        await _wait_for_text(first, "What should the notes focus on", timeout=60)
        # Keep polling for the whole 30 s while the run waits for its answer.
        await asyncio.sleep(max(0.0, POLL_FOR - (time.monotonic() - started)))
        stop.set()
        assert await poller == 0
        assert len(poller_pids) >= 5

        owners = _owners(db_path)
        assert len(owners) == 1  # the TUI that runs it; no row from any poller
        assert not any(f":{pid}:" in owner for owner in owners for pid in poller_pids)
        _, state, states = await _run_facts(db_path, workspace)
        assert state is RunState.INPUT_REQUIRED
        assert "queued" not in states[1:]  # created queued, never requeued

        # A second TUI on the same database shows the run and its question, and answers it.
        second_start = ("new-session", "-d", "-s", second, "-x", "140", "-y", "40", command)
        assert (await _tmux(*second_start))[0] == 0
        await _wait_for_text(second, "? summarise", timeout=30)  # waiting, in the browser
        # It starts in the composer, as any launch does: Tab to the browser, then its keys.
        await _tmux("send-keys", "-t", second, "Tab")
        await _wait_for_text(second, "i Inbox")
        await _tmux("send-keys", "-t", second, "i")
        await _wait_for_text(second, "question    summarise")
        await _open_from_inbox(second)
        assert "What should the notes focus on" in await _screen(second)
        await _wait_for_text(second, "Enter: choose")  # its keys line: it takes answers
        await _tmux("send-keys", "-t", second, "1", "Enter")  # the option's number, then Enter
        # The first TUI follows the run from the database and answers the approval.
        await _wait_for_text(first, APPROVAL_KEYS, timeout=60)
        await _tmux("send-keys", "-t", first, "y")
        await _wait_for_text(first, "completed", timeout=60)
        await _wait_for_text(second, "completed", timeout=60)
        assert (workspace / "agent-notes.md").exists()
        _, state, states = await _run_facts(db_path, workspace)
        assert state is RunState.COMPLETED
        assert not any(f":{pid}:" in owner for owner in _owners(db_path) for pid in poller_pids)
    finally:
        stop.set()
        if poller is not None and not poller.done():
            poller.cancel()
            await asyncio.gather(poller, return_exceptions=True)
        await _tmux("kill-session", "-t", first)
        await _tmux("kill-session", "-t", second)
