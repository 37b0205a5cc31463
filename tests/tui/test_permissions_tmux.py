"""End to end in a real terminal (tmux): answer `A` on an approval, revoke the rule on the
permissions screen, start a new task: it asks again, in the same process."""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path

import pytest

from tests.tui.test_e2e_tmux import (
    AGENT_TUI,
    APPROVAL_KEYS,
    TMUX,
    _command,
    _screen,
    _tmux,
    _wait_for_exit,
    _wait_for_text,
)

pytestmark = pytest.mark.slow


async def _keys(session: str, *keys: str, literal: bool = False) -> None:
    args = ["send-keys", "-t", session, *(["-l"] if literal else []), *keys]
    assert (await _tmux(*args))[0] == 0


async def _wait_for_gone(session: str, text: str, *, timeout: float = 20.0) -> None:
    async with asyncio.timeout(timeout):
        while text in await _screen(session):
            await asyncio.sleep(0.1)


@pytest.mark.skipif(TMUX is None, reason="tmux is not installed (apt-get install -y tmux)")
@pytest.mark.skipif(not AGENT_TUI.exists(), reason="the agent-tui command is not installed")
async def test_a_rule_revoked_on_the_permissions_screen_asks_again_without_restart(
    db_path: Path, workspace: Path, tmp_path: Path
) -> None:
    session = f"agent-tui-perm-{uuid.uuid4().hex[:8]}"
    command = _command(db_path, workspace, tmp_path)
    start = ("new-session", "-d", "-s", session, "-x", "140", "-y", "40", command)
    assert (await _tmux(*start))[0] == 0
    try:
        await _wait_for_text(session, "New job")
        await _keys(session, "summarise this project", literal=True)
        await _keys(session, "Enter")
        await _wait_for_text(session, "Enter: choose")  # the prompt itself, not the call line
        await _keys(session, "1", "Enter")  # an option's number, then Enter
        await _wait_for_text(session, APPROVAL_KEYS)
        await _keys(session, "A")
        await _wait_for_text(session, "completed")
        assert "write_file" in (workspace / "agent-tui.toml").read_text()
        os.remove(workspace / "agent-notes.md")

        await _keys(session, "C-p")
        await _wait_for_text(session, "Search for commands")
        await _keys(session, "Permissions", literal=True)
        await _wait_for_text(session, "Every allow / ask / deny rule")
        await _keys(session, "Enter")
        screen = await _wait_for_text(session, "Permissions — rules for tool calls")
        assert "write_file" in screen and "workspace" in screen
        await _keys(session, "d")  # asks first; d again (or y) revokes
        await _wait_for_text(session, "Revoke allow write_file")
        await _keys(session, "d")
        await _wait_for_text(session, "Rule revoked")
        await _wait_for_text(session, "No permission rules saved")
        await _keys(session, "Escape")
        await _wait_for_gone(session, "Permissions — rules for tool calls")
        assert "write_file" not in (workspace / "agent-tui.toml").read_text()

        await _keys(session, "/new summarise it again", literal=True)
        await _keys(session, "Enter")
        await _wait_for_text(session, "Enter: choose")  # the prompt itself, not the call line
        await _keys(session, "1", "Enter")  # an option's number, then Enter
        await _wait_for_text(session, APPROVAL_KEYS)
        await _keys(session, "C-q")
        await _wait_for_exit(session)
    finally:
        await _tmux("kill-session", "-t", session)
