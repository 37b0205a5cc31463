"""The engine on a thread of its own (DESIGN §13: keys first).

Profiled with ten runs streaming in a real terminal, about half of the TUI's event loop was the
engine's (model turns, folding deltas, saving drafts inline with SQLite): thousands of task
steps per second queued between every hop a keypress makes from the terminal to the focused
widget and back to the screen, and single steps of 100 ms and more. ``EngineHost`` runs the
runtime on its own thread and asyncio loop instead, so the TUI's loop holds only the TUI's work,
and under the GIL the TUI's thread gets the interpreter back every switch interval however busy
the engine is.

``HostedRuntime`` is what the app is given: it implements ``RuntimeApi`` by running each call on
the engine's loop (``run_coroutine_threadsafe``, awaited with ``asyncio.wrap_future``):

- an error raised by the engine is raised to the caller, as it is;
- cancelling the caller cancels the call on the engine's loop;
- async iterators (``observe``) are pumped on the engine's loop into a queue the caller reads;
  the caller's loop is woken once per batch, not once per event; leaving the iteration stops the
  pump;
- what the runtime hands out to read further (``store``, ``mcp``, ``extensions``, consumers) is
  wrapped the same way: its coroutine methods run on the engine's loop, plain attributes and
  sync methods are read directly (they are data, or read data).

Functions that drive an MCP session themselves must run wholly on the engine's loop (a session
belongs to the loop it was opened on): ``on_engine(manager, function, ...)`` does that.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import inspect
import logging
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar, cast

if TYPE_CHECKING:
    from runtime.api import Boundary, RuntimeApi, UnknownChoice
    from runtime.config import Config
    from runtime.consumers import Consumer
    from runtime.engine.extensions import ExtensionPoints
    from runtime.events import DurableEvent, Event
    from runtime.mcp.manager import McpManager
    from runtime.models import (
        Checkpoint,
        InputRequest,
        Job,
        Message,
        Run,
        RunState,
        SearchHit,
        ToolCall,
    )
    from runtime.store.base import Page, RecoveryReport, Store

log = logging.getLogger(__name__)

T = TypeVar("T")

STOP_SECONDS = 10.0
"""How long closing waits for the engine's thread to end."""

BATCH_SECONDS = 0.01
"""While items flow from the engine, the TUI's loop is woken at most this often (each wake-up
costs it a hop through its self-pipe and the GIL): the bridge paints deltas 1/30 s apart anyway."""


class Pending(Protocol):
    """What holds the items of a bridged iteration not delivered yet: ``add`` and ``take`` are
    called under a lock (``add`` on the engine's thread), ``deliver`` on the reader's."""

    def add(self, item: Any) -> None: ...

    def take(self) -> list[Any]: ...

    def deliver(self, item: Any) -> Any: ...

    def __bool__(self) -> bool: ...


class _Items:
    """Every item as it came."""

    def __init__(self) -> None:
        self._items: list[Any] = []

    def add(self, item: Any) -> None:
        self._items.append(item)

    def take(self) -> list[Any]:
        items, self._items = self._items, []
        return items

    def deliver(self, item: Any) -> Any:
        return item

    def __bool__(self) -> bool:
        return bool(self._items)


