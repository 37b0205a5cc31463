"""The ``shell`` tool: one command in the workspace, its output streamed as progress.

On Linux with bubblewrap the command runs confined (``runtime.tools.sandbox``): the workspace
read-write, the rest read-only, credentials in ``$HOME`` hidden, no network unless allowed, and
its own pid namespace, so nothing it started outlives it or agent-tui. Without a sandbox it runs
as before, unconfined, and a small ``/bin/sh`` supervisor kills its whole process group when
agent-tui dies (``runtime.supervisor``).

Either way the command runs in a session (and process group) of its own, so that a timeout or a
cancel can stop it together with every child it started: SIGTERM to the group, a short grace,
then SIGKILL, and the tool returns (or re-raises) only once no process of the group is left
running.
"""

from __future__ import annotations

import asyncio
import collections
import fcntl
import json
import logging
import os
import signal
from pathlib import Path
from typing import Any

from pydantic import Field

from runtime.errors import ToolError
from runtime.supervisor import (
    group_alive,
    parent_death_signal,
    supervised_command,
    supervised_shell,
)
from runtime.tools.arguments import ToolArguments
from runtime.tools.base import ApprovalDefault, ToolContext, ToolOutput
from runtime.tools.builtin import _BuiltinTool, _clip_line
from runtime.tools.sandbox import bwrap_arguments, sandbox_status

__all__ = ["DEFAULT_TIMEOUT", "MAX_TIMEOUT", "ShellTool"]

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 120.0
MAX_TIMEOUT = 600.0
TERM_GRACE = 0.5
"""Seconds the processes get to exit after SIGTERM before SIGKILL."""
KILL_WAIT = 5.0
"""Seconds to wait for the processes to disappear after SIGKILL (they always do, promptly)."""
PIPE_GRACE = 0.5
"""After the shell exits, how long background children may keep its output open."""
HEAD_CHARS = 15_000
TAIL_CHARS = 15_000
"""The output kept for the model: its beginning and its end, the middle elided."""
PROGRESS_LINE_CHARS = 500
READ_CHUNK = 64 * 1024
POLL_INTERVAL = 0.01
OUTPUT_POLL_INTERVAL = 0.05

_SECRET_ENVIRONMENT = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY")
"""The runtime's own model keys are not handed to commands the model runs: a command printing
its environment would otherwise copy them into the transcript."""


class _Output:
    """Keeps the first HEAD_CHARS and the last TAIL_CHARS characters of the output, by line."""

    def __init__(self) -> None:
        self.head: list[str] = []
        self.head_chars = 0
        self.tail: collections.deque[str] = collections.deque()
        self.tail_chars = 0
        self.omitted_lines = 0
        self.omitted_chars = 0
        self.lines = 0

    def add(self, line: str) -> None:
        self.lines += 1
        if self.head_chars < HEAD_CHARS and not self.tail:
            self.head.append(line)
            self.head_chars += len(line) + 1
            return
        self.tail.append(line)
        self.tail_chars += len(line) + 1
        while self.tail_chars > TAIL_CHARS and len(self.tail) > 1:
            dropped = self.tail.popleft()
            self.tail_chars -= len(dropped) + 1
            self.omitted_lines += 1
            self.omitted_chars += len(dropped) + 1

    def text(self) -> str:
        parts = list(self.head)
        if self.omitted_lines:
            parts.append(
                f"… [{self.omitted_lines:,} lines ({self.omitted_chars:,} characters) omitted] …"
            )
        parts.extend(self.tail)
        return "\n".join(clip for clip in (_clip_line(p, HEAD_CHARS) for p in parts))

    @property
    def truncated(self) -> bool:
        return self.omitted_lines > 0


