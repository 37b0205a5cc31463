"""Attention (issue 11 point 8): when a run waits for input unseen, the bell and a desktop
notification (OSC 9 / OSC 777) reach the terminal, as ``[defaults] notify`` says."""

from __future__ import annotations

import asyncio
import contextlib
import os
import pty
import re
import sys
from pathlib import Path

import pytest

from runtime.config import Defaults
from tui.attention import desktop_sequences

AGENT_TUI = Path(sys.executable).parent / "agent-tui"


def test_desktop_sequences_are_osc_9_and_777_with_control_characters_removed() -> None:
    data = desktop_sequences("agent-tui", "Allow\x1b]0;evil\x07 write_file; now?")
    assert data.startswith("\x1b]9;agent-tui: Allow ]0;evil write_file; now?\x07")
    nine, seven = data.split("\x07")[:2]
    assert "\x1b" not in nine[1:] and "\x1b" not in seven[1:]
    assert seven.startswith("\x1b]777;notify;agent-tui;")
    assert seven.count(";") == 3  # the body's ';' cannot split the fields
    assert data.endswith("\x07")


def test_notify_defaults_to_both_and_refuses_an_unknown_mode() -> None:
    assert Defaults().notify == "both"
    assert Defaults(notify="off").notify == "off"
    with pytest.raises(ValueError):
        Defaults(notify="loud")  # type: ignore[arg-type]


def _outside_osc(data: bytes) -> bytes:
    """The output without its OSC sequences (their BEL terminators are not bells)."""
    return re.sub(rb"\x1b\][^\x07\x1b]*(\x07|\x1b\\)", b"", data)


async def _run_in_a_pty(workspace: Path, home: Path, db_path: Path, notify: str) -> bytes:
    """The real command in a pseudo-terminal: start a task, tell the app the terminal lost
    focus, and collect what it writes until the demo's question has been announced."""
    (workspace / "agent-tui.toml").write_text(f'[defaults]\nnotify = "{notify}"\n')
    env = {
        **os.environ,
        "AGENT_TUI_MODEL": "demo:instant",
        "XDG_CONFIG_HOME": str(home / "config"),
        "XDG_DATA_HOME": str(home / "data"),
        "XDG_CACHE_HOME": str(home / "cache"),
        "TERM": "xterm-256color",
        "ANTHROPIC_API_KEY": "",
        "COLUMNS": "120",
        "LINES": "36",
    }
    main, child = pty.openpty()
    os.set_blocking(main, False)
    process = await asyncio.create_subprocess_exec(
        str(AGENT_TUI),
        "--db",
        str(db_path),
        "--workspace",
        str(workspace),
        cwd=workspace,
        env=env,
        stdin=child,
        stdout=child,
        stderr=child,
    )
    os.close(child)
    seen = bytearray()
    loop = asyncio.get_running_loop()

    async def read_until(marker: bytes, timeout: float = 20.0) -> None:
        async with asyncio.timeout(timeout):
            while marker not in seen:
                ready = asyncio.Event()
                loop.add_reader(main, ready.set)
                try:
                    await ready.wait()
                finally:
                    loop.remove_reader(main)
                try:
                    seen.extend(os.read(main, 65536))
                except BlockingIOError:
                    continue

    try:
        await read_until(b"New job")
        os.write(main, b"\x1b[O")  # focus out: the terminal is in the background
        os.write(main, b"summarise this project\r")
        # The prompt itself (the question shows in the call's line earlier); the alert goes out
        # when the run starts waiting, which may be drawn a moment before or after it.
        await read_until(b"Enter: choose")
        with contextlib.suppress(TimeoutError):
            await read_until(b"\x1b]777;notify;", timeout=10)
        mark = len(seen)
        os.write(main, b"\x11")  # ctrl+q
        exited = asyncio.ensure_future(process.wait())
        with contextlib.suppress(TimeoutError, OSError):
            await read_until(b"\x00never\x00", timeout=3)  # keep draining while it quits
        async with asyncio.timeout(15):
            await exited
        return bytes(seen[:mark])
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        os.close(main)


@pytest.mark.slow
@pytest.mark.skipif(not AGENT_TUI.exists(), reason="the agent-tui command is not installed")
async def test_an_unseen_question_rings_and_sends_a_desktop_notification_to_the_terminal(
    workspace: Path, db_path: Path, tmp_path: Path
) -> None:
    out = await _run_in_a_pty(workspace, tmp_path, db_path, "both")
    assert b"\x1b]9;agent-tui: a run waits: " in out
    assert b"\x1b]777;notify;agent-tui: a run waits;" in out
    assert b"\x07" in _outside_osc(out)  # the bell itself


@pytest.mark.slow
@pytest.mark.skipif(not AGENT_TUI.exists(), reason="the agent-tui command is not installed")
async def test_notify_off_sends_nothing(workspace: Path, db_path: Path, tmp_path: Path) -> None:
    out = await _run_in_a_pty(workspace, tmp_path, db_path, "off")
    assert b"\x1b]9;" not in out and b"\x1b]777;" not in out
    assert b"\x07" not in _outside_osc(out)
