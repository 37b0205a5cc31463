"""A run one agent-tui executes, cancelled from another (c, y there): the process executing it
saves the answer's last words and counts its usage after the cancel, and says so with a
``cut_short`` note, so every agent-tui showing the run reads its totals and partial answer
again. Found by a new-user trial: both windows showed 0 tokens and the answer's first words
only, while `agent-tui show` had the rest."""

from __future__ import annotations

import asyncio
from pathlib import Path

from runtime.models import Role, RunState, Usage
from runtime.results import CHARS_PER_TOKEN
from tests.fakes.scripted import ScriptedProvider, Turn, open_scripted
from tests.tui.helpers import (
    SIZE,
    main_screen,
    make_app,
    open_runtime,
    wait_for_browser,
    wait_until,
)
from tui.widgets.message_view import MessageView

FIRST = "Countin"
"""The scripted model's first piece (it streams pieces of seven characters)."""
TEXT = FIRST + "g the pelicans one by one, then the herons. " * 6
WAIT = 30


async def test_a_run_cancelled_here_that_another_process_executed_shows_its_last_words_and_usage(
    db_path: Path, workspace: Path, tmp_path: Path
) -> None:
    gate = asyncio.Event()
    provider = ScriptedProvider([Turn(TEXT, gate=gate, pause_until=tmp_path / "never")])
    elsewhere = await open_scripted(provider, db_path, workspace)
    runtime = await open_runtime(db_path, workspace)
    try:
        run = await elsewhere.start("count the birds")
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            screen = main_screen(app)
            await wait_for_browser(pilot, app)
            await pilot.press("enter")

            def answer() -> str:
                views = [v for v in screen.query(MessageView) if v.role is Role.ASSISTANT]
                return views[-1].text if views else ""

            await wait_until(pilot, lambda: answer().startswith(FIRST))
            # The rest streams there and waits: cancelled from here before its draft's next
            # save, the last words reach the database only after the cancel.
            gate.set()
            async with asyncio.timeout(WAIT):
                await provider.paused.wait()
            screen.job_tree.focus()
            await pilot.press("c", "y")
            expected = Usage(output_tokens=-(-len(TEXT) // CHARS_PER_TOKEN))
            await wait_until(
                pilot,
                lambda: (
                    screen.selected_run is not None
                    and screen.selected_run.state is RunState.CANCELLED
                    and screen.selected_run.usage == expected
                ),
            )
            await wait_until(pilot, lambda: answer().rstrip() == TEXT.rstrip())
            # The tokens shown are the run's, in the status line and in its browser row.
            assert f"{expected.total_tokens} tok" in screen.status.text
            node = screen.job_tree.run_node(run.id)
            assert node is not None and node.data is not None
            assert node.data.run.usage == expected  # type: ignore[union-attr]
        stored = await runtime.get_run(run.id)
        assert stored.usage == expected
        [note] = [n for n in await runtime.store.list_notes(run_ids=[run.id])]
        assert note.note == "cut_short" and note.data["output_tokens"] == expected.output_tokens
    finally:
        await runtime.close()
        await elsewhere.close()
