"""The engine on a thread of its own (tui/engine_host.py): every call of the TUI runs on the
engine's loop, results, errors and cancellation cross the boundary, observe() delivers every
event in order, close() stops the thread; and a keypress is handled while the engine's loop is
busy in a CPU-bound step."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from runtime import events as rt
from runtime.errors import InvalidInput, RunNotFound
from runtime.models import RunState
from tests.tui.helpers import SIZE, make_app, open_runtime, wait_until
from tui.engine_host import DeltaPieces, EngineHost, HostedRuntime, on_engine
from tui.screens.main import MainScreen


@pytest.fixture
async def hosted(db_path: Path, workspace: Path) -> AsyncIterator[HostedRuntime]:
    runtime = await HostedRuntime.open(lambda: open_runtime(db_path, workspace))
    try:
        yield runtime
    finally:
        await runtime.close()


async def _engine_tasks(host: EngineHost) -> int:
    async def count() -> int:
        return len(asyncio.all_tasks()) - 1  # less this one

    return await host.call(count())


async def test_calls_run_on_the_engines_own_loop_and_thread_and_results_cross(
    hosted: HostedRuntime,
) -> None:
    seen: dict[str, object] = {}

    async def where() -> None:
        seen["loop"] = asyncio.get_running_loop()
        seen["thread"] = threading.current_thread()

    await hosted.host.call(where())
    assert seen["loop"] is hosted.host.loop
    assert seen["loop"] is not asyncio.get_running_loop()
    assert seen["thread"] is not threading.current_thread()

    run = await hosted.start("/stream 8")
    boundary = await hosted.wait(run.id, timeout=60)
    assert boundary.state is RunState.COMPLETED
    messages = await hosted.all_messages(run.id)
    assert sum(len(m.text) for m in messages) >= 8 * 1000
    # The store, read through the proxy, sees the same rows.
    assert (await hosted.store.get_run(run.id)).state is RunState.COMPLETED


async def test_an_error_of_the_engine_is_raised_to_the_caller_as_it_is(
    hosted: HostedRuntime,
) -> None:
    with pytest.raises(RunNotFound):
        await hosted.get_run("no-such-run")
    with pytest.raises(RunNotFound):
        await hosted.store.get_run("no-such-run")


async def test_observe_delivers_every_event_of_a_run_in_order_across_the_thread(
    hosted: HostedRuntime,
) -> None:
    received: list[rt.Event] = []
    ready = asyncio.Event()

    async def watch() -> None:
        iterator = hosted.observe()
        ready.set()
        async for event in iterator:
            received.append(event)
            if isinstance(event, rt.RunStateChanged) and event.to_state is RunState.COMPLETED:
                return

    watcher = asyncio.create_task(watch())
    await ready.wait()
    await asyncio.sleep(0.05)  # the subscription is made on the engine's loop
    run = await hosted.start("/stream 32")
    async with asyncio.timeout(60):
        await watcher
    deltas = [e for e in received if isinstance(e, rt.MessageDelta) and e.run_id == run.id]
    assert deltas, "no delta crossed"
    text_deltas = [e for e in deltas if not e.thinking]
    for before, after in itertools.pairwise(text_deltas):
        assert after.offset == before.offset + len(before.text)  # in order, nothing lost
    streamed = "".join(e.text for e in text_deltas)
    committed = [e for e in received if isinstance(e, rt.MessageCommitted) and e.run_id == run.id]
    assert committed
    final = [m for m in await hosted.all_messages(run.id) if m.role.value == "assistant"]
    assert streamed == final[-1].text


async def test_pieces_the_tui_has_not_taken_yet_arrive_merged_in_order() -> None:
    """While the reading loop is busy, the engine's side keeps taking pieces: when the reader
    looks again, the pieces of each message (two streams, interleaved) come as one delta, text
    and offset kept; nothing is merged across another kind of event, which stays in order."""
    host = EngineHost()
    published = threading.Event()

    def delta(message: str, offset: int, text: str) -> rt.MessageDelta:
        return rt.MessageDelta(
            job_id="j", run_id="r", execution_id="e", message_id=message, offset=offset, text=text
        )

    async def engine_side() -> AsyncIterator[rt.Event]:
        for index in range(1000):
            yield delta("m1", index * 5, f"w{index:03d} ")
            yield delta("m2", index * 5, f"v{index:03d} ")
            if index % 100 == 99:
                await asyncio.sleep(0)
        yield rt.Notice(job_id="j", run_id="r", text="between")
        yield delta("m2", 5000, "after")
        yield delta("m2", 5005, " the notice")
        published.set()

    try:
        iterator = aiter(host.iterate(engine_side, pending=DeltaPieces))
        first = await anext(iterator)
        assert published.wait(30)  # this loop is busy meanwhile; the engine's is not
        received = [first, *[event async for event in iterator]]
    finally:
        host.stop()
    notice = next(i for i, e in enumerate(received) if isinstance(e, rt.Notice))
    before, after = received[:notice], received[notice + 1 :]
    for message, letter in (("m1", "w"), ("m2", "v")):
        pieces = [e for e in before if isinstance(e, rt.MessageDelta) and e.message_id == message]
        assert "".join(e.text for e in pieces) == "".join(
            f"{letter}{index:03d} " for index in range(1000)
        )
        for earlier, later in itertools.pairwise(pieces):
            assert later.offset == earlier.offset + len(earlier.text)
        assert len(pieces) <= 2  # the first piece, then the rest merged (not 1,000)
    assert [(e.message_id, e.offset, e.text) for e in after] == [("m2", 5000, "after the notice")]


async def test_leaving_an_observation_stops_its_pump_on_the_engines_loop(
    hosted: HostedRuntime,
) -> None:
    before = await _engine_tasks(hosted.host)
    iterator = hosted.observe()

    async def first() -> rt.Event:
        return await anext(aiter(iterator))

    reading = asyncio.create_task(first())
    async with asyncio.timeout(30):
        while await _engine_tasks(hosted.host) <= before:
            await asyncio.sleep(0.01)
    reading.cancel()
    await asyncio.gather(reading, return_exceptions=True)
    await iterator.aclose()  # type: ignore[attr-defined]
    async with asyncio.timeout(30):
        while await _engine_tasks(hosted.host) > before:
            await asyncio.sleep(0.01)


async def test_cancelling_the_caller_cancels_the_call_on_the_engines_loop(
    hosted: HostedRuntime,
) -> None:
    started = threading.Event()
    cancelled = threading.Event()

    async def waits_forever() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    call = asyncio.create_task(hosted.host.call(waits_forever()))
    async with asyncio.timeout(30):
        while not started.is_set():
            await asyncio.sleep(0.01)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    async with asyncio.timeout(30):
        while not cancelled.is_set():
            await asyncio.sleep(0.01)


async def test_on_engine_runs_a_function_of_an_engine_object_on_the_engines_loop(
    hosted: HostedRuntime,
) -> None:
    async def loop_of(store: object, label: str) -> tuple[object, str]:
        return asyncio.get_running_loop(), label

    loop, label = await on_engine(hosted.store, loop_of, "x")
    assert loop is hosted.host.loop and label == "x"


async def test_close_stops_the_engines_thread_and_later_calls_fail_clearly(
    db_path: Path, workspace: Path
) -> None:
    runtime = await HostedRuntime.open(lambda: open_runtime(db_path, workspace))
    run = await runtime.start("/stream 8")
    await runtime.wait(run.id, timeout=60)
    await runtime.close()
    await runtime.close()  # twice is once
    assert not runtime.host.running
    with pytest.raises(RuntimeError, match="stopped"):
        await runtime.get_run(run.id)


async def test_a_runtime_that_fails_to_open_raises_here_and_stops_its_thread() -> None:
    host = EngineHost()

    async def refuses() -> HostedRuntime:
        raise InvalidInput("unknown agent 'nobody'")

    with pytest.raises(InvalidInput, match="nobody"):
        await HostedRuntime.open(refuses, host=host)  # type: ignore[arg-type]
    assert not host.running


async def test_a_keypress_is_handled_while_the_engine_is_busy_in_a_cpu_bound_step(
    hosted: HostedRuntime, workspace: Path
) -> None:
    """The engine's loop spins in pure Python (holding the GIL but for switch intervals) until
    the test releases it: the keys typed meanwhile reach the composer. With the engine on the
    TUI's own loop nothing could be handled until the step ended."""
    spinning = threading.Event()
    release = threading.Event()

    async def cpu_bound_step() -> None:
        spinning.set()
        deadline = time.monotonic() + 60
        total = 0
        while not release.is_set() and time.monotonic() < deadline:
            total += 1

    app = make_app(hosted, workspace)  # type: ignore[arg-type]
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        assert isinstance(screen, MainScreen)
        await pilot.pause()
        step = hosted.host.submit(cpu_bound_step())
        try:
            async with asyncio.timeout(30):
                while not spinning.is_set():
                    await asyncio.sleep(0.005)
            screen.composer.focus_input()
            await pilot.press("h", "i")
            await wait_until(pilot, lambda: screen.composer.input.text == "hi")
            assert not step.done(), "the engine's step ended before the keys were handled"
        finally:
            release.set()
        await asyncio.wrap_future(step)


