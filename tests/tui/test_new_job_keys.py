"""Keys handled while the screen is being emptied for a new job (``/new``, ``n``): the
conversation of a long run takes a while to clear, and what is typed or opened meanwhile must
act on the new job, or on the run opened, not on the run that was on screen before.

The clearing is held on an ``asyncio.Event`` (the conversation's ``show_empty`` waits for it),
so the keys land, deterministically, while it is under way."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
from textual.message import Message
from textual.widgets import Tree

from runtime.api import Runtime
from tests.tui.helpers import (
    SIZE,
    finish_run,
    main_screen,
    make_app,
    send_burst,
    wait_for_browser,
    wait_until,
)
from tui.screens.main import MainScreen
from tui.widgets.job_tree import JobEntry


async def _until(condition: Callable[[], object]) -> None:
    """Until ``condition()`` holds (bounded). Not ``Pilot.pause``: that waits for the screen to
    have handled all its messages, which may be what is held."""
    async with asyncio.timeout(30):
        while not condition():
            await asyncio.sleep(0.01)


def _hold_the_clearing(monkeypatch: pytest.MonkeyPatch, screen: MainScreen) -> asyncio.Event:
    """From now on the conversation empties itself only once the event returned is set."""
    conversation = screen.conversation
    show_empty = conversation.show_empty
    cleared = asyncio.Event()

    async def held(text: str) -> None:
        await cleared.wait()
        await show_empty(text)

    monkeypatch.setattr(conversation, "show_empty", held)
    return cleared


async def _root_inputs(runtime: Runtime, job_id: str) -> list[str | None]:
    return [r.input for r in await runtime.job_runs(job_id) if r.parent_run_id is None]


async def test_a_message_typed_right_after_slash_new_starts_a_new_job_not_a_follow_up(
    runtime: Runtime, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``/new``, Enter, then a task typed at once: it became a follow-up of the job that was
    on screen, since the box addressed that job until the screen was emptied."""
    old = await runtime.start("the old job")
    await finish_run(runtime, old.id)
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        await pilot.press("enter")
        await wait_until(pilot, lambda: screen.composer.follow_up_job_id == old.job_id)
        screen.composer.focus_input()
        await wait_until(pilot, lambda: app.focused is screen.composer.input)
        cleared = _hold_the_clearing(monkeypatch, screen)
        send_burst(app, [*"/new"])
        await _until(lambda: screen.composer.input.text == "/new")
        send_burst(app, ["enter"])
        await _until(lambda: not screen.composer.input.text)  # the command was taken
        send_burst(app, [*"a task of its own", "enter"])
        await _until(lambda: screen.composer.history[-1:] == ["a task of its own"])  # sent
        cleared.set()

        async def sent_to() -> list[str]:
            """The jobs with a run of the task typed (wherever it went)."""
            jobs = (await runtime.list_jobs()).items
            return [j.id for j in jobs if "a task of its own" in await _root_inputs(runtime, j.id)]

        async with asyncio.timeout(30):
            while not await sent_to():
                await pilot.pause(0.05)
        [job_id] = await sent_to()
        assert job_id != old.job_id
        assert await _root_inputs(runtime, job_id) == ["a task of its own"]
        await wait_until(pilot, lambda: screen.composer.follow_up_job_id == job_id)
    assert await _root_inputs(runtime, old.job_id) == ["the old job"]


async def test_a_run_opened_while_the_screen_empties_for_a_new_job_stays_on_screen(
    runtime: Runtime, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``n`` in the browser, then Enter on another job's row before the screen was emptied:
    that job's run was shown, then the new job's emptying went on over it ("New job" in the
    conversation, the box addressing a new job, the run still the one selected)."""
    first = await runtime.start("the first job")
    await finish_run(runtime, first.id)
    second = await runtime.start("the second job")
    await finish_run(runtime, second.id)
    app = make_app(runtime, workspace)
    chosen: list[object] = []

    def seen(message: Message) -> None:
        if isinstance(message, Tree.NodeSelected):  # as the browser takes it, before the screen
            chosen.append(message.node.data)

    async with app.run_test(size=SIZE, message_hook=seen) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)  # the cursor on the newest job: the second
        await pilot.press("enter")
        await wait_until(pilot, lambda: screen.conversation.run_id == second.id)
        await wait_until(pilot, lambda: app.focused is screen.job_tree)
        cleared = _hold_the_clearing(monkeypatch, screen)
        chosen.clear()
        send_burst(app, ["n", "down", "enter"])  # the row under it: the first job
        await _until(lambda: chosen)  # dispatched by the browser (and up to the screen)
        row = chosen[0]
        assert isinstance(row, JobEntry) and row.job.id == first.job_id
        cleared.set()
        await wait_until(
            pilot,
            lambda: (
                screen.selected_run is not None
                and screen.selected_run.id == first.id
                and screen.conversation.run_id == first.id
            ),
        )
        for _ in range(5):  # whatever was still under way has finished
            await pilot.pause()
        assert screen.selected_run is not None and screen.selected_run.id == first.id
        assert screen.conversation.run_id == first.id
        assert not screen.conversation.query(".empty")  # no "New job" note over its messages
        assert screen.composer.follow_up_job_id == first.job_id
        assert screen.status.run is not None and screen.status.run.id == first.id
