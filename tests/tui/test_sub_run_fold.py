"""A delegation block folds the sub-run it made: collapsed at first, Enter unfolds its messages
under the block (read from the database), Enter folds them again, ``o`` opens the sub-run."""

from __future__ import annotations

from pathlib import Path

from runtime.api import Runtime
from tests.tui.helpers import finish_run, make_app, wait_until
from tests.tui.test_keys_and_delegation import WIDE, delegation_config, main_screen
from tui.widgets.message_view import MessageView
from tui.widgets.tool_call_view import ToolCallView


async def test_a_sub_run_is_folded_under_its_delegation_and_unfolds_by_enter(
    db_path: Path, workspace: Path
) -> None:
    runtime = await Runtime.open(
        db_path=db_path, workspace=workspace, config=delegation_config(), model="demo:instant"
    )
    try:
        parent = await runtime.start("summarise this project")
        await finish_run(runtime, parent.id)
        children = [r for r in await runtime.job_runs(parent.job_id) if r.parent_run_id]
        for child in children:
            await finish_run(runtime, child.id)
        await finish_run(runtime, parent.id)
        assert children
        app = make_app(runtime, workspace)
        async with app.run_test(size=WIDE) as pilot:
            screen = main_screen(app)
            screen.open_run(parent.id)
            await wait_until(
                pilot,
                lambda: (
                    screen.conversation.run_id == parent.id
                    and any(v.child_run_id for v in screen.conversation.query(ToolCallView))
                ),
            )
            blocks = [v for v in screen.conversation.query(ToolCallView) if v.child_run_id]
            block = blocks[0]
            child = await runtime.get_run(block.child_run_id or "")
            assert child.parent_run_id == parent.id
            # Folded: none of the sub-run's messages are mounted in the conversation.
            assert not block.sub_run_expanded
            assert not block.query(MessageView)

            screen.conversation.focus()
            await pilot.pause()
            await pilot.press("right_square_bracket")
            while app.focused is not block:
                await pilot.press("right_square_bracket")
            await pilot.press("enter")
            await wait_until(pilot, lambda: bool(block.query(MessageView)))
            assert block.sub_run_expanded
            texts = [view.text for view in block.query(MessageView)]
            assert texts[0] == child.input  # the task the parent gave it
            assert len(texts) >= 2  # and the sub-run's answer
            assert screen.conversation.run_id == parent.id  # still the parent's conversation

            await pilot.press("enter")
            await wait_until(pilot, lambda: not block.sub_run_expanded)

            await pilot.press("o")
            await wait_until(pilot, lambda: screen.conversation.run_id == child.id)
    finally:
        await runtime.close()
