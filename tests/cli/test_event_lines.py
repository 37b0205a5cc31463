"""`agent-tui events` without `--json`: one line per event that says what happened."""

from __future__ import annotations

import re
from pathlib import Path

from runtime.api import Runtime
from runtime.config import Config
from runtime.events import MessageCommitted, RunNoted
from runtime.kinds import Role
from tests.tui.helpers import finish_run
from tui._cli.workers import event_line


async def test_each_committed_message_and_note_says_what_it_holds(
    db_path: Path, workspace: Path
) -> None:
    """Found by a trial: a tool message read "tool:" with nothing after it, an assistant
    message that only called tools "assistant:", and a compaction note only its kind."""
    (workspace / "README.md").write_text("# A project\n")
    runtime = await Runtime.open(
        db_path=db_path, workspace=workspace, config=Config(), model="demo:instant"
    )
    try:
        run = await runtime.start("summarise this folder")
        await finish_run(runtime, run.id)
        await runtime.extensions.compact(run.job_id)
        events = await runtime.events(after=0, limit=1000)
    finally:
        await runtime.close()
    tool_lines = [
        event_line(event)
        for event in events
        if isinstance(event, MessageCommitted) and event.message.role is Role.TOOL
    ]
    # The listing, then the file read and the search, then the answer, then the write.
    assert " tool: 1 result: ./ (" in tool_lines[0] and "README.md (12 bytes)" in tool_lines[0]
    assert re.search(r" tool: \d+ results: 1 # A project$", tool_lines[1]), tool_lines[1]
    [note] = [event_line(e) for e in events if isinstance(e, RunNoted)]
    assert f"run_noted run {run.id} compaction: compacted " in note
