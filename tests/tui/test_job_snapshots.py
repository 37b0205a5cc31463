"""Snapshots at 80x24 and 140x45: a fork of a job with two root runs, its inherited history
shown dimmed under "forked from …"."""

from __future__ import annotations

from typing import Any

import pytest
from textual.pilot import Pilot

from tests.tui.helpers import finish_run, wait_until
from tests.tui.test_snapshots import snapshot_app  # noqa: F401 (fixture)
from tui.screens.main import MainScreen


async def _fork_of_a_two_run_job(pilot: Pilot[Any]) -> None:
    runtime = pilot.app.runtime  # type: ignore[attr-defined]
    first = await runtime.start("summarise this project")
    await finish_run(runtime, first.id)
    second = await runtime.follow_up(first.job_id, "and list the files")
    await finish_run(runtime, second.id)
    checkpoint = (await runtime.checkpoints(first.id))[0]
    fork = await runtime.fork(checkpoint.id, "only the README")
    await runtime.wait(fork.id, timeout=20)
    screen = pilot.app.screen
    assert isinstance(screen, MainScreen)
    screen.load_jobs(None, first=True)
    await wait_until(pilot, lambda: len(screen.job_tree.job_ids) == 2)
    screen.open_run(fork.id)
    await wait_until(
        pilot,
        lambda: (
            screen.selected_run is not None
            and screen.selected_run.id == fork.id
            and screen.query(".fork-origin")
            and screen.job_tree.run_node(fork.id) is not None
        ),
    )
    screen.job_tree.focus()
    pilot.app.clear_notifications()  # "a run is waiting" toasts from the setup's prompts
    await pilot.pause(0.3)
    screen.conversation.scroll_home(animate=False, immediate=True)
    await pilot.pause(0.1)
    await pilot.wait_for_scheduled_animations()


@pytest.mark.sandbox
@pytest.mark.parametrize("size", [(80, 24), (140, 45)], ids=["80x24", "140x45"])
def test_a_fork_of_a_job_with_two_root_runs(
    snap_compare: Any,
    snapshot_app: Any,  # noqa: F811
    size: tuple[int, int],
) -> None:
    assert snap_compare(snapshot_app(), terminal_size=size, run_before=_fork_of_a_two_run_job)


async def _a_job_with_two_root_runs(pilot: Pilot[Any]) -> None:
    runtime = pilot.app.runtime  # type: ignore[attr-defined]
    first = await runtime.start("summarise this project")
    await finish_run(runtime, first.id)
    second = await runtime.follow_up(first.job_id, "and list the files")
    await finish_run(runtime, second.id)
    screen = pilot.app.screen
    assert isinstance(screen, MainScreen)
    screen.load_jobs(None, first=True)
    await wait_until(pilot, lambda: len(screen.job_tree.job_ids) == 1)
    screen.open_run(second.id)
    await wait_until(
        pilot,
        lambda: (
            screen.selected_run is not None
            and screen.selected_run.id == second.id
            and screen.selected_run.state.value == "completed"
            and any("follow-up 2" in str(h.render()) for h in screen.query(".run-header"))
            # The browser's rows of the job come from a worker of their own: on a loaded
            # machine (make check beside two busy loops) they came after the picture.
            and screen.job_tree.run_node(second.id) is not None
        ),
    )
    screen.job_tree.focus()
    pilot.app.clear_notifications()
    await pilot.pause(0.3)
    # Where one run ends and the next begins: the follow-up's header a third of the way down.
    conversation = screen.conversation
    header = next(h for h in conversation.query(".run-header") if "follow-up 2" in str(h.render()))
    top = header.virtual_region.y - conversation.scrollable_content_region.height // 3
    conversation.scroll_to(y=max(top, 0), animate=False, immediate=True)
    await pilot.pause(0.1)
    await pilot.wait_for_scheduled_animations()


@pytest.mark.sandbox
@pytest.mark.parametrize("size", [(80, 24), (140, 45)], ids=["80x24", "140x45"])
def test_a_job_with_two_root_runs_under_their_headers(
    snap_compare: Any,
    snapshot_app: Any,  # noqa: F811
    size: tuple[int, int],
) -> None:
    assert snap_compare(snapshot_app(), terminal_size=size, run_before=_a_job_with_two_root_runs)
