"""``agent-tui worker`` and ``agent-tui events`` (DESIGN §11, §15): executing the runs queued
for workers, and printing durable events for scripts (with a consumer: at least once, resumed
after the last one printed). Both wait out a database that cannot be reached (PostgreSQL
restarting: ``runtime.outages``) and go on where they were; any other database error ends
them in one line, exit status 2."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runtime.api import Runtime
from runtime.errors import DatabaseUnreachable, InvalidInput
from runtime.events import (
    CheckpointCreated,
    DurableEvent,
    JobArchived,
    MessageCommitted,
    RunNoted,
    RunStateChanged,
    ToolStateChanged,
    dump_event,
)
from runtime.outages import OutageReport, wait_out_outage
from runtime.store.checks import opens_immutable
from runtime.workers import Worker, WorkerReport
from tui._cli.parser import EXIT_INTERRUPTED, EXIT_OK
from tui._cli.render import one_line

if TYPE_CHECKING:
    from runtime.models import Message
    from tui._cli.commands import Context  # typing only: commands imports this module

PAGE = 500


@contextlib.contextmanager
def _on_stop_signals(first: Callable[[], None], again: Callable[[], None]) -> Any:
    """SIGTERM, SIGHUP (the terminal closed) or Ctrl+C once: ``first``; a second time:
    ``again``."""
    from tui.hangup import hangup_ignored, let_go_of_a_closed_terminal

    loop = asyncio.get_running_loop()
    count = 0
    stop_signals = [signal.SIGTERM, signal.SIGINT]
    if not hangup_ignored():
        stop_signals.append(signal.SIGHUP)

    def handler(sig: signal.Signals) -> None:
        nonlocal count
        if sig is signal.SIGHUP:
            let_go_of_a_closed_terminal()  # its reports would fail on the closed terminal
        count += 1
        (first if count == 1 else again)()

    installed = []
    for sig in stop_signals:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, handler, sig)
            installed.append(sig)
    try:
        yield
    finally:
        for sig in installed:
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(sig)


# --- agent-tui worker ---------------------------------------------------------------------------


async def run_worker(ctx: Context, runtime: Runtime, args: Any) -> int:
    roots = [Path(root).expanduser() for root in args.root] or [ctx.workspace]
    for root in roots:
        if not root.is_dir():
            raise InvalidInput(f"--root {root} is not a folder")

    def report(event: WorkerReport) -> None:
        if args.json:
            ctx.print(json.dumps(event.as_json(), ensure_ascii=False))
        else:
            ctx.say(f"agent-tui worker: {event.text}")

    worker = Worker(runtime, roots=roots, concurrency=args.concurrency, report=report)
    stop = asyncio.Event()
    serving = asyncio.create_task(worker.serve(stop, drain_timeout=args.drain_timeout))

    def force() -> None:
        ctx.say("agent-tui worker: stopping now; runs still executing stay recoverable")
        serving.cancel()

    with _on_stop_signals(stop.set, force):
        try:
            await serving
        except asyncio.CancelledError:
            if not serving.cancelled():
                raise
            return EXIT_INTERRUPTED
    return EXIT_OK


# --- agent-tui events ---------------------------------------------------------------------------


def _message_words(message: Message) -> str:
    """A message in a few words: its text, else the tools it calls, else its results (a tool
    message has no text: it read "tool:" and nothing more)."""
    if message.text.strip():
        return one_line(message.text, 80)
    if message.tool_uses:
        return "calls " + ", ".join(use.name for use in message.tool_uses)
    results = message.tool_results
    if results:
        count = f"{len(results)} result{'' if len(results) == 1 else 's'}"
        return f"{count}: {one_line(results[0].content, 60)}"
    return ""


def event_line(event: DurableEvent) -> str:
    """One durable event as a short line of text."""
    head = f"{event.seq} {event.kind} run {event.run_id}"
    match event:
        case RunStateChanged():
            before = event.from_state.value if event.from_state else "-"
            extra = ""
            if event.request is not None:
                extra = f" asks: {one_line(event.request.prompt, 80)}"
            elif event.failure is not None:
                extra = f" {event.failure.code}: {one_line(event.failure.message, 80)}"
            elif event.reason:
                extra = f" ({one_line(event.reason, 80)})"
            return f"{head} {before} -> {event.to_state.value}{extra}"
        case MessageCommitted():
            return f"{head} {event.message.role.value}: {_message_words(event.message)}"
        case RunNoted():
            return f"{head} {event.note}: {one_line(event.text, 80)}"
        case ToolStateChanged():
            before = event.from_state.value if event.from_state else "-"
            return f"{head} {event.name} {before} -> {event.to_state.value}"
        case CheckpointCreated():
            return f"{head} step {event.step}"
        case JobArchived():
            done = "archived" if event.archived else "brought back (unarchived)"
            return f"{event.seq} {event.kind} job {event.job_id} {done}"
        case _:
            return head


async def print_events(ctx: Context, runtime: Runtime, args: Any) -> int:
    if args.consumer is not None and not args.follow:
        raise InvalidInput("--consumer needs --follow (a consumer keeps reading as events commit)")

    def emit(event: DurableEvent) -> None:
        if args.json:
            ctx.print(json.dumps(dump_event(event), ensure_ascii=False))
        else:
            ctx.print(event_line(event))

    if args.follow and isinstance(ctx.db_path, Path) and opens_immutable(ctx.db_path):
        # Read as a file that never changes, it would show no later commit, and one made
        # through another mount could read as corrupt.
        raise InvalidInput(
            f"--follow: {ctx.db_path} is on a read-only file system, read as a fixed copy that "
            "shows no new events; print its events without --follow"
        )
    if not args.follow:
        cursor = args.after or 0
        while True:
            page = await runtime.events(after=cursor, limit=PAGE)
            for event in page:
                emit(event)
                cursor = event.seq
            if len(page) < PAGE:
                return EXIT_OK
    stop = asyncio.Event()
    following = asyncio.create_task(_follow_events(runtime, args, emit, ctx.say, stop))

    def force() -> None:
        following.cancel()

    with _on_stop_signals(stop.set, force), contextlib.suppress(asyncio.CancelledError):
        await following
    return EXIT_OK


async def _follow_events(
    runtime: Runtime,
    args: Any,
    emit: Callable[[DurableEvent], None],
    say: Callable[[str], None],
    stop: asyncio.Event,
) -> None:
    """Print events as they commit until ``stop``. With a consumer, each event is printed
    (and flushed) before it is acknowledged: a process killed in between prints it again.
    A database that cannot be reached is waited for (``wait_out_outage``); following then
    goes on after the last event printed, so none is lost or printed twice."""

    def said(_kind: OutageReport, text: str) -> None:
        say(f"agent-tui events: {text}")

    async def wait_out(outage: DatabaseUnreachable) -> None:
        await wait_out_outage(outage, probe=runtime.last_seq, stop=stop, say=said)

    if args.consumer is not None:
        async with runtime.consume(args.consumer, after=args.after) as consumer:
            while not stop.is_set():
                try:
                    if consumer.delivered > consumer.cursor:
                        await consumer.ack(consumer.delivered)  # printed before an outage
                    async for event in _until(consumer, stop):
                        emit(event)
                        await consumer.ack(event)
                except DatabaseUnreachable as outage:
                    await wait_out(outage)
        return
    cursor = args.after
    while not stop.is_set():
        try:
            if cursor is None:
                cursor = await runtime.last_seq()
            page = await runtime.events(after=cursor, limit=PAGE)
        except DatabaseUnreachable as outage:
            await wait_out(outage)
            continue
        for event in page:
            emit(event)
            cursor = event.seq
        if len(page) < PAGE:
            await _first(stop.wait(), runtime.dispatch.await_change())


async def _until(events: Any, stop: asyncio.Event) -> Any:
    """The events of an async iterator until ``stop`` is set (between two events)."""
    iterator = events.__aiter__()
    while not stop.is_set():
        nxt = asyncio.ensure_future(iterator.__anext__())
        stopped = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({nxt, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
        if not nxt.done():
            nxt.cancel()
            with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                await nxt
            return
        try:
            item = nxt.result()
        except StopAsyncIteration:
            return
        yield item


async def _first(*awaitables: Any) -> None:
    tasks = [asyncio.ensure_future(a) for a in awaitables]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
