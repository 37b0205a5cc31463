"""The observer buffer of DESIGN §6: merged deltas, bounded size, superseded pieces dropped."""

from __future__ import annotations

import asyncio

from runtime.bus import MAX_EVENTS, MAX_TEXT, EventBus, Stream
from runtime.engine.stream_fold import Fold
from runtime.events import Event, MessageCommitted, MessageDelta, ToolProgress, ToolStateChanged
from runtime.models import Message, Role, TextBlock, ToolCallState
from runtime.providers.base import TextDelta, ThinkingDelta


def accept_all(event: Event) -> bool:
    return True


def committed(message_id: str, seq: int) -> MessageCommitted:
    message = Message(
        id=message_id,
        run_id="r",
        job_id="j",
        position=1,
        role=Role.ASSISTANT,
        content=[TextBlock(text="hello world")],
        created_at=0,
    )
    return MessageCommitted(job_id="j", run_id="r", seq=seq, message=message)


def drain(subscription: object) -> list[Event]:
    events = []
    while (event := subscription.get_nowait()) is not None:  # type: ignore[attr-defined]
        events.append(event)
    return events


def test_consecutive_deltas_of_one_message_are_merged() -> None:
    bus = EventBus()
    subscription = bus.subscribe(accept_all)
    bus.publish_delta("j", "r", "x", "m1", 0, "hello ")
    bus.publish_delta("j", "r", "x", "m1", 6, "world")
    bus.publish_delta("j", "r", "x", "m2", 0, "other")
    events = drain(subscription)
    assert [(e.message_id, e.offset, e.text) for e in events if isinstance(e, MessageDelta)] == [
        ("m1", 0, "hello world"),
        ("m2", 0, "other"),
    ]


def test_deltas_are_dropped_once_their_message_is_committed() -> None:
    bus = EventBus()
    subscription = bus.subscribe(accept_all)
    bus.publish_delta("j", "r", "x", "m1", 0, "hello ")
    bus.publish(committed("m1", 7))
    events = drain(subscription)
    assert [e.kind for e in events] == ["message_committed"]


def test_progress_is_dropped_once_its_tool_call_ends() -> None:
    bus = EventBus()
    subscription = bus.subscribe(accept_all)
    bus.publish(ToolProgress(job_id="j", run_id="r", tool_call_id="t", progress=1))
    bus.publish(
        ToolStateChanged(
            job_id="j",
            run_id="r",
            seq=3,
            tool_call_id="t",
            name="shell",
            **{"from": ToolCallState.RUNNING, "to": ToolCallState.COMPLETED},
        )
    )
    assert [e.kind for e in drain(subscription)] == ["tool_state_changed"]


def test_a_slow_subscriber_keeps_a_bounded_buffer_and_never_loses_durable_events() -> None:
    bus = EventBus()
    subscription = bus.subscribe(accept_all)
    for index in range(1000):
        # Separate messages, so nothing merges.
        bus.publish_delta("j", "r", "x", f"m{index}", 0, "y" * 200)
        if index % 100 == 0:
            bus.publish(committed(f"done{index}", index + 1))
    events = drain(subscription)
    durable = [e for e in events if isinstance(e, MessageCommitted)]
    assert len(durable) == 10
    assert len(events) <= MAX_EVENTS + len(durable)
    assert sum(len(e.text) for e in events if isinstance(e, MessageDelta)) <= MAX_TEXT
    assert subscription.dropped > 0


def test_a_filtered_subscriber_sees_only_its_run() -> None:
    bus = EventBus()
    mine = bus.subscribe(lambda e: e.run_id == "r1", lambda job, run: run == "r1")
    bus.publish_delta("j", "r1", "x", "m", 0, "mine")
    bus.publish_delta("j", "r2", "x", "n", 0, "theirs")
    assert [e.text for e in drain(mine) if isinstance(e, MessageDelta)] == ["mine"]


async def test_get_waits_for_the_next_event_and_ends_when_closed() -> None:
    bus = EventBus()
    subscription = bus.subscribe(accept_all)
    waiter = asyncio.create_task(subscription.get())
    await asyncio.sleep(0)
    bus.publish_delta("j", "r", "x", "m", 0, "hi")
    async with asyncio.timeout(5):
        event = await waiter
    assert isinstance(event, MessageDelta) and event.text == "hi"
    subscription.close()
    try:
        async with asyncio.timeout(5):
            await subscription.get()
    except EOFError:
        pass
    else:
        raise AssertionError("a closed subscription must end")


