"""The stdio transport: an MCP server as a subprocess speaking newline-delimited JSON-RPC.

Like the SDK's ``stdio_client``, but it keeps what error messages need: the process (its pid and
exit code) and the last lines of its stderr, captured into a bounded buffer instead of our
terminal. Shutdown follows the spec (close stdin, wait, then terminate the process group), is
shielded from cancellation and bounded at every step, so no server is left running or unreaped.

The server runs under ``runtime.supervisor``, so it dies with agent-tui (even by ``kill -9``)
with every process it started, though it may not stop at the end of its input. The supervisor
needs a ``preexec_fn``, which ``anyio.open_process`` does not take: the process is asyncio's.
"""

from __future__ import annotations

import asyncio
import codecs
import errno
import logging
import os
import signal
import subprocess
import sys
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import mcp_types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

from runtime.supervisor import parent_death_signal, supervised_command

logger = logging.getLogger(__name__)

STDERR_LINES = 40
"""How many of the last stderr lines a server keeps for error messages."""
STDERR_LINE_CHARS = 400

_EXIT_GRACE = 2.0
"""Seconds a server gets to exit after its stdin closes, and again after SIGTERM."""
_EXIT_AFTER_EOF = 1.0
"""Seconds to wait for the exit code once the server closed its stdout."""
_READ_CHUNK = 65536


Streams = tuple[
    MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]
]
"""The session's (read, write) streams: what ``mcp``'s own stdio client yields, spelled with
anyio's public types (the SDK's alias for it lives in a private module)."""


@dataclass
class ProcessState:
    """What we know of one server process, readable while and after it runs."""

    pid: int | None = None
    """The supervisor's pid (``runtime.supervisor``), which is the process group's id; the
    server is its child."""
    returncode: int | None = None
    stderr_tail: deque[str] = field(default_factory=lambda: deque(maxlen=STDERR_LINES))
    stdout_noise: deque[str] = field(default_factory=lambda: deque(maxlen=3))
    """The last lines of stdout that were not MCP messages (a banner, a log line): the reason
    a server that never answers did not, more often than not."""
    stdout_closed: bool = False
    process: asyncio.subprocess.Process | None = None
    requests_written: int = 0
    """How many requests reached the server's stdin (a write that failed is not counted)."""
    write_failed: bool = False
    """Whether a write to the server's stdin failed (the server is gone or stopped reading)."""

    @property
    def alive(self) -> bool:
        if self.process is not None and self.process.returncode is not None:
            self.returncode = self.process.returncode
        if self.pid is None or self.returncode is not None or self.stdout_closed:
            return False
        if self.write_failed:
            return False
        # The event loop learns of a child's exit some time after the kernel: a server that died
        # while idle must not look alive to the next call (the request would go to a dead pipe).
        # The supervisor outlives the server by as long as it takes to notice.
        return not _child_exited(self.pid) and _supervised_running(self.pid)

    def stderr_summary(self, lines: int = 5) -> str:
        tail = [line for line in self.stderr_tail if line.strip()][-lines:]
        return " | ".join(tail)

    def noise_summary(self) -> str:
        """What the server wrote on stdout that was not MCP, for a message ('' if nothing)."""
        if not self.stdout_noise:
            return ""
        lines = " | ".join(self.stdout_noise)
        return (
            f"it wrote this on stdout, which is not MCP (JSON-RPC): {lines!r}"
            " (logs belong on stderr)"
        )

    def exit_detail(self) -> str:
        """``code 3; stderr: …`` / ``killed by SIGKILL`` — how the process ended, for messages."""
        if self.returncode is None:
            text = "still running"
        elif self.returncode < 0:
            try:
                name = signal.Signals(-self.returncode).name
            except ValueError:
                name = f"signal {-self.returncode}"
            text = f"killed by {name}"
        else:
            text = f"code {self.returncode}"
        stderr = self.stderr_summary()
        return f"{text}; stderr: {stderr}" if stderr else text

    def describe_exit(self) -> str:
        """``exited with code 3; stderr: …`` (or ``closed its output`` if it still runs)."""
        detail = self.exit_detail()
        if self.returncode is None:
            return "closed its output" + detail.removeprefix("still running")
        if self.returncode < 0:
            return f"was {detail}"
        return f"exited with {detail}"


def _child_exited(pid: int) -> bool:
    """Whether our child ``pid`` has exited (a zombie, or already reaped), without reaping it."""
    if sys.platform == "win32":  # pragma: no cover
        return False
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True  # reaped already (by the event loop's child watcher)
    except OSError:  # pragma: no cover - an unexpected errno: trust the event loop
        return False
    return info is not None


