"""Following a run to its boundaries: print its events, prompt for answers, pick the exit code.

Without ``--json`` the answer text streams to stdout and everything else (tool activity, notices,
requests) goes to stderr as short lines. With ``--json`` every event is one JSON line on stdout,
then a final ``boundary`` line.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncGenerator, Callable
from typing import Any, TextIO

from runtime.api import Boundary, Runtime
from runtime.errors import AlreadyAnswered, InvalidResponse
from runtime.events import (
    CheckpointCreated,
    Event,
    HistoryRepaired,
    JobArchived,
    MessageCommitted,
    MessageDelta,
    Notice,
    RunNoted,
    RunStateChanged,
    ToolProgress,
    ToolStateChanged,
    dump_event,
    is_durable,
    repair_text,
)
from runtime.models import InputRequest, Role, RunState, ToolCallState
from tui._cli import render
from tui._cli.parser import (
    EXIT_CANCELLED,
    EXIT_FAILED,
    EXIT_INPUT_REQUIRED,
    EXIT_OK,
)
from tui._cli.prompt import GaveUp, Prompter
from tui._cli.render import compact_json, describe_request, how_to_answer, one_line


class EventPrinter:
    """Prints events as they arrive and remembers which state changes it has seen."""

    def __init__(self, out: TextIO, err: TextIO, *, json_mode: bool, main_run_id: str) -> None:
        self.out = out
        self.err = err
        self.json_mode = json_mode
        self.main_run_id = main_run_id
        self._written: dict[str, int] = {}
        self._tool_names: dict[str, str] = {}
        self._midline = False
        self._same_terminal = _isatty(out) and _isatty(err)
        self.seeded_note: str | None = None
        """Said, once, of the main run's first running → queued instead of "interrupted": a
        retry that chose what to do with a call of unknown outcome (``retry --skip-unknown`` or
        ``--rerun``) prepares its run that way before it executes, and nothing was
        interrupted."""
        self.prompter: Prompter | None = None
        """The prompt waiting for an answer on ``err``, whose line a line printed ends first."""

    # --- output helpers ----------------------------------------------------------------------
    def _stdout(self, text: str) -> None:
        if not text:
            return
        if self._same_terminal and self.prompter is not None:
            self.prompter.end_line()
        self.out.write(text)
        self.out.flush()
        self._midline = not text.endswith("\n")

    def end_line(self) -> None:
        """End a half-written answer line so that what follows starts on its own line."""
        if self._midline and not self.json_mode:
            self._stdout("\n")

    def note(self, text: str) -> None:
        """A diagnostic line on stderr."""
        if self._same_terminal:
            self.end_line()
        if self.prompter is not None:
            # A run answered elsewhere goes on here while its prompt still waits: a new-user
            # trial saw "> ✓ write_file (44 chars)" after the TUI allowed the write.
            self.prompter.end_line()
        self.err.write(text + "\n")
        self.err.flush()

    def json_line(self, data: dict[str, Any]) -> None:
        self._stdout(json.dumps(data, ensure_ascii=False) + "\n")

    # --- events ------------------------------------------------------------------------------
    def handle(self, event: Event) -> None:
        if self.json_mode:
            self.json_line(dump_event(event))
        else:
            self._describe(event)

    def _describe(self, event: Event) -> None:
        child = event.run_id != self.main_run_id
        prefix = f"  [{event.run_id}] " if child else "  "
        match event:
            case MessageDelta():
                if not child and not event.thinking:
                    self._delta(event)
            case MessageCommitted():
                message = event.message
                if message.role == Role.ASSISTANT and not child:
                    self._committed(message.id, message.text)
            case ToolStateChanged():
                self._tool(event, prefix)
            case ToolProgress():
                name = self._tool_names.get(event.tool_call_id, "tool")
                amount = f" {event.progress:g}" + (f"/{event.total:g}" if event.total else "")
                if event.message and not event.progress and not event.total:
                    amount = ""  # a line only ("checking with hook `…`…"): no count to show
                detail = f" {one_line(event.message, 60)}" if event.message else ""
                self.note(f"{prefix}… {name}{amount}{detail}")
            case Notice():
                self.note(f"agent-tui: {event.level}: {event.text}")
            case RunStateChanged():
                if child:
                    self.note(f"{prefix}child run {event.to_state.value}")
                elif event.to_state is RunState.QUEUED and event.from_state is RunState.RUNNING:
                    said = self.seeded_note or "the run was interrupted and re-queued"
                    self.seeded_note = None
                    self.note(f"  ({said})")
            case RunNoted():
                if not child:
                    self.note(f"  {event.text}")
            case HistoryRepaired():
                self.note(f"agent-tui: info: {repair_text(event)}")
            case CheckpointCreated() | JobArchived():
                pass

    def _delta(self, event: MessageDelta) -> None:
        written = self._written.get(event.message_id, 0)
        end = event.offset + len(event.text)
        if event.offset > written or end <= written:
            return  # a gap (trimmed deltas) or a repeat: the committed message fills it in
        self._stdout(event.text[written - event.offset :])
        self._written[event.message_id] = end

    def _committed(self, message_id: str, text: str) -> None:
        written = self._written.get(message_id, 0)
        if written < len(text):
            self._stdout(text[written:])
        self._written[message_id] = len(text)
        if text:
            self.end_line()

    def _tool(self, event: ToolStateChanged, prefix: str) -> None:
        self._tool_names[event.tool_call_id] = event.name
        match event.to_state:
            case ToolCallState.PENDING if event.from_state is None:
                self.note(f"{prefix}→ {event.name} {compact_json(event.arguments or {}, 80)}")
            case ToolCallState.COMPLETED:
                size = f" ({len(event.result)} chars)" if event.result else ""
                self.note(f"{prefix}✓ {event.name}{size}")
            case ToolCallState.FAILED:
                self.note(f"{prefix}✗ {event.name}: {one_line(event.error or 'failed', 100)}")
            case ToolCallState.INDETERMINATE:
                self.note(f"{prefix}? {event.name}: outcome unknown")
            case ToolCallState.CANCELLED:
                self.note(f"{prefix}- {event.name} cancelled")
            case _:
                pass


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class Observer:
    """Prints a job's events from a cursor on, from a background task.

    Durable events come from ``observe``; any durable event of the job the live stream skipped
    is read back from the store before a later one is printed, and ``sync`` prints everything
    committed so far — so the output holds every durable event exactly once, in order."""

    def __init__(self, runtime: Runtime, job_id: str, *, after: int, printer: EventPrinter) -> None:
        self._runtime = runtime
        self._job_id = job_id
        self.printed_seq = after
        self.printer = printer
        self._lock = asyncio.Lock()
        self._events = runtime.observe(job_id=job_id, after=after)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._pump(), name="agent-tui-cli-observer")

    async def _pump(self) -> None:
        async for event in self._events:
            if not is_durable(event):
                self.printer.handle(event)
                continue
            seq: int = getattr(event, "seq", 0)
            async with self._lock:
                if seq > self.printed_seq + 1:
                    await self._fill(upto=seq - 1)
                if seq > self.printed_seq:
                    self.printer.handle(event)
                    self.printed_seq = seq

    async def sync(self) -> None:
        """Print every durable event of the job committed so far that is not printed yet."""
        async with self._lock:
            await self._fill(upto=None)

    async def _fill(self, *, upto: int | None) -> None:
        while True:
            stored = await self._runtime.events(
                after=self.printed_seq, limit=500, job_id=self._job_id
            )
            for event in stored:
                if upto is not None and event.seq > upto:
                    return
                self.printer.handle(event)
                self.printed_seq = event.seq
            if len(stored) < 500:
                return

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        with contextlib.suppress(Exception):
            if isinstance(self._events, AsyncGenerator):  # observe is an async generator
                await self._events.aclose()


def boundary_line(boundary: Boundary) -> dict[str, Any]:
    data: dict[str, Any] = {
        "kind": "boundary",
        "run_id": boundary.run.id,
        "state": boundary.state.value,
    }
    if boundary.request is not None:
        data["request"] = boundary.request.model_dump(mode="json", by_alias=True)
    if boundary.run.failure is not None:
        data["failure"] = boundary.run.failure.model_dump(mode="json")
    return data


class _Gone(Exception):
    """The request being asked here was answered or cancelled elsewhere."""


async def _answer_unless_gone(runtime: Runtime, prompter: Prompter, request: InputRequest) -> Any:
    """The person's answer, unless the request is answered (another shell, an agent-tui) or
    cancelled first: then ``_Gone``, the question left unanswered here. A new-user trial's
    ``respond`` kept waiting at its next prompt after the TUI answered it, and refused the
    answer typed then."""
    asking = asyncio.ensure_future(prompter.answer(request))
    watching = asyncio.ensure_future(runtime.wait_answered(request.id))
    try:
        await asyncio.wait({asking, watching}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (asking, watching):
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
    if asking.done() and not asking.cancelled():
        return asking.result()
    prompter.end_line()  # the prompt's line, left half written
    went = watching.result()
    raise _Gone(f"that request was {went.state.value} elsewhere")


EXIT_BY_STATE = {
    RunState.COMPLETED: EXIT_OK,
    RunState.FAILED: EXIT_FAILED,
    RunState.CANCELLED: EXIT_CANCELLED,
    RunState.INPUT_REQUIRED: EXIT_INPUT_REQUIRED,
}


async def _stay_for(runtime: Runtime, request: InputRequest, printer: EventPrinter) -> bool:
    """What this process does before it leaves a run at ``request`` with nobody to answer.
    True when it waited for the answer instead: the MCP server session that asked lives in
    this process, and exiting would end it. Else calls running beside the request end first:
    leaving would cut them short (their outcome unknown)."""
    if runtime.holds_session(request):
        printer.note(
            "agent-tui: the MCP server's session lives in this process; waiting for "
            "that answer (Ctrl+C to stop)"
        )
        await runtime.wait_answered(request.id)
        return True
    await runtime.calls_ended(request.run_id)
    return False


async def drive(
    runtime: Runtime,
    run_id: str,
    observer: Observer,
    prompter: Prompter | None,
    *,
    on_prompt: Callable[[InputRequest | None], None] | None = None,
) -> int:
    """Follow ``run_id`` to a terminal state, answering requests through ``prompter`` when there
    is one; return the exit code."""
    observer.printer.prompter = prompter
    while True:
        boundary = await runtime.wait(run_id)
        await observer.sync()
        printer = observer.printer
        request = boundary.request
        if boundary.state is RunState.INPUT_REQUIRED and request is not None:
            # An approval of a file write with its diff as of now (the file may have changed
            # since the agent asked: ``Runtime.current_request``).
            request = await runtime.current_request(request)
            printer.end_line()
            described = False
            if prompter is not None:
                if on_prompt is not None:
                    on_prompt(request)
                try:
                    value = await _answer_unless_gone(runtime, prompter, request)
                except GaveUp:
                    prompter = None
                    described = True
                except _Gone as gone:
                    if on_prompt is not None:
                        on_prompt(None)
                    printer.note(f"agent-tui: {gone}; going on with the run.")
                    continue
                else:
                    if on_prompt is not None:
                        on_prompt(None)
                    try:
                        await runtime.respond(request.run_id, request.id, value)
                    except InvalidResponse as exc:
                        printer.note(f"agent-tui: {exc.message}")
                    except AlreadyAnswered:
                        printer.note("agent-tui: that request was already answered elsewhere.")
                    continue
            if not described:
                for line in describe_request(request):
                    printer.note(line)
            for line in how_to_answer(request.run_id, request):
                printer.note(line)
            if await _stay_for(runtime, request, printer):
                continue
        elif boundary.state is RunState.FAILED:
            failure = boundary.run.failure
            why = f"{failure.code}: {failure.message}" if failure else "unknown reason"
            printer.note(f"agent-tui: run {boundary.run.id} failed — {why}")
            printer.note(f"  to try again: {render.COMMAND} retry {boundary.run.id}")
        elif boundary.state is RunState.CANCELLED:
            reason = boundary.run.cancel_reason
            printer.note(
                f"agent-tui: run {boundary.run.id} was cancelled"
                + (f" ({reason})" if reason else "")
            )
        elif not boundary.state.is_terminal:
            from runtime.interrupted import state_as_seen

            printer.note(
                f"agent-tui: run {boundary.run.id} is {state_as_seen(boundary.run)} and nobody"
                f" here runs it; resume it with: {render.COMMAND} retry {boundary.run.id}"
            )
        printer.end_line()
        if printer.json_mode:
            printer.json_line(boundary_line(boundary))
        return EXIT_BY_STATE.get(boundary.state, EXIT_FAILED)