async def test_a_subscriber_far_behind_is_told_to_read_durable_events_back() -> None:
    from runtime.bus import MAX_BACKLOG, Overflowed

    bus = EventBus()
    subscription = bus.subscribe(accept_all)
    for index in range(MAX_BACKLOG + 10):
        bus.publish(committed(f"m{index}", index + 1))
    try:
        async with asyncio.timeout(5):
            await subscription.get()
    except Overflowed:
        pass
    else:
        raise AssertionError("an overflowed subscription must say so")
    bus.publish(committed("after", MAX_BACKLOG + 20))
    # What is still buffered came after the overflow, in order; the rest is in the store.
    rest = drain(subscription)
    seqs = [e.seq for e in rest if isinstance(e, MessageCommitted)]
    assert seqs == sorted(seqs) and seqs[0] > MAX_BACKLOG and seqs[-1] == MAX_BACKLOG + 20


async def test_a_burst_of_deltas_wakes_a_waiting_subscriber_once_with_all_of_its_text() -> None:
    bus = EventBus()
    asked: list[str] = []

    def accept_run(job_id: str, run_id: str) -> bool:
        asked.append(run_id)
        return True

    subscription = bus.subscribe(accept_all, accept_run)
    waiter = asyncio.create_task(subscription.get())
    await asyncio.sleep(0)
    for offset in range(1000):  # no turn of the event loop in between, as a model streams
        bus.publish_delta("j", "r", "x", "m", offset, "y")
    async with asyncio.timeout(5):
        event = await waiter
    assert isinstance(event, MessageDelta)
    assert (event.offset, event.text) == (0, "y" * 1000)
    assert asked == ["r"]  # the run filter looked at the burst once, not at each delta
    assert drain(subscription) == []


def test_deltas_stay_in_order_with_the_events_published_between_them() -> None:
    bus = EventBus()
    subscription = bus.subscribe(accept_all)
    bus.publish_delta("j", "r", "x", "m", 0, "one ")
    bus.publish(ToolProgress(job_id="j", run_id="r", tool_call_id="t", progress=1))
    bus.publish_delta("j", "r", "x", "m", 4, "two")
    bus.publish_delta("j", "r", "x", "m", 9, "after a gap")  # not contiguous: not merged
    assert [
        (e.kind, e.text if isinstance(e, MessageDelta) else "") for e in drain(subscription)
    ] == [
        ("message_delta", "one "),
        ("tool_progress", ""),
        ("message_delta", "two"),
        ("message_delta", "after a gap"),
    ]