def _supervised_running(supervisor: int) -> bool:
    """Whether the supervisor's child, the server, runs (not a zombie); True where ``/proc``
    cannot tell (then the supervisor's own exit tells, a moment later)."""
    try:
        with open(f"/proc/{supervisor}/task/{supervisor}/children", "rb") as handle:
            children = handle.read().split()
    except OSError:
        return True
    for child in children:
        try:
            with open(f"/proc/{int(child)}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue  # reaped meanwhile
        if stat[stat.rfind(b")") + 2 :].split()[:1] != [b"Z"]:
            return True
    return False


def _poll_returncode(process: asyncio.subprocess.Process, state: ProcessState) -> int | None:
    code = process.returncode
    if code is not None:
        state.returncode = code
    return code


async def _wait_exit(
    process: asyncio.subprocess.Process, state: ProcessState, timeout: float
) -> bool:
    # Polls returncode rather than process.wait(): on asyncio that also waits for pipe EOF, and a
    # grandchild holding the pipes would make an exited server look alive.
    with anyio.move_on_after(timeout):
        while _poll_returncode(process, state) is None:
            await anyio.sleep(0.01)
        return True
    return False


def _signal_group(process: asyncio.subprocess.Process, sig: signal.Signals) -> None:
    with suppress(ProcessLookupError, PermissionError):
        if sys.platform == "win32":  # pragma: no cover
            process.kill()
        else:
            os.killpg(process.pid, sig)


async def _stop_process(process: asyncio.subprocess.Process, state: ProcessState) -> None:
    if process.stdin is not None:
        process.stdin.close()
        await asyncio.sleep(0)
    if not await _wait_exit(process, state, _EXIT_GRACE):
        _signal_group(process, signal.SIGTERM)
        if not await _wait_exit(process, state, _EXIT_GRACE):
            _signal_group(process, signal.SIGKILL)
            if not await _wait_exit(process, state, _EXIT_GRACE):
                logger.warning("MCP server process %s survived SIGKILL; abandoning it", process.pid)
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            # Ends a reader still waiting: a process the server started may hold the pipe.
            stream.set_exception(ConnectionAbortedError("the server's output was closed"))


def _decoder() -> codecs.IncrementalDecoder:
    """UTF-8, bad bytes replaced, a character split between two reads kept whole."""
    return codecs.getincrementaldecoder("utf-8")(errors="replace")


def _parse_message(line: str) -> SessionMessage | Exception:
    """One line of the server's stdout as a message, or the error that says why it is not one."""
    try:
        return SessionMessage(mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:
        return exc


async def _read_stdout(
    process: asyncio.subprocess.Process,
    state: ProcessState,
    read_writer: MemoryObjectSendStream[SessionMessage | Exception],
) -> None:
    assert process.stdout is not None
    decoder = _decoder()
    async with read_writer:
        buffer = ""
        with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            while chunk := await process.stdout.read(_READ_CHUNK):
                lines = (buffer + decoder.decode(chunk)).split("\n")
                buffer = lines.pop()
                for line in lines:
                    if not line.strip():
                        continue
                    message = _parse_message(line)
                    if isinstance(message, Exception):
                        state.stdout_noise.append(line.strip()[:STDERR_LINE_CHARS])
                    await read_writer.send(message)
        state.stdout_closed = True
        # Learn the exit code before the session reports the closed connection, so the
        # error can say how the server ended.
        with anyio.CancelScope(shield=True):
            await _wait_exit(process, state, _EXIT_AFTER_EOF)


async def _read_stderr(process: asyncio.subprocess.Process, state: ProcessState) -> None:
    assert process.stderr is not None
    decoder = _decoder()
    buffer = ""
    with suppress(OSError):
        while chunk := await process.stderr.read(_READ_CHUNK):
            lines = (buffer + decoder.decode(chunk)).split("\n")
            buffer = lines.pop()[-STDERR_LINE_CHARS:]
            state.stderr_tail.extend(line[:STDERR_LINE_CHARS] for line in lines)
    if buffer:
        state.stderr_tail.append(buffer)


async def _write_stdin(
    process: asyncio.subprocess.Process,
    state: ProcessState,
    write_reader: MemoryObjectReceiveStream[SessionMessage],
    read_writer: MemoryObjectSendStream[SessionMessage | Exception],
) -> None:
    assert process.stdin is not None
    try:
        async with write_reader:
            async for session_message in write_reader:
                text = session_message.message.model_dump_json(by_alias=True, exclude_unset=True)
                process.stdin.write((text + "\n").encode())
                await process.stdin.drain()
                if isinstance(session_message.message, mcp_types.JSONRPCRequest):
                    state.requests_written += 1
    except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
        # The server stopped reading: end the session's read side so no request waits forever.
        state.write_failed = True
        await read_writer.aclose()


def _check_command(command: str, *, env: dict[str, str], cwd: Path) -> None:
    """Raise ``FileNotFoundError`` / ``PermissionError`` where running ``command`` itself would:
    under the supervisor a missing command only makes the shell say "not found" and exit 127.
    The search is ``subprocess``'s (and the shell's): ``PATH`` from ``env``, a path with a slash
    as it is, both from ``cwd``."""
    if os.sep in command:
        candidates = [cwd / command]
    else:
        candidates = [cwd / folder / command for folder in os.get_exec_path(env)]
    existing = [path for path in candidates if path.exists()]
    if any(path.is_file() and os.access(path, os.X_OK) for path in existing):
        return
    if existing:
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), command)
    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), command)


@asynccontextmanager
async def stdio_transport(
    command: str,
    args: list[str],
    *,
    env: dict[str, str],
    cwd: Path,
    state: ProcessState,
) -> AsyncIterator[Streams]:
    """Spawn ``command`` and yield the session's (read, write) streams.

    Raises ``FileNotFoundError`` / ``PermissionError`` when the command cannot be started.
    """
    environment = get_default_environment() | env
    _check_command(command, env=environment, cwd=cwd)
    process = await asyncio.create_subprocess_exec(
        *supervised_command([command, *args], name="agent-tui-mcp"),
        env=environment,
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=parent_death_signal(),
    )
    state.pid = process.pid
    state.process = process
    # No await between the spawn and the task group: a cancellation there would leak the process.
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)

    async with anyio.create_task_group() as tg:
        tg.start_soon(_read_stdout, process, state, read_writer)
        tg.start_soon(_read_stderr, process, state)
        tg.start_soon(_write_stdin, process, state, write_reader, read_writer)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):
                write_stream.close()
                read_stream.close()
                await _stop_process(process, state)
            tg.cancel_scope.cancel()