async def test_a_durable_consumer_through_the_hosted_runtime_delivers_and_acknowledges(
    hosted: HostedRuntime,
) -> None:
    run = await hosted.start("/stream 2")
    await hosted.wait(run.id, timeout=60)
    newest = await hosted.last_seq()
    async with hosted.consume("bot") as consumer:
        taken = []
        async with asyncio.timeout(30):
            async for event in consumer:
                taken.append(event)
                if len(taken) == 4:
                    break
        await consumer.ack(taken[2])
    assert [e.seq for e in taken] == [1, 2, 3, 4]
    async with hosted.consume("bot") as again:
        assert again.cursor == 3
    assert newest >= 4


async def test_the_programs_app_opens_its_runtime_on_a_thread_of_its_own(
    db_path: Path, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("AGENT_TUI_MODEL", "demo:instant")
    from tui.app import program_app

    app = program_app(db_path, workspace)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(pilot, lambda: app.runtime is not None)
            runtime = app.runtime
            assert isinstance(runtime, HostedRuntime)
            assert runtime.host.loop is not asyncio.get_running_loop()
            screen = app.screen
            assert isinstance(screen, MainScreen)
            screen.composer.focus_input()
            await pilot.press(*"//stream 4", "enter")
            await wait_until(pilot, lambda: screen.job_tree.job_ids)
            [job_id] = screen.job_tree.job_ids
            [run] = await runtime.job_runs(job_id)
            boundary = await runtime.wait(run.id, timeout=60)
            assert boundary.state is RunState.COMPLETED
    finally:
        if app.runtime is not None:
            await app.runtime.close()
    assert isinstance(runtime, HostedRuntime) and not runtime.host.running
