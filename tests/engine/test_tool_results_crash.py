"""Each tool result commits as its call finishes (issue 12 point 8): with a slow call first and
a fast one second, the fast result is committed while the slow call still runs, so a `kill -9`
then leaves it completed (never "outcome unknown"), and no call of the failed run is pending."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from runtime.api import Runtime
from runtime.config import Config
from runtime.models import RunState, ToolCallState

ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import asyncio, sys
from pathlib import Path
from runtime.api import Runtime
from runtime.config import Config, Permissions
from runtime.tools.base import ToolOutput
from tests.fakes.scripted import ScriptedProvider, Turn

class Step:
    read_only = False  # it acts: after a crash its outcome would be unknown
    approval_default = "allow"
    input_schema = {"type": "object", "properties": {}, "additionalProperties": False}

    def __init__(self, name, flag):
        self.name, self.description, self.flag = name, name, flag

    async def run(self, arguments, ctx):
        while self.flag is not None and not self.flag.exists():
            await asyncio.sleep(0.05)
        return ToolOutput(content=self.name + " done")

    def approval_detail(self, arguments, ctx):
        return {}

async def main(db, workspace, flag):
    provider = ScriptedProvider([Turn("", [("slow", {}), ("fast", {})])])
    runtime = await Runtime.open(
        db_path=db, workspace=workspace, config=Config(permissions=Permissions(allow=["*"])),
        model="scripted:test", providers=lambda reference: provider,
        tools={"slow": Step("slow", Path(flag)), "fast": Step("fast", None)},
    )
    run = await runtime.start("go")
    print(run.id, flush=True)
    await asyncio.Event().wait()

asyncio.run(main(*sys.argv[1:]))
"""


def _states(db_path: Path, run_id: str) -> dict[str, str]:
    with sqlite3.connect(db_path) as conn:
        rows = conn.execute("SELECT name, state FROM tool_calls WHERE run_id = ?", (run_id,))
        return dict(rows.fetchall())


def test_a_fast_call_that_finished_beside_a_slow_one_stays_completed_after_kill_9(
    db_path: Path, workspace: Path, tmp_path: Path
) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(db_path), str(workspace), str(tmp_path / "never")],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert proc.stdout is not None
        run_id = proc.stdout.readline().strip()
        # The fast call's result is committed while the slow call (first in call order) runs.
        deadline = time.monotonic() + 30
        while _states(db_path, run_id).get("fast") != "completed":
            assert time.monotonic() < deadline, _states(db_path, run_id)
            time.sleep(0.05)
        assert _states(db_path, run_id)["slow"] == "running"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)

    async def recovered() -> tuple[RunState, dict[str, ToolCallState]]:
        runtime = await Runtime.open(
            db_path=db_path, workspace=workspace, config=Config(), model="demo"
        )
        try:
            run = await runtime.get_run(run_id)
            calls = {c.name: c.state for c in await runtime.tool_calls(run_id)}
            return run.state, calls
        finally:
            await runtime.close()

    state, calls = asyncio.run(recovered())
    assert calls == {"slow": ToolCallState.INDETERMINATE, "fast": ToolCallState.COMPLETED}
    assert state is RunState.FAILED
    assert ToolCallState.PENDING not in calls.values()