class EngineHost:
    """A thread running an asyncio loop of its own, for the runtime."""

    def __init__(self, name: str = "agent-tui-engine") -> None:
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        self._ready.wait()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(self._ready.set)
        try:
            self.loop.run_forever()
        finally:
            try:
                pending = asyncio.all_tasks(self.loop)
                for task in pending:
                    task.cancel()
                if pending:
                    self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
                self.loop.run_until_complete(self.loop.shutdown_asyncgens())
                self.loop.run_until_complete(self.loop.shutdown_default_executor())
            finally:
                self.loop.close()

    @property
    def running(self) -> bool:
        return self._thread.is_alive() and not self.loop.is_closed()

    def on_engine_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule ``coro`` on the engine's loop."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    async def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the engine's loop and await its result here. Cancelling the caller
        cancels it there."""
        if not self.running:
            coro.close()
            raise RuntimeError("the engine's thread has stopped")
        return await asyncio.wrap_future(self.submit(coro))

    async def iterate(
        self,
        make: Callable[[], AsyncIterator[T]],
        *,
        pending: Callable[[], Pending] | None = None,
    ) -> AsyncIterator[T]:
        """The items of ``make()``, iterated on the engine's loop, delivered to this loop in
        order. Leaving (break, cancel, close) stops the iteration there.

        This loop is woken at most once per ``BATCH_SECONDS`` while items flow (and at once at
        the end). ``pending`` makes what holds the items not delivered yet (by default a plain
        list; ``DeltaPieces`` merges pieces of streaming messages)."""
        here = asyncio.get_running_loop()
        engine = self.loop
        lock = threading.Lock()
        items: Pending = pending() if pending is not None else _Items()
        wake = asyncio.Event()
        state: dict[str, Any] = {"scheduled": False, "ended": False, "error": None}

        def woken() -> None:  # on this loop
            wake.set()

        def wake_reader() -> None:  # from the engine's loop
            with contextlib.suppress(RuntimeError):  # the reader's loop has closed: no one reads
                here.call_soon_threadsafe(woken)

        def send() -> None:  # on the engine's loop
            state["scheduled"] = False
            wake_reader()

        async def pump() -> None:  # on the engine's loop
            try:
                async for item in make():
                    with lock:
                        items.add(item)
                    if not state["scheduled"]:
                        state["scheduled"] = True
                        engine.call_later(BATCH_SECONDS, send)
            except BaseException as error:
                state["error"] = error
                raise
            finally:
                state["ended"] = True
                wake_reader()  # the end wakes the reader at once

        def take() -> list[Any]:
            with lock:
                return items.take()

        future = self.submit(pump())
        try:
            while True:
                for item in take():
                    yield items.deliver(item)
                if state["ended"]:
                    for item in take():
                        yield items.deliver(item)
                    error = state["error"]
                    if error is not None and not isinstance(error, asyncio.CancelledError):
                        raise error
                    return
                wake.clear()
                with lock:
                    waiting = bool(items)
                if waiting or state["ended"]:
                    continue
                await wake.wait()
        finally:
            future.cancel()

    def stop(self) -> None:
        """Stop the loop (its tasks are cancelled) and wait for the thread to end."""
        if self._thread.is_alive() and not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self.loop.stop)
        if not self.on_engine_thread():
            self._thread.join(STOP_SECONDS)
            if self._thread.is_alive():
                log.warning("the engine's thread did not stop within %s s", STOP_SECONDS)


class Remote:
    """An object of the engine's (a store, the MCP manager, ...) seen from another loop: its
    coroutine methods run on the engine's loop, async generator methods are bridged, anything
    else is read directly."""

    def __init__(self, target: object, host: EngineHost) -> None:
        self._target = target
        self._host = host

    @property
    def remote_target(self) -> object:
        return self._target

    @property
    def remote_host(self) -> EngineHost:
        return self._host

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        host = self._host
        if inspect.iscoroutinefunction(value):

            async def call(*args: Any, **kwargs: Any) -> Any:
                return await host.call(value(*args, **kwargs))

            return call
        if inspect.isasyncgenfunction(value):

            def iterate(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
                return host.iterate(lambda: value(*args, **kwargs))

            return iterate
        return value

    def __repr__(self) -> str:
        return f"Remote({self._target!r})"


class RemoteConsumer(Remote):
    """A durable consumer of the engine's: ``async with`` and ``async for`` run there too (the
    protocol's methods are looked up on the type, so ``Remote.__getattr__`` would not see them)."""

    async def __aenter__(self) -> RemoteConsumer:
        target: Any = self.remote_target
        await self.remote_host.call(target.__aenter__())
        return self

    async def __aexit__(self, *exc: object) -> None:
        target: Any = self.remote_target
        await self.remote_host.call(target.__aexit__(*exc))

    def __aiter__(self) -> RemoteConsumer:
        return self

    async def __anext__(self) -> Any:
        target: Any = self.remote_target
        end = object()

        async def step() -> Any:
            try:
                return await target.__anext__()
            except StopAsyncIteration:
                return end

        event = await self.remote_host.call(step())
        if event is end:
            raise StopAsyncIteration
        return event


def remote(target: T, host: EngineHost) -> T:
    """``target`` seen through ``Remote`` (typed as itself)."""
    return cast(T, Remote(target, host))


async def on_engine(
    owner: object,
    function: Callable[..., Awaitable[T]],
    *args: Any,
    **kwargs: Any,
) -> T:
    """``await function(owner, *args, **kwargs)``, on the engine's loop when ``owner`` is one of
    the engine's objects seen through ``Remote`` (``function`` then gets the object itself)."""
    if isinstance(owner, Remote):
        target = owner.remote_target

        async def run() -> T:
            return await function(target, *args, **kwargs)

        return await owner.remote_host.call(run())
    return await function(owner, *args, **kwargs)


