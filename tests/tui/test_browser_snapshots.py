"""Snapshots of the browser at 80x24 and 140x45: the column header, a job expanded to its runs
and a run to its checkpoints, the detail line (ages hidden: nothing depends on the clock)."""

from __future__ import annotations

from typing import Any

import pytest
from textual.pilot import Pilot

from tests.tui.helpers import finish_run, wait_until
from tests.tui.test_snapshots import snapshot_app  # noqa: F401 (fixture)
from tui.screens.main import MainScreen
from tui.widgets.job_tree import CheckpointEntry


async def _a_job_expanded_to_its_checkpoints(pilot: Pilot[Any]) -> None:
    runtime = pilot.app.runtime  # type: ignore[attr-defined]
    first = await runtime.start("summarise this project and the notes beside it")
    await finish_run(runtime, first.id)
    second = await runtime.follow_up(first.job_id, "and list the files")
    await finish_run(runtime, second.id)
    other = await runtime.start("list the TODOs")
    await finish_run(runtime, other.id)
    screen = pilot.app.screen
    assert isinstance(screen, MainScreen)
    tree = screen.job_tree
    await wait_until(pilot, lambda: len(tree.job_ids) == 2)
    tree.focus()
    job_node = tree.job_node(first.job_id)
    assert job_node is not None
    tree.move_cursor(job_node)
    job_node.expand()  # as space does
    await wait_until(pilot, lambda: tree.run_node(first.id) is not None)
    node = tree.run_node(first.id)
    assert node is not None
    tree.move_cursor(node)
    node.expand()
    await wait_until(pilot, lambda: any(isinstance(c.data, CheckpointEntry) for c in node.children))
    pilot.app.clear_notifications()
    await pilot.pause(0.2)
    await pilot.wait_for_scheduled_animations()


@pytest.mark.sandbox
@pytest.mark.parametrize("size", [(80, 24), (140, 45)], ids=["80x24", "140x45"])
def test_the_browser_with_its_column_header_runs_and_checkpoints(
    snap_compare: Any,
    snapshot_app: Any,  # noqa: F811
    size: tuple[int, int],
) -> None:
    assert snap_compare(
        snapshot_app(), terminal_size=size, run_before=_a_job_expanded_to_its_checkpoints
    )