async def _pump(stream: asyncio.StreamReader, output: _Output, ctx: ToolContext) -> None:
    """Read the command's output until EOF: each line goes to ``output`` and to progress."""
    pending = b""

    def emit(raw: bytes) -> None:
        text = raw.decode("utf-8", errors="replace").rstrip("\r")
        # Progress bars rewrite their line with '\r': keep what a terminal would show.
        text = text.rsplit("\r", 1)[-1]
        output.add(text)
        ctx.progress(output.lines, None, _clip_line(text, PROGRESS_LINE_CHARS))

    while True:
        chunk = await stream.read(READ_CHUNK)
        if not chunk:
            break
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for raw in lines:
            emit(raw)
        if len(pending) > READ_CHUNK:
            emit(pending)
            pending = b""
    if pending:
        emit(pending)


def _signal_group(pgid: int, signum: signal.Signals) -> None:
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass


async def _wait_gone(process: asyncio.subprocess.Process, pgid: int, seconds: float) -> bool:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while True:
        if process.returncode is not None and not group_alive(pgid):
            return True
        if loop.time() >= deadline:
            return False
        await asyncio.sleep(POLL_INTERVAL)


async def _wait_gone_regardless(
    process: asyncio.subprocess.Process, pgid: int, seconds: float
) -> bool:
    """``_wait_gone`` that a further cancel does not cut short; returns whether it was
    cancelled meanwhile (the caller re-raises once the processes are gone)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    cancelled = False
    while True:
        try:
            if await _wait_gone(process, pgid, max(deadline - loop.time(), 0.0)):
                return cancelled
            logger.warning("shell: process group %d still has processes after SIGKILL", pgid)
            return cancelled
        except asyncio.CancelledError:
            cancelled = True
            _signal_group(pgid, signal.SIGKILL)


async def _stop_group(process: asyncio.subprocess.Process, pgid: int) -> None:
    """SIGTERM the group, then SIGKILL what is left; return once nothing of it runs.

    A second cancel while stopping (the engine cancels a run's tasks more than once) skips the
    grace but still waits, bounded, until every process is gone before it is re-raised: a
    killed process on a loaded machine stays runnable until it is scheduled to die, and the
    caller must not report "stopped" while it is still there."""
    cancelled = False
    try:
        _signal_group(pgid, signal.SIGTERM)
        if await _wait_gone(process, pgid, TERM_GRACE):
            return
    except asyncio.CancelledError:
        cancelled = True
    _signal_group(pgid, signal.SIGKILL)
    if await _wait_gone_regardless(process, pgid, KILL_WAIT) or cancelled:
        raise asyncio.CancelledError


def _read_namespace(fd: int) -> int | None:
    """The pid namespace bwrap reports on its info fd (read until it is a whole JSON object,
    then closed), or None if bwrap ended before it wrote one. Not to the pipe's end: the
    supervisor between agent-tui and bwrap keeps its copy of the pipe open while it waits."""
    data = b""
    try:
        while chunk := os.read(fd, 4096):
            data += chunk
            try:
                info = json.loads(data)
            except ValueError:
                continue  # not all of it yet
            found = info.get("pid-namespace") if isinstance(info, dict) else None
            return found if isinstance(found, int) else None
    finally:
        os.close(fd)
    return None


def _namespace_alive(namespace: int) -> bool:
    """Whether a process of the pid namespace ``namespace`` is still running (not a zombie):
    whatever its process group or session (``setsid`` leaves the group, not the namespace)."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            if os.stat(f"/proc/{entry.name}/ns/pid").st_ino != namespace:
                continue
            with open(f"/proc/{entry.name}/stat", "rb") as handle:
                data = handle.read()
        except OSError:
            continue
        if data[data.rfind(b")") + 2 :].split()[:1] != [b"Z"]:
            return True
    return False


async def _namespace_gone(namespace: asyncio.Future[int | None]) -> None:
    """After a sandboxed command, whether it ended or was stopped: bwrap has exited, and with
    it the pid namespace's init, so the kernel kills whatever the command left behind, in any
    process group. Killed is not yet gone (on a loaded machine a killed process waits to be
    scheduled to die): wait, bounded and whatever cancels meanwhile, until none is left, so the
    call never returns while one of them still runs."""
    cancelled = False
    loop = asyncio.get_running_loop()
    deadline = loop.time() + KILL_WAIT
    while True:
        try:
            found = await asyncio.shield(namespace)
            while found is not None and _namespace_alive(found):
                if loop.time() >= deadline:
                    logger.warning("shell: sandbox namespace %d still has processes", found)
                    break
                await asyncio.sleep(POLL_INTERVAL)
            break
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError


async def _finish_pump(pump: asyncio.Task[None], seconds: float) -> None:
    """Let the reader drain what is left; a pipe held open by an escaped process is let go."""
    try:
        async with asyncio.timeout(seconds):
            await asyncio.shield(pump)
    except TimeoutError:
        pump.cancel()
        try:
            await pump
        except asyncio.CancelledError:
            pass


async def _wait_output(
    process: asyncio.subprocess.Process, pgid: int, pump: asyncio.Task[None]
) -> bool:
    """Wait until the output ends. If the shell has exited but background children keep the
    output open past PIPE_GRACE, stop them; returns whether that happened. (asyncio's
    ``Process.wait`` itself waits for the pipes to close, so it cannot tell these apart.)"""
    loop = asyncio.get_running_loop()
    exited_at: float | None = None
    while not pump.done():
        await asyncio.wait({pump}, timeout=OUTPUT_POLL_INTERVAL)
        if pump.done() or process.returncode is None:
            continue
        if exited_at is None:
            exited_at = loop.time()
        elif loop.time() - exited_at >= PIPE_GRACE:
            await _stop_group(process, pgid)
            await _finish_pump(pump, 1.0)
            return True
    return False


def _working_folder(workspace: Path) -> Path:
    folder = Path(os.path.realpath(workspace))
    if not folder.is_dir():
        raise ToolError(f"the workspace {workspace} is not a folder")
    return folder


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"killed by {name}"
    return f"exit code {code}"


class ShellArguments(ToolArguments):
    command: str = Field(
        min_length=1, description="The command line, run by /bin/sh -c in the workspace folder."
    )
    timeout: float = Field(
        DEFAULT_TIMEOUT,
        gt=0,
        le=MAX_TIMEOUT,
        description=f"Seconds before the command is stopped. Default: {DEFAULT_TIMEOUT:g}.",
    )


class ShellTool(_BuiltinTool):
    name = "shell"
    description = (
        "Run a shell command (/bin/sh) in the workspace folder and return its exit code and "
        "combined stdout and stderr. Standard input is empty: the command cannot prompt. "
        f"It is stopped after `timeout` seconds (default {DEFAULT_TIMEOUT:g}, at most "
        f"{MAX_TIMEOUT:g}). Long output keeps its beginning and end. Where a sandbox is "
        "available, only the workspace (and a private /tmp) is writable, the network is off "
        "unless the person allowed it, and every process the command starts, background ones "
        "included, is stopped when it ends. Without a sandbox, background processes that keep "
        "the output open are stopped when the command ends."
    )
    ARGUMENTS = ShellArguments
    read_only = False
    approval_default: ApprovalDefault = "ask"

    def __init__(self, *, sandbox: bool | None = None) -> None:
        """``sandbox``: None (default) confines commands when bubblewrap works here; False
        never does; True insists (a call fails when there is no sandbox)."""
        super().__init__()
        self.sandbox = sandbox

    def _sandbox_program(self) -> str | None:
        if self.sandbox is False:
            return None
        status = sandbox_status()
        if status.available:
            return status.program
        if self.sandbox:
            raise ToolError(f"the shell sandbox is not available: {status.detail}")
        return None

    def approval_detail(self, arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        return {"command": arguments.get("command", ""), "cwd": str(ctx.workspace)}

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        command = arguments.get("command")
        if not isinstance(command, str) or not command.strip():
            raise ToolError("command is empty")
        raw_timeout = arguments.get("timeout", DEFAULT_TIMEOUT)
        timeout = (
            float(raw_timeout)
            if isinstance(raw_timeout, int | float) and not isinstance(raw_timeout, bool)
            else DEFAULT_TIMEOUT
        )
        timeout = min(max(timeout, 0.001), MAX_TIMEOUT)
        cwd = _working_folder(ctx.workspace)
        env = {k: v for k, v in os.environ.items() if k not in _SECRET_ENVIRONMENT}
        env.setdefault("PAGER", "cat")
        env.setdefault("GIT_PAGER", "cat")
        program = self._sandbox_program()
        info: tuple[int, int] | None = None  # bwrap reports its namespaces on this pipe
        if program is not None:
            home = env.get("HOME")
            read_end, write_end = os.pipe()
            # Above the supervisor's fd 3 (its way of handing standard input on): a pipe passed
            # on keeps its number, and bwrap would find /dev/null there.
            info = (read_end, fcntl.fcntl(write_end, fcntl.F_DUPFD_CLOEXEC, 10))
            os.close(write_end)
            argv = bwrap_arguments(
                program,
                command,
                workspace=cwd,
                home=Path(home) if home else None,
                network=ctx.shell_network,
                info_fd=info[1],
            )
            # Under the supervisor too: bwrap's own --die-with-parent is armed in the sandbox
            # only once its setup is done, and a kill -9 of agent-tui in those first
            # milliseconds left the command running. The supervisor is armed before bwrap
            # starts and kills its whole process group, the sandbox's init included.
            argv = supervised_command(argv, name="agent-tui-sandbox", signals=False)
        else:
            argv = supervised_shell(command, name="agent-tui-shell")
        try:
            process = await asyncio.create_subprocess_exec(
                *argv,
                cwd=cwd,
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=parent_death_signal(),
                pass_fds=(info[1],) if info is not None else (),
            )
        except OSError as exc:
            if info is not None:
                os.close(info[0])
            raise ToolError(f"cannot start the command: {exc.strerror or exc}") from None
        finally:
            if info is not None:
                os.close(info[1])
        namespace = (
            asyncio.ensure_future(asyncio.to_thread(_read_namespace, info[0]))
            if info is not None
            else None
        )
        try:
            return await self._supervise(process, ctx, timeout)
        finally:
            if namespace is not None:
                await _namespace_gone(namespace)

    async def _supervise(
        self, process: asyncio.subprocess.Process, ctx: ToolContext, timeout: float
    ) -> ToolOutput:
        """Stream the command's output until it ends, times out or is cancelled; stop its
        process group on the way out of the last two."""
        pgid = process.pid  # a new session: bwrap or the shell leads its own process group
        assert process.stdout is not None
        output = _Output()
        pump = asyncio.create_task(_pump(process.stdout, output, ctx))
        try:
            async with asyncio.timeout(timeout):
                stray_stopped = await _wait_output(process, pgid, pump)
                code = await process.wait()
        except TimeoutError:
            await _stop_group(process, pgid)
            await _finish_pump(pump, 1.0)
            so_far = output.text()
            raise ToolError(
                f"the command timed out after {timeout:g} s and was stopped with its child "
                "processes" + (f"; output so far:\n{so_far}" if so_far else " (no output)")
            ) from None
        except BaseException:
            # Cancelled (or failed): stop the processes before letting the error through.
            try:
                await _stop_group(process, pgid)
            finally:
                pump.cancel()
            raise
        pump.result()  # re-raise a reader failure, if any
        text = output.text()
        lines = [text if text else "(no output)"]
        if stray_stopped:
            lines.append(
                "[background processes that kept the output open were stopped; redirect their "
                "output to a file (cmd > log 2>&1 &) to keep them running]"
            )
        lines.append(_describe_exit(code))
        return ToolOutput(
            content="\n".join(lines),
            is_error=code != 0,
            structured={"exit_code": code, "truncated": output.truncated, "lines": output.lines},
        )