class HostedRuntime:
    """``RuntimeApi`` for a runtime that lives on an ``EngineHost``."""

    def __init__(self, runtime: RuntimeApi, host: EngineHost) -> None:
        self._runtime = runtime
        self._host = host
        self._store = remote(runtime.store, host)
        self._extensions = remote(runtime.extensions, host)
        mcp = runtime.mcp
        self._mcp = None if mcp is None else remote(mcp, host)
        self._closed = False

    @classmethod
    async def open(
        cls, opener: Callable[[], Awaitable[RuntimeApi]], *, host: EngineHost | None = None
    ) -> HostedRuntime:
        """Start an engine thread (unless given one) and open the runtime on it with
        ``opener``; a failure to open stops the thread and is raised here."""
        host = host or EngineHost()

        async def open_there() -> RuntimeApi:
            return await opener()

        try:
            runtime = await host.call(open_there())
        except BaseException:
            host.stop()
            raise
        return cls(runtime, host)

    @property
    def host(self) -> EngineHost:
        return self._host

    @property
    def hosted(self) -> RuntimeApi:
        """The runtime itself (on the engine's loop: call it only there)."""
        return self._runtime

    def _call(self, coro: Coroutine[Any, Any, T]) -> Awaitable[T]:
        return self._host.call(coro)

    # --- the run lifecycle ------------------------------------------------------------------
    async def start(
        self,
        input: str,
        *,
        agent: str | None = None,
        model: str | None = None,
        job_id: str | None = None,
        idempotency_key: str | None = None,
        detached: bool = False,
    ) -> Run:
        return await self._call(
            self._runtime.start(
                input,
                agent=agent,
                model=model,
                job_id=job_id,
                idempotency_key=idempotency_key,
                detached=detached,
            )
        )

    async def follow_up(
        self, job_id: str, input: str, *, agent: str | None = None, model: str | None = None
    ) -> Run:
        return await self._call(self._runtime.follow_up(job_id, input, agent=agent, model=model))

    async def retry(self, run_id: str, *, unknown: UnknownChoice | None = None) -> Run:
        return await self._call(self._runtime.retry(run_id, unknown=unknown))

    async def fork(self, checkpoint_id: str, input: str | None = None) -> Run:
        return await self._call(self._runtime.fork(checkpoint_id, input))

    async def respond(
        self, run_id: str, request_id: str, value: Any, *, idempotency_key: str | None = None
    ) -> Run:
        return await self._call(
            self._runtime.respond(run_id, request_id, value, idempotency_key=idempotency_key)
        )

    async def cancel(self, run_id: str, *, reason: str | None = None) -> Run:
        return await self._call(self._runtime.cancel(run_id, reason=reason))

    async def close(self) -> None:
        """Close the runtime on its loop, then stop the engine's thread. Twice is once."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._host.running:
                await self._call(self._runtime.close())
        finally:
            await asyncio.to_thread(self._host.stop)

    # --- observing and waiting --------------------------------------------------------------
    def observe(
        self, run_id: str | None = None, *, job_id: str | None = None, after: int | None = None
    ) -> AsyncIterator[Event]:
        """Every event, in order; the pieces of a streaming message that the TUI has not taken
        yet arrive as one piece (``DeltaPieces``; the bridge would merge them anyway), so ten
        runs streaming cost the TUI's loop a handful of events per wake-up, not thousands."""
        runtime = self._runtime
        return self._host.iterate(
            lambda: runtime.observe(run_id, job_id=job_id, after=after),
            pending=DeltaPieces,
        )

    async def wait(self, run_id: str, *, timeout: float | None = None) -> Boundary:
        return await self._call(self._runtime.wait(run_id, timeout=timeout))

    async def wait_answered(self, request_id: str, *, timeout: float | None = None) -> InputRequest:
        return await self._call(self._runtime.wait_answered(request_id, timeout=timeout))

    async def events(
        self,
        *,
        after: int = 0,
        limit: int = 500,
        run_id: str | None = None,
        job_id: str | None = None,
    ) -> list[DurableEvent]:
        return await self._call(
            self._runtime.events(after=after, limit=limit, run_id=run_id, job_id=job_id)
        )

    async def last_seq(self) -> int:
        return await self._call(self._runtime.last_seq())

    def consume(self, consumer_id: str, *, after: int | None = None) -> Consumer:
        consumer = self._runtime.consume(consumer_id, after=after)
        return cast("Consumer", RemoteConsumer(consumer, self._host))

    # --- queries ----------------------------------------------------------------------------
    async def get_job(self, job_id: str) -> Job:
        return await self._call(self._runtime.get_job(job_id))

    async def get_run(self, run_id: str) -> Run:
        return await self._call(self._runtime.get_run(run_id))

    async def get_request(self, request_id: str) -> InputRequest:
        return await self._call(self._runtime.get_request(request_id))

    async def list_jobs(
        self, *, cursor: str | None = None, limit: int = 50, state: RunState | None = None
    ) -> Page[Job]:
        return await self._call(self._runtime.list_jobs(cursor=cursor, limit=limit, state=state))

    async def list_runs(
        self, *, cursor: str | None = None, limit: int = 50, state: RunState | None = None
    ) -> Page[Run]:
        return await self._call(self._runtime.list_runs(cursor=cursor, limit=limit, state=state))

    async def job_runs(self, job_id: str) -> list[Run]:
        return await self._call(self._runtime.job_runs(job_id))

    async def messages(
        self,
        run_id: str,
        *,
        after_position: int = -1,
        before_position: int | None = None,
        limit: int = 200,
    ) -> list[Message]:
        return await self._call(
            self._runtime.messages(
                run_id, after_position=after_position, before_position=before_position, limit=limit
            )
        )

    async def all_messages(self, run_id: str) -> list[Message]:
        return await self._call(self._runtime.all_messages(run_id))

    async def tool_calls(self, run_id: str) -> list[ToolCall]:
        return await self._call(self._runtime.tool_calls(run_id))

    async def unknown_calls(self, run_id: str) -> list[ToolCall]:
        return await self._call(self._runtime.unknown_calls(run_id))

    async def checkpoints(self, run_id: str) -> list[Checkpoint]:
        return await self._call(self._runtime.checkpoints(run_id))

    async def open_request(self, run_id: str) -> InputRequest | None:
        return await self._call(self._runtime.open_request(run_id))

    async def inbox(self, *, limit: int = 100) -> list[InputRequest]:
        return await self._call(self._runtime.inbox(limit=limit))

    async def search(self, query: str, *, limit: int = 50) -> list[SearchHit]:
        return await self._call(self._runtime.search(query, limit=limit))

    async def counts(self) -> dict[RunState, int]:
        return await self._call(self._runtime.counts())

    async def export_job(self, job_id: str, *, format: Literal["md", "json"] = "md") -> str:
        return await self._call(self._runtime.export_job(job_id, format=format))

    # --- the host process -------------------------------------------------------------------
    @property
    def store(self) -> Store:
        return self._store

    @property
    def workspace(self) -> Path:
        return self._runtime.workspace

    @property
    def owner_id(self) -> str:
        return self._runtime.owner_id

    @property
    def config(self) -> Config:
        return self._runtime.config

    @property
    def mcp(self) -> McpManager | None:
        return self._mcp

    @property
    def extensions(self) -> ExtensionPoints:
        return self._extensions

    @property
    def recovery(self) -> RecoveryReport:
        return self._runtime.recovery

    @property
    def default_model(self) -> str:
        return self._runtime.default_model

    @property
    def model_notice(self) -> str | None:
        return self._runtime.model_notice

    def context_window(self, model: str) -> int:
        return self._runtime.context_window(model)

    def holds_session(self, request: InputRequest) -> bool:
        return self._runtime.holds_session(request)


