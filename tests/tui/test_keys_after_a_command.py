"""Keys typed right after a slash command's Enter, before the screen has run the command (a
fast typist, a paste, tmux): what they type stays in the box, whatever the command does with
itself, and a message sent among them goes where the box addresses once the command has run.

The screen is held on an ``asyncio.Event`` (a callback in its own queue waits for it), so the
command is handled, deterministically, only after the keys of the burst have landed in the
box."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
from textual.pilot import Pilot

from runtime.api import Runtime
from tests.store.helpers import composer_text
from tests.tui.helpers import (
    SIZE,
    finish_run,
    main_screen,
    make_app,
    notifications,
    send_burst,
    wait_for_browser,
    wait_until,
)
from tui.app import AgentTuiApp
from tui.screens.main import MainScreen


async def _until(condition: Callable[[], object]) -> None:
    """Until ``condition()`` holds (bounded). Not ``Pilot.pause``: that waits for the screen to
    have handled all its messages, which is what is held."""
    async with asyncio.timeout(30):
        while not condition():
            await asyncio.sleep(0.01)


def _hold_the_screen(screen: MainScreen) -> asyncio.Event:
    """The screen handles nothing more (the command sent to it among the rest) until the event
    returned is set; the composer and its box go on taking keys."""
    held = asyncio.Event()
    screen.call_later(held.wait)
    return held


async def _box_on(pilot: Pilot[object], app: AgentTuiApp, job_id: str) -> MainScreen:
    """The newest job opened from the browser, then the keys in its box (a follow-up of it)."""
    screen = main_screen(app)
    await wait_for_browser(pilot, app)
    await pilot.press("enter")
    await wait_until(pilot, lambda: screen.composer.follow_up_job_id == job_id)
    screen.composer.focus_input()
    await wait_until(pilot, lambda: app.focused is screen.composer.input)
    return screen


async def _the_job_of(pilot: Pilot[object], runtime: Runtime, task: str) -> str:
    """The one job whose root run was asked ``task`` (bounded wait until it exists)."""
    async with asyncio.timeout(30):
        while not await _jobs_with(runtime, task):
            await pilot.pause(0.05)
    [job_id] = await _jobs_with(runtime, task)
    return job_id


async def _root_inputs(runtime: Runtime, job_id: str) -> list[str | None]:
    return [r.input for r in await runtime.job_runs(job_id) if r.parent_run_id is None]


async def _jobs_with(runtime: Runtime, task: str) -> list[str]:
    jobs = (await runtime.list_jobs()).items
    return [job.id for job in jobs if task in await _root_inputs(runtime, job.id)]


async def _settled(pilot: Pilot[object], runtime: Runtime, job_id: str) -> None:
    """Until the job's runs have stopped (ended, or asking) and the screen has shown it: the
    app is not closed in the middle of a run's tool calls."""
    for run in await runtime.job_runs(job_id):
        await runtime.wait(run.id, timeout=30)
    await pilot.pause()


async def test_a_task_typed_right_after_slash_new_stays_in_the_box_for_the_new_job(
    runtime: Runtime, workspace: Path
) -> None:
    """``/new``, Enter, and the task typed at once: it joined the command in the box
    (``/newa task…``) and went with it when the screen ran the command."""
    old = await runtime.start("the old job")
    await finish_run(runtime, old.id)
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = await _box_on(pilot, app, old.job_id)
        held = _hold_the_screen(screen)
        send_burst(app, [*"/new", "enter", *"a task of its own"])
        await _until(lambda: screen.composer.input.text.endswith("a task of its own"))
        held.set()
        await wait_until(pilot, lambda: screen.composer.follow_up_job_id is None)
        await pilot.pause()
        assert screen.composer.input.text == "a task of its own"
        await pilot.press("enter")
        job_id = await _the_job_of(pilot, runtime, "a task of its own")
        assert job_id != old.job_id
        await _settled(pilot, runtime, job_id)
    assert await _root_inputs(runtime, old.job_id) == ["the old job"]


async def test_slash_new_and_a_task_sent_in_one_burst_start_the_new_job_with_that_task(
    runtime: Runtime, workspace: Path
) -> None:
    """``/new``, Enter, the task, Enter, all before the screen ran ``/new``: the task was
    glued to the command and refused as ``/newa`` (nothing sent, the box emptied); sent on its
    own, it must not become a follow-up of the job the box addressed before ``/new``."""
    old = await runtime.start("the old job")
    await finish_run(runtime, old.id)
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = await _box_on(pilot, app, old.job_id)
        held = _hold_the_screen(screen)
        send_burst(app, [*"/new", "enter", *"a task of its own", "enter", *"and more"])
        await _until(lambda: screen.composer.input.text.endswith("and more"))
        held.set()
        job_id = await _the_job_of(pilot, runtime, "a task of its own")
        assert job_id != old.job_id
        await wait_until(pilot, lambda: screen.composer.follow_up_job_id == job_id)
        assert screen.composer.input.text == "and more"  # typed on, for the new job
        await _settled(pilot, runtime, job_id)
        await wait_until(pilot, lambda: screen.conversation.run_id is not None)
        assert screen.selected_run is not None and screen.selected_run.job_id == job_id
        assert not screen.conversation.query(".empty")  # its run shown, not an empty new job
    assert await _root_inputs(runtime, old.job_id) == ["the old job"]


