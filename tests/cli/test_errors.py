"""The command line's error boundary, in process: one line on stderr, the traceback in a log."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tui import cli
from tui._cli import commands


def test_an_unexpected_error_is_one_line_and_its_traceback_goes_to_the_log(
    tmp_path: Path,
    workspace: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    async def broken(ctx: Any, runtime: Any, args: Any) -> int:
        raise RuntimeError("the disk fell off")

    monkeypatch.setitem(commands.COMMANDS, "runs", broken)
    db = tmp_path / "data" / "agent-tui.db"
    code = cli.main(["--db", str(db), "--workspace", str(workspace), "runs"])

    assert code == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "the disk fell off" in err and "agent-tui.log" in err
    assert "Traceback" not in err
    log = (db.parent / "agent-tui.log").read_text()
    assert "Traceback" in log and "RuntimeError: the disk fell off" in log
