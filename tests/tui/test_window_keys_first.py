"""Keys first (DESIGN §13): runs that are not on screen send no deltas or tool progress (only
their durable events), so many runs streaming at once do not fill the message queue keypresses
share."""

from __future__ import annotations

import asyncio
from typing import Any

from runtime.api import Runtime
from runtime.models import Role, RunState
from tui import bridge


class _Collector:
    """Stands in for the screen: the bridge only calls ``post_message`` on its target."""

    def __init__(self) -> None:
        self.messages: list[Any] = []

    def post_message(self, message: Any) -> bool:
        self.messages.append(message)
        return True


def _run_of(message: Any) -> str:
    if isinstance(message, bridge.DeltaReceived):
        return message.run_id
    return str(getattr(message.event, "run_id", ""))


def _completed(collector: _Collector, run_id: str) -> bool:
    return any(
        isinstance(m, bridge.RunStateChanged)
        and m.event.run_id == run_id
        and m.event.to_state is RunState.COMPLETED
        for m in collector.messages
    )


async def test_a_run_not_on_screen_sends_no_deltas_only_its_durable_events(
    runtime: Runtime,
) -> None:
    shown_run: dict[str, str] = {}
    collector = _Collector()
    pump = asyncio.create_task(
        bridge.Bridge(
            runtime,
            collector,  # type: ignore[arg-type]
            wants_live=lambda run_id: run_id == shown_run.get("id"),
        ).pump()
    )
    try:
        await asyncio.sleep(0)
        shown = await runtime.start("/stream 64")
        shown_run["id"] = shown.id
        hidden = await runtime.start("/stream 64")
        for run in (shown, hidden):
            boundary = await runtime.wait(run.id, timeout=60)
            assert boundary.state is RunState.COMPLETED
        async with asyncio.timeout(30):
            while not (_completed(collector, shown.id) and _completed(collector, hidden.id)):
                await asyncio.sleep(0.01)
    finally:
        pump.cancel()
        await asyncio.gather(pump, return_exceptions=True)

    by_run: dict[str, set[type]] = {}
    for message in collector.messages:
        by_run.setdefault(_run_of(message), set()).add(type(message))
    assert bridge.DeltaReceived in by_run[shown.id]
    assert bridge.MessageCommitted in by_run[shown.id]
    assert bridge.RunStateChanged in by_run[hidden.id]
    assert bridge.DeltaReceived not in by_run[hidden.id]
    assert bridge.ToolProgressed not in by_run[hidden.id]
    hidden_messages = sum(1 for m in collector.messages if _run_of(m) == hidden.id)
    shown_messages = sum(1 for m in collector.messages if _run_of(m) == shown.id)
    assert hidden_messages < shown_messages
    streamed = "".join(
        m.text
        for m in collector.messages
        if isinstance(m, bridge.DeltaReceived) and m.run_id == shown.id and not m.thinking
    )
    # The text streamed is the answer's (the last pieces may be superseded by the committed
    # message, which the bus hands out instead of the deltas still buffered before it).
    committed = next(
        m.event.message.text
        for m in collector.messages
        if isinstance(m, bridge.MessageCommitted)
        and m.event.run_id == shown.id
        and m.event.message.role is Role.ASSISTANT
    )
    assert len(committed) >= 64 * 1000
    assert committed.startswith(streamed) and len(streamed) >= len(committed) // 2


async def test_observe_hands_out_deltas_only_of_the_runs_it_is_told_are_live(
    runtime: Runtime,
) -> None:
    """The filter is the runtime's (``observe(live=...)``): a run not on screen never puts a
    piece in the subscriber's buffer, so it never wakes the bridge."""
    live_ids: set[str] = set()
    seen: list[Any] = []

    async def collect() -> None:
        async for event in runtime.observe(live=live_ids.__contains__):
            seen.append(event)

    watcher = asyncio.create_task(collect())
    try:
        await asyncio.sleep(0)
        shown = await runtime.start("/stream 64")
        live_ids.add(shown.id)
        hidden = await runtime.start("/stream 64")
        for run in (shown, hidden):
            assert (await runtime.wait(run.id, timeout=60)).state is RunState.COMPLETED
        async with asyncio.timeout(30):
            while (
                sum(
                    1
                    for e in seen
                    if e.kind == "run_state_changed" and e.to_state is RunState.COMPLETED
                )
                < 2
            ):
                await asyncio.sleep(0.01)
    finally:
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)

    kinds: dict[str, set[str]] = {}
    for event in seen:
        kinds.setdefault(event.run_id, set()).add(event.kind)
    assert "message_delta" in kinds[shown.id]
    assert {"run_state_changed", "message_committed"} <= kinds[hidden.id]
    assert not {"message_delta", "tool_progress"} & kinds[hidden.id]


async def test_the_bridge_reads_a_fast_stream_in_merged_pieces_and_posts_all_of_it(
    runtime: Runtime,
) -> None:
    """While deltas wait for their flush, the bridge leaves the bus to merge the pieces that
    follow: it reads a fraction of the pieces an observer that looks at once gets (one per
    turn of the streaming loop), and the text it posts is still whole and in order."""
    read_by_bridge = 0
    observe = runtime.observe

    async def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal read_by_bridge
        async for event in observe(*args, **kwargs):
            read_by_bridge += event.kind == "message_delta"
            yield event

    runtime.observe = counted  # type: ignore[method-assign]
    eager: list[str] = []

    async def look_at_once() -> None:
        async for event in observe():
            if event.kind == "message_delta":
                eager.append(event.text)

    collector = _Collector()
    tasks = [
        asyncio.create_task(bridge.Bridge(runtime, collector).pump()),  # type: ignore[arg-type]
        asyncio.create_task(look_at_once()),
    ]
    try:
        await asyncio.sleep(0)
        run = await runtime.start("/stream 256")
        assert (await runtime.wait(run.id, timeout=60)).state is RunState.COMPLETED
        async with asyncio.timeout(30):
            while not _completed(collector, run.id):
                await asyncio.sleep(0.01)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    posted = [m for m in collector.messages if isinstance(m, bridge.DeltaReceived)]
    text = "".join(m.text for m in posted if not m.thinking)
    assert text == "".join(eager)[: len(text)] and len(text) >= 200 * 1000
    offsets = [m.offset for m in posted if not m.thinking]
    assert offsets == sorted(offsets)
    assert len(eager) > 100
    assert read_by_bridge * 4 < len(eager)