async def test_a_message_sent_after_slash_new_task_is_queued_for_it_and_what_follows_stays(
    runtime: Runtime, workspace: Path
) -> None:
    """``/new TASK`` from a job on screen, then a second message, then more typing, all in
    one burst: the second message is queued for the new job, and the typing after it stays in
    the box for that job (it was cleared with the message, or left as the old job's draft)."""
    old = await runtime.start("the old job")
    await finish_run(runtime, old.id)
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = await _box_on(pilot, app, old.job_id)
        held = _hold_the_screen(screen)
        send_burst(app, [*"/new the first task", "enter", *"the second", "enter", *"still typing"])
        await _until(lambda: screen.composer.input.text.endswith("still typing"))
        held.set()
        job_id = await _the_job_of(pilot, runtime, "the first task")
        await wait_until(pilot, lambda: screen.composer.follow_up_job_id == job_id)
        # The demo model asks its question: the second waits in the new job's queue.
        assert screen.composer.queued(job_id) == ["the second"]
        assert screen.composer.input.text == "still typing"
        await _settled(pilot, runtime, job_id)
    assert len((await runtime.list_jobs()).items) == 2
    assert await _root_inputs(runtime, old.job_id) == ["the old job"]


@pytest.mark.parametrize(
    ("command", "took_effect"),
    [
        (
            "/model demo",
            lambda app: main_screen(app).composer.next_run.get(None) == {"model": "demo"},
        ),
        ("/theme textual-light", lambda app: app.theme == "textual-light"),
    ],
    ids=["model", "theme"],
)
async def test_text_typed_right_after_a_command_that_succeeds_stays_in_the_box(
    runtime: Runtime,
    workspace: Path,
    command: str,
    took_effect: Callable[[AgentTuiApp], bool],
) -> None:
    """The command was done and the box cleared, with what had been typed after its Enter."""
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        screen.composer.focus_input()
        await wait_until(pilot, lambda: app.focused is screen.composer.input)
        held = _hold_the_screen(screen)
        send_burst(app, [*command, "enter", *"the next task"])
        await _until(lambda: screen.composer.input.text.endswith("the next task"))
        held.set()
        await wait_until(pilot, lambda: took_effect(app))
        await pilot.pause()
        assert screen.composer.input.text == "the next task"
        assert screen.composer.error == ""
        async with asyncio.timeout(30):  # and saved as the draft, as any typing is
            while await composer_text(runtime.store, None) != "the next task":
                await pilot.pause(0.05)


@pytest.mark.parametrize(
    ("command", "said"),
    [
        ("/theme bogus", "No theme 'bogus'"),
        ("/model gpt-nonsense", "gpt-nonsense"),
        ("/stream 200", "/stream is not a command"),
    ],
    ids=["theme", "model", "unknown"],
)
async def test_a_command_that_fails_keeps_what_was_typed_after_it_and_up_brings_it_back(
    runtime: Runtime, workspace: Path, command: str, said: str
) -> None:
    """A failed command stays to be corrected; with keys typed after its Enter it stayed in
    front of them, glued (``/theme bogushello``)."""
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        screen = main_screen(app)
        composer = screen.composer
        composer.focus_input()
        await wait_until(pilot, lambda: app.focused is composer.input)
        held = _hold_the_screen(screen)
        send_burst(app, [*command, "enter", *"hello"])
        await _until(lambda: composer.input.text.endswith("hello"))
        held.set()
        await wait_until(
            pilot, lambda: any(said in n for n in notifications(app)) or said in composer.error
        )
        await pilot.pause()
        assert composer.input.text == "hello"
        await pilot.press("up")  # the failed command, to be corrected
        assert composer.input.text == command
        await pilot.press("down")
        assert composer.input.text == "hello"
    assert (await runtime.list_jobs()).items == []


async def test_a_model_chosen_then_slash_new_task_goes_with_the_new_job(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a trial: ``/agent coordinator`` on the job on screen, then ``/new survey``,
    ran the new job on the default agent (the choice stayed with the job left, unused)."""
    old = await runtime.start("the old job")
    await finish_run(runtime, old.id)
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = await _box_on(pilot, app, old.job_id)
        await pilot.press(*"/model demo", "enter")
        await wait_until(pilot, lambda: screen.composer.next_run.get(old.job_id))
        await pilot.press(*"/new survey this", "enter")
        job_id = await _the_job_of(pilot, runtime, "survey this")
        await _settled(pilot, runtime, job_id)
        assert old.job_id not in screen.composer.next_run
    [run] = await runtime.job_runs(job_id)
    assert run.model == "demo" and old.model == "demo:instant"
