"""Keys first (DESIGN §12, §13): while the program's app runs, a thread that wants the GIL (the
terminal's input and output threads, the store's worker) gets it within a millisecond rather than
the interpreter's five, and the interpreter's setting is given back when the app ends."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from tui.app import UI_SWITCH_INTERVAL, AgentTuiApp, responsive_threads, run_app


def test_the_program_runs_its_app_with_the_ui_switch_interval_and_restores_it_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    seen: list[float] = []
    real_run_async = AgentTuiApp.run_async

    async def look_then_quit(pilot: Pilot[Any]) -> None:
        app = pilot.app
        assert isinstance(app, AgentTuiApp)
        async with asyncio.timeout(60):
            while app.runtime is None:  # opened after the first frame: let it finish first
                await pilot.pause(0.01)
        seen.append(sys.getswitchinterval())
        app.exit()

    async def headless_run_async(self: AgentTuiApp, **_: Any) -> Any:
        # The real app, without a terminal: the pilot looks at the interpreter from inside it.
        return await real_run_async(self, headless=True, size=(80, 24), auto_pilot=look_then_quit)

    monkeypatch.setattr(AgentTuiApp, "run_async", headless_run_async)
    before = sys.getswitchinterval()
    assert before != UI_SWITCH_INTERVAL  # the interpreter's own (5 ms) while no app runs
    assert run_app(db_path=tmp_path / "data" / "agent-tui.db", workspace=workspace) == 0
    assert seen == [UI_SWITCH_INTERVAL]
    assert sys.getswitchinterval() == before


def test_responsive_threads_gives_the_interval_back_when_the_app_fails() -> None:
    before = sys.getswitchinterval()
    with pytest.raises(RuntimeError), responsive_threads(0.002):
        assert sys.getswitchinterval() == 0.002
        raise RuntimeError("the app crashed")
    assert sys.getswitchinterval() == before


@pytest.mark.parametrize(("set_by_person", "expected"), [(None, "120"), ("30", "30")])
def test_the_program_draws_at_up_to_120_frames_a_second_unless_the_person_chose(
    set_by_person: str | None, expected: str
) -> None:
    """A changed screen waits for the next tick of Textual's frame clock: the program opens the
    TUI with a tick every 8 ms, not 17, and keeps a rate the person set in ``TEXTUAL_FPS``;
    the environment the agent's commands inherit is left as it was."""
    env = {k: v for k, v in os.environ.items() if k != "TEXTUAL_FPS"}
    if set_by_person is not None:
        env["TEXTUAL_FPS"] = set_by_person
    code = (
        "import os\n"
        "from tui.cli import _textual_frame_rate\n"
        "_textual_frame_rate()\n"
        "from textual import constants\n"
        "from textual.screen import UPDATE_PERIOD\n"
        "print(constants.MAX_FPS, round(1 / UPDATE_PERIOD), os.environ.get('TEXTUAL_FPS'))\n"
    )
    shown = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    ).stdout.split()
    assert shown == [expected, expected, str(set_by_person)]