class _Pieces:
    """Consecutive pieces of one streaming message, folded on the engine's thread."""

    __slots__ = ("first", "length", "texts")

    def __init__(self, first: Any) -> None:
        self.first = first
        self.texts: list[str] = [first.text]
        self.length = len(first.text)


class DeltaPieces(_Items):
    """Items not delivered yet, where each piece of a streaming message joins the earlier
    pieces of that message still waiting (text and offset kept; pieces of different messages
    are independent, so ten interleaved streams still fold), but never across another kind of
    event: a message's commit, a state change and the like stay after every piece before them."""

    def __init__(self) -> None:
        super().__init__()
        self._open: dict[tuple[str, str, str, bool], _Pieces] = {}

    def add(self, item: Any) -> None:
        from runtime.events import MessageDelta

        if not isinstance(item, MessageDelta):
            self._open.clear()
            self._items.append(item)
            return
        key = (item.run_id, item.execution_id, item.message_id, item.thinking)
        pieces = self._open.get(key)
        if pieces is not None and item.offset == pieces.first.offset + pieces.length:
            pieces.texts.append(item.text)
            pieces.length += len(item.text)
            return
        pieces = _Pieces(item)
        self._open[key] = pieces
        self._items.append(pieces)

    def take(self) -> list[Any]:
        self._open.clear()
        return super().take()

    def deliver(self, item: Any) -> Any:
        if isinstance(item, _Pieces):
            if len(item.texts) == 1:
                return item.first
            return item.first.model_copy(update={"text": "".join(item.texts)})
        return item


def _implements(runtime: HostedRuntime) -> RuntimeApi:
    return runtime  # mypy: HostedRuntime must stay a RuntimeApi
