"""The offline demo model's answers read as Markdown should."""

from __future__ import annotations

from pathlib import Path

from runtime.api import Runtime
from runtime.config import Config
from runtime.models import Role


async def test_the_plan_quotes_a_task_of_several_paragraphs_line_by_line(
    db_path: Path, workspace: Path
) -> None:
    """Found by a new-user trial: a pasted task of two paragraphs went into ``*…*``, which
    Markdown cannot span across a blank line, so its stars showed as typed."""
    runtime = await Runtime.open(
        db_path=db_path, workspace=workspace, config=Config(), model="demo:instant"
    )
    try:
        run = await runtime.start("Line one of the paste\n\nLast *line*")
        await runtime.wait(run.id, timeout=30)
        messages = await runtime.all_messages(run.id)
    finally:
        await runtime.close()
    plan = next(m.text for m in messages if m.role is Role.ASSISTANT)
    assert "You asked:\n\n> Line one of the paste\n>\n> Last *line*\n\n" in plan
    assert "*Line one" not in plan