def test_a_subscriber_that_never_looks_keeps_a_bounded_buffer_of_one_long_message() -> None:
    bus = EventBus()
    subscription = bus.subscribe(accept_all)
    piece = "z" * 1000
    for index in range(4 * MAX_TEXT // len(piece)):
        bus.publish_delta("j", "r", "x", "m", index * len(piece), piece)
        # What the bus holds for it is handed out (and trimmed there) as it grows.
        assert bus._open is None or bus._open.length <= MAX_TEXT + len(piece)
    events = drain(subscription)
    assert sum(len(e.text) for e in events if isinstance(e, MessageDelta)) <= MAX_TEXT
    assert subscription.dropped > 0


def test_a_late_subscriber_gets_only_what_is_published_after_it_subscribed() -> None:
    bus = EventBus()
    early = bus.subscribe(accept_all)
    bus.publish_delta("j", "r", "x", "m", 0, "before ")
    late = bus.subscribe(accept_all)
    bus.publish_delta("j", "r", "x", "m", 7, "after")
    assert [e.text for e in drain(early) if isinstance(e, MessageDelta)] == ["before after"]
    assert [e.text for e in drain(late) if isinstance(e, MessageDelta)] == ["after"]


# --- open streams: the engine's deltas, read from the message being folded -----------------------


def _folding() -> tuple[EventBus, Fold, Stream]:
    bus = EventBus()
    fold = Fold()
    return bus, fold, bus.open_stream("j", "r", "x", "m", fold)


def _stream(fold: Fold, bus: EventBus, *pieces: str, thinking: bool = False) -> None:
    """What the engine does per delta: fold it in, and wake a waiting subscriber."""
    for piece in pieces:
        fold.apply(ThinkingDelta(text=piece) if thinking else TextDelta(text=piece))
        if bus.waiting:
            bus.wake()


def _pieces(events: list[Event]) -> list[tuple[int, str, bool]]:
    return [(e.offset, e.text, e.thinking) for e in events if isinstance(e, MessageDelta)]


def test_an_open_streams_text_is_handed_out_merged_each_time_a_subscriber_looks() -> None:
    bus, fold, _ = _folding()
    subscription = bus.subscribe(accept_all)
    _stream(fold, bus, "hel", "lo ", "wor")
    assert _pieces(drain(subscription)) == [(0, "hello wor", False)]
    _stream(fold, bus, "ld")
    assert _pieces(drain(subscription)) == [(9, "ld", False)]
    assert drain(subscription) == []


async def test_a_waiting_subscriber_is_woken_once_by_the_streams_next_deltas() -> None:
    bus, fold, _ = _folding()
    asked: list[str] = []

    def accept_run(job_id: str, run_id: str) -> bool:
        asked.append(run_id)
        return True

    subscription = bus.subscribe(accept_all, accept_run)
    waiter = asyncio.create_task(subscription.get())
    await asyncio.sleep(0)
    assert bus.waiting
    _stream(fold, bus, *["y"] * 1000)  # no turn of the event loop in between
    assert not bus.waiting
    async with asyncio.timeout(5):
        event = await waiter
    assert isinstance(event, MessageDelta) and (event.offset, event.text) == (0, "y" * 1000)
    assert asked == ["r"]  # the run filter looked once, not at each delta


def test_a_streams_text_comes_before_what_is_published_after_it_and_a_commit_supersedes_it() -> (
    None
):
    bus, fold, stream = _folding()
    subscription = bus.subscribe(accept_all)
    _stream(fold, bus, "one ")
    bus.publish(ToolProgress(job_id="j", run_id="r", tool_call_id="t", progress=1))
    _stream(fold, bus, "two")
    bus.close_stream(stream)  # the message ends: what it still holds is handed out
    _stream(fold, bus, " never shown")
    assert [(e.kind, getattr(e, "text", "")) for e in drain(subscription)] == [
        ("message_delta", "one "),
        ("tool_progress", ""),
        ("message_delta", "two"),
    ]
    _, fold, stream = _folding()
    second = EventBus()
    stream = second.open_stream("j", "r", "x", "m1", fold)
    subscription = second.subscribe(accept_all)
    _stream(fold, second, "hello world")
    second.close_stream(stream)
    second.publish(committed("m1", 1))  # superseded by the committed message
    assert [e.kind for e in drain(subscription)] == ["message_committed"]


def test_thinking_is_handed_out_before_the_text_that_follows_it_each_at_its_offset() -> None:
    bus, fold, _ = _folding()
    subscription = bus.subscribe(accept_all)
    _stream(fold, bus, "hmm, ", "let me see", thinking=True)
    _stream(fold, bus, "The answer")
    _stream(fold, bus, " later", thinking=True)
    assert _pieces(drain(subscription)) == [
        (0, "hmm, let me see later", True),
        (0, "The answer", False),
    ]


def test_a_late_subscriber_gets_only_the_text_streamed_after_it_subscribed() -> None:
    bus, fold, _ = _folding()
    early = bus.subscribe(accept_all)
    _stream(fold, bus, "before ")
    late = bus.subscribe(accept_all)
    _stream(fold, bus, "after")
    assert _pieces(drain(early)) == [(0, "before after", False)]
    assert _pieces(drain(late)) == [(7, "after", False)]


def test_a_subscriber_that_never_looks_keeps_the_newest_of_a_long_stream_within_bounds() -> None:
    bus, fold, _ = _folding()
    subscription = bus.subscribe(accept_all)
    text = "".join(f"{index:07d} " for index in range(4 * MAX_TEXT // 8))
    _stream(fold, bus, *(text[i : i + 1000] for i in range(0, len(text), 1000)))
    bus.publish(ToolProgress(job_id="j", run_id="r", tool_call_id="t", progress=1))
    pieces = _pieces(drain(subscription))
    kept = "".join(piece for _, piece, _ in pieces)
    assert 0 < len(kept) <= MAX_TEXT
    assert text.endswith(kept) and pieces[0][0] == len(text) - len(kept)  # the newest, in place
