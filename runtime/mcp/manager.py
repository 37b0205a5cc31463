"""MCP servers as tools (DESIGN §9): start on first use, stay up, restart after a crash or hang.

Each server lives in a ``_Connection`` whose SDK objects (transport, ``mcp.Client``, their anyio
task groups and cancel scopes) are entered and exited by one dedicated asyncio task: anyio
requires a cancel scope to be left in the task that entered it, so callers never enter or exit
anything themselves — they only send requests over the live session and tell the owning task
when to stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit, urlunsplit

import anyio
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ValidationError

from runtime.clock import Clock, SystemClock
from runtime.config import STARTUP_TIMEOUT, HttpServerConfig, SseServerConfig, StdioServerConfig
from runtime.errors import ToolError, ToolOutcomeUnknown
from runtime.mcp._content import render
from runtime.mcp._stdio import ProcessState, stdio_transport
from runtime.mcp.names import tool_name
from runtime.models import InputKind
from runtime.store.base import NewInputRequest
from runtime.tools.base import ApprovalDefault, ToolContext, ToolOutput

if TYPE_CHECKING:
    from runtime.tools.base import Tool

logger = logging.getLogger(__name__)

_CLIENT_INFO = types.Implementation(name="agent-tui", version="0.1.0")
_STOP_GRACE = 10.0
"""Seconds a server's task gets to shut its server down before it is cancelled."""
RETRY_FAILED_AFTER = 5.0
"""Seconds after a failed start before the next use tries the server again, in the background
(a changed configuration is tried at once): short, so a server fixed in place is soon used.
Doubled after each failure in a row, up to ``RETRY_FAILED_AT_MOST``: a server that hangs at
start-up does not start a process every few seconds."""
RETRY_FAILED_AT_MOST = 120.0


@dataclass(frozen=True)
class InMemoryServer:
    """A server object run inside this process (an ``mcp`` ``MCPServer`` or low-level
    ``Server``): for tests and for embedding servers written in Python."""

    server: Any
    timeout: float = 60.0
    startup_timeout: float = STARTUP_TIMEOUT
    type: Literal["memory"] = "memory"


ServerConfig = StdioServerConfig | HttpServerConfig | SseServerConfig | InMemoryServer


class ServerReport(BaseModel):
    """One server's line in ``agent-tui doctor``."""

    name: str
    transport: Literal["stdio", "http", "sse", "memory"]
    ok: bool
    error: str | None = None
    tools: list[str] = []
    unsupported: list[str] = []
    """Tools left out because agent-tui cannot call them (they require MCP tasks)."""


@dataclass(frozen=True)
class McpNotice:
    """Something about a server a person should see (a ``runtime.events.Notice`` in a run):
    a server that could not start, or a server's log message of level warning or above."""

    server: str
    level: Literal["info", "warning", "error"]
    text: str


_LOG_LEVELS: dict[str, int] = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}
_NOTICE_CHARS = 500


class _NotDelivered(Exception):
    """A call's request never reached its server: it is safe to send it again."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _StartFailed(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _safe_url(url: str) -> str:
    """The URL without credentials (userinfo) or query string, for messages."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<invalid url>"
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


@dataclass(frozen=True)
class _HttpError:
    status: int
    session_lost: bool
    """The server does not know our session (404, or a 400 that says so): start a new one."""

    def describe(self) -> str:
        try:
            phrase = HTTPStatus(self.status).phrase
        except ValueError:
            phrase = "error"
        text = f"{self.status} {phrase}"
        if self.status in (401, 403):
            text += ": set headers or OAuth"
        return text


@dataclass(eq=False)
class _Call:
    """One tool call in flight on a server.

    Its clock stops while a question from the server waits for a person (every call of that
    server, since stdio cannot say which call asked). A call that hosts such a question (the
    input request is attached to it) keeps its result until the question is settled, so the
    answer is accepted for as long as the server session lives.
    """

    ctx: ToolContext
    tool: str
    timeout: float
    deadline: asyncio.Timeout | None = None
    paused: int = 0
    finished: bool = False
    """The call's timeout context has been left: its deadline must not be touched any more."""
    hosting: int = 0
    settled: asyncio.Event = field(default_factory=asyncio.Event)
    http_error: _HttpError | None = None
    """The HTTP error status this call's request got (streamable HTTP), if any."""

    def __post_init__(self) -> None:
        self.settled.set()

    def pause(self) -> None:
        """Stop the clock while a person answers a question from the server."""
        self.paused += 1
        if self.deadline is not None and not self.finished and not self.deadline.expired():
            self.deadline.reschedule(None)

    def resume(self) -> None:
        self.paused -= 1
        if self.paused > 0 or self.deadline is None or self.finished:
            return
        if not self.deadline.expired():
            self.deadline.reschedule(asyncio.get_running_loop().time() + self.timeout)

    def host(self) -> None:
        self.hosting += 1
        self.settled.clear()

    def unhost(self) -> None:
        self.hosting -= 1
        if self.hosting == 0:
            self.settled.set()


_CURRENT_CALL: contextvars.ContextVar[_Call | None] = contextvars.ContextVar(
    "agent_tui_mcp_call", default=None
)
"""The call whose request is being sent. The SDK runs a server-to-client request in the context
of the task that received it; over streamable HTTP that is the task reading the POST response of
the call the server's request relates to, so the elicitation names the exact call."""


def _elicit_result(answer: Any) -> types.ElicitResult:
    """An answer in the shape of ``runtime.answers`` as the SDK's ``ElicitResult``."""
    if isinstance(answer, Mapping):
        action = answer.get("action")
        if action == "accept":
            try:
                return types.ElicitResult(
                    action="accept", content=dict(answer.get("content") or {})
                )
            except ValidationError:
                logger.warning("elicitation answer does not fit the protocol; cancelling")
                return types.ElicitResult(action="cancel")
        if action in ("decline", "cancel"):
            return types.ElicitResult(action=action)
    logger.warning("unexpected elicitation answer shape; cancelling")
    return types.ElicitResult(action="cancel")


class _Connection:
    """One running (or starting) server and the task that owns its SDK objects."""

    def __init__(
        self,
        name: str,
        config: ServerConfig,
        workspace: Path,
        notify: Callable[[McpNotice], None] | None = None,
        on_authorize_url: Callable[[str, str], None] | None = None,
        token_path: Path | None = None,
    ) -> None:
        self.name = name
        self._notify = notify
        self._on_authorize_url = on_authorize_url
        self._token_path = token_path
        self.config = config
        self.workspace = workspace
        self.process = ProcessState()
        self.client: Client | None = None
        self.tools: list[types.Tool] = []
        self.in_flight: list[_Call] = []
        self.http_error: _HttpError | None = None
        """The last HTTP error status the server answered with (streamable HTTP)."""
        self.closed_reason: str | None = None
        """Why the connection ended, when we ended it (or its task failed)."""
        self.started_at = time.monotonic()
        self._ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._stop = asyncio.Event()
        self._handshake_cancelled = False
        self._task = asyncio.create_task(self._main(), name=f"mcp-server:{name}")
        self._task.add_done_callback(_consume_outcome)

    # -- lifecycle (all of it runs in self._task) -------------------------------------------

    def _transport(self) -> Any:
        config = self.config
        if isinstance(config, InMemoryServer):
            return config.server
        if isinstance(config, StdioServerConfig):
            cwd = self.workspace if config.cwd is None else (self.workspace / config.cwd)
            return stdio_transport(
                config.command, list(config.args), env=dict(config.env), cwd=cwd, state=self.process
            )
        return None  # HTTP and SSE: built in _main

    async def _main(self) -> None:
        _CURRENT_CALL.set(None)  # this task's context is copied from whoever started it
        try:
            async with AsyncExitStack() as stack:
                transport = self._transport()
                if isinstance(self.config, HttpServerConfig):
                    auth = await self._oauth(stack) if self.config.oauth else None
                    http = await stack.enter_async_context(
                        httpx2.AsyncClient(
                            auth=auth,
                            headers=dict(self.config.headers),
                            timeout=httpx2.Timeout(30.0, read=max(300.0, self.config.timeout)),
                            event_hooks={"response": [self._on_http_response]},
                        )
                    )
                    transport = streamable_http_client(self.config.url, http_client=http)
                elif isinstance(self.config, SseServerConfig):
                    transport = sse_client(
                        self.config.url,
                        headers=dict(self.config.headers),
                        timeout=30.0,
                        sse_read_timeout=max(300.0, self.config.timeout),
                    )
                client = Client(
                    transport,
                    mode="legacy",
                    elicitation_callback=self._on_elicit,
                    logging_callback=self._on_log,
                    client_info=_CLIENT_INFO,
                    cache=None,
                )
                await stack.enter_async_context(client)
                self.tools = await _list_all_tools(client)
                self.client = client
                self._ready.set_result(None)
                await self._stop.wait()
        except Exception as exc:
            if not self._ready.done():
                self._ready.set_exception(exc)
            else:
                self.closed_reason = self.closed_reason or f"lost its connection ({_leaf(exc)})"
                logger.debug("MCP server %r connection ended", self.name, exc_info=True)
        finally:
            self.client = None
            if not self._ready.done():
                self._ready.cancel()

    async def _oauth(self, stack: AsyncExitStack) -> httpx2.Auth:
        """The SDK's OAuth client for this server: the sign-in URL is shown, the browser comes
        back to a loopback listener, tokens go to a 0600 file."""
        from mcp.client.auth import OAuthClientProvider
        from mcp.shared.auth import OAuthClientMetadata

        from runtime.mcp.oauth import FileTokenStorage, LoopbackCallback, token_path

        assert isinstance(self.config, HttpServerConfig)
        callback = LoopbackCallback()
        redirect_uri = await callback.start()
        stack.push_async_callback(callback.aclose)

        async def show(url: str) -> None:
            text = f"MCP server '{self.name}' needs you to sign in: open {url}"
            logger.warning("MCP server %r needs a sign-in (authorization URL shown)", self.name)
            if self._notify is not None:
                self._notify(McpNotice(server=self.name, level="warning", text=text))
            if self._on_authorize_url is not None:
                self._on_authorize_url(self.name, url)

        metadata = OAuthClientMetadata.model_validate(
            {
                "client_name": "agent-tui",
                "redirect_uris": [redirect_uri],
                "grant_types": ["authorization_code", "refresh_token"],
                "response_types": ["code"],
                "token_endpoint_auth_method": "none",
            }
        )
        storage = FileTokenStorage(self._token_path or token_path(self.name, self.config.url))
        return OAuthClientProvider(
            server_url=self.config.url,
            client_metadata=metadata,
            storage=storage,
            redirect_handler=show,
            callback_handler=callback.wait,
        )

    async def _on_http_response(self, response: httpx2.Response) -> None:
        """Note HTTP errors for messages, and a lost session, on the call that got them (the
        SDK sends each request in the context of the call that made it)."""
        if response.status_code < 400:
            return
        lost = False
        if response.request.headers.get("mcp-session-id"):
            if response.status_code == 404:
                lost = True
            elif response.status_code == 400:
                # Some servers (server-everything) answer an unknown session with 400.
                with contextlib.suppress(httpx2.HTTPError):
                    lost = b"session" in (await response.aread()).lower()
        error = _HttpError(response.status_code, session_lost=lost)
        self.http_error = error
        call = _CURRENT_CALL.get()
        if call is not None:
            call.http_error = error

    async def wait_ready(self, timeout: float) -> None:
        """Wait (at most ``timeout`` s from the start) until the server answers; raise
        ``_StartFailed`` with a clear reason otherwise."""
        remaining = max(0.0, self.started_at + timeout - time.monotonic())
        try:
            async with asyncio.timeout(remaining):
                await asyncio.shield(self._ready)
        except TimeoutError:
            self.stop(f"did not start within {timeout:g} s")
            stderr = self.process.stderr_summary()
            reason = "; ".join(
                part
                for part in (
                    f"did not finish starting within {timeout:g} s"
                    " (more: startup_timeout or MCP_TIMEOUT)",
                    self.process.noise_summary(),
                    f"stderr: {stderr}" if stderr else "",
                )
                if part
            )
            raise _StartFailed(reason) from None
        except asyncio.CancelledError:
            if self._ready.cancelled() and not _current_task_cancelling():
                raise _StartFailed("was stopped while starting") from None
            raise
        except Exception as exc:
            raise _StartFailed(self._describe_start_failure(exc)) from None

    def _describe_start_failure(self, exc: BaseException) -> str:
        exc = _leaf(exc)
        config = self.config
        if isinstance(config, StdioServerConfig):
            if isinstance(exc, FileNotFoundError):
                cwd = self.workspace if config.cwd is None else self.workspace / config.cwd
                if not cwd.is_dir():
                    return f"working directory does not exist: {cwd}"
                return f"command not found: {config.command!r}"
            if isinstance(exc, PermissionError):
                return f"command is not executable: {config.command!r}"
            if self.process.pid is not None and not self.process.alive:
                head, sep, stderr = self.process.describe_exit().partition("; stderr: ")
                return f"{head} during startup" + (f"; stderr: {stderr}" if sep else "")
        if isinstance(config, HttpServerConfig | SseServerConfig):
            url = _safe_url(config.url)
            if isinstance(exc, httpx2.ConnectError):
                return f"could not connect to {url} (connection refused or host unreachable)"
            if isinstance(exc, httpx2.TimeoutException):
                return f"{url} did not answer in time"
            if isinstance(exc, httpx2.HTTPStatusError):
                status = _HttpError(exc.response.status_code, session_lost=False)
                return f"{url} answered {status.describe()}"
            if isinstance(exc, httpx2.HTTPError):
                return f"HTTP error talking to {url}: {type(exc).__name__}"
            if self.http_error is not None:
                return f"{url} answered {self.http_error.describe()}"
        if isinstance(exc, MCPError):
            return f"the MCP handshake failed: {exc.error.message}"
        return f"failed to start: {type(exc).__name__}: {exc}"

    @property
    def usable(self) -> bool:
        if not self._ready.done() or self._ready.cancelled() or self._ready.exception():
            return False
        if self.client is None or self._task.done() or self._stop.is_set():
            return False
        return not isinstance(self.config, StdioServerConfig) or self.process.alive

    @property
    def starting(self) -> bool:
        return not self._ready.done() and not self._task.done()

    def stop(self, reason: str | None = None) -> None:
        """Ask the owning task to shut the server down (it does so in the background)."""
        if reason and not self.closed_reason:
            self.closed_reason = reason
        self._stop.set()
        if not self._ready.done() and not self._handshake_cancelled:
            # Still starting: nothing to leave cleanly, cancel the handshake. Once: a second
            # cancel would interrupt the transport stopping the server (an anyio shield does
            # not hold off asyncio's own cancellation), and leave the process running.
            self._handshake_cancelled = True
            self._task.cancel()

    async def wait_closed(self, reason: str, timeout: float = _STOP_GRACE) -> None:
        self.stop(reason)
        done, _ = await asyncio.wait({self._task}, timeout=timeout)
        if not done:
            self._task.cancel()
            await asyncio.wait({self._task}, timeout=timeout)
        if self._ready.done() and not self._ready.cancelled():
            self._ready.exception()  # mark retrieved

    # -- server-initiated requests -----------------------------------------------------------

    async def _on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        """A server's log message: into our log, and a notice from warning up."""
        level = _LOG_LEVELS.get(str(params.level), logging.INFO)
        data = params.data
        text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, default=str)
        source = f"{self.name}/{params.logger}" if params.logger else self.name
        logger.log(level, "MCP server %s: %s", source, text)
        if level >= logging.WARNING and self._notify is not None:
            if len(text) > _NOTICE_CHARS:
                text = text[:_NOTICE_CHARS] + "…"
            self._notify(
                McpNotice(
                    server=self.name,
                    level="warning" if level == logging.WARNING else "error",
                    text=f"MCP server '{self.name}' {params.level}: {text}",
                )
            )

    async def _on_elicit(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        related = _CURRENT_CALL.get()
        calls = list(self.in_flight)
        if related is not None and related in calls:
            host, asking = related, [related]
        elif calls:
            # stdio gives no related request: the question belongs to the session. It is
            # attached to the oldest call (which keeps its result until it is settled) and
            # names every call in flight.
            host, asking = calls[0], calls
        else:
            return types.ElicitResult(action="decline")
        names = [call.tool for call in asking]
        detail: dict[str, Any] = {"server": self.name, "tool": host.tool, "calls": names}
        # The form names the server (detail) and, when it cannot be one call, every call.
        source = ""
        if len(asking) > 1:
            running = ", ".join(f"'{name}'" for name in names)
            source = f"\n(asked by MCP server '{self.name}' while it runs {running})"
        if isinstance(params, types.ElicitRequestURLParams):
            prompt = f"{params.message}\n{params.url}"
            schema: dict[str, Any] = {"type": "object", "properties": {}}
            detail |= {"mode": "url", "url": params.url}
        else:
            prompt = params.message
            schema = dict(params.requested_schema)
        request = NewInputRequest(
            kind=InputKind.ELICITATION,
            prompt=prompt + source,
            answer_schema=schema,
            tool_call_id=host.ctx.tool_call_id or None,
            detail=detail,
        )
        for call in calls:
            call.pause()
        host.host()
        try:
            answer = await host.ctx.request_input(request)
        except asyncio.CancelledError:
            if _current_task_cancelling():
                raise
            return types.ElicitResult(action="cancel")
        except Exception:
            logger.info("elicitation for %s/%s ended without an answer", self.name, host.tool)
            return types.ElicitResult(action="cancel")
        finally:
            host.unhost()
            for call in calls:
                call.resume()
        return _elicit_result(answer)


def _consume_outcome(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        logger.debug("MCP server task %s ended with an error", task.get_name())


def _current_task_cancelling() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _requires_tasks(tool: types.Tool) -> bool:
    """A tool that only runs as an MCP task (``taskSupport: required``): agent-tui does not
    implement tasks, so every call would fail with -32601; it is not offered to the model."""
    execution = tool.execution
    return execution is not None and execution.task_support == "required"


async def _list_all_tools(client: Client) -> list[types.Tool]:
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(100):  # a server paging forever cannot hang startup
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


async def _send_call(
    client: Client, call: _Call, arguments: dict[str, Any]
) -> types.CallToolResult:
    """Send ``call`` and wait (within its timeout) for its result, with ``_CURRENT_CALL`` set to
    it while the request is in flight."""
    ctx = call.ctx

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        ctx.progress(progress, total, message)

    token = _CURRENT_CALL.set(call)
    try:
        async with asyncio.timeout(call.timeout) as deadline:
            call.deadline = deadline
            try:
                return await client.call_tool(call.tool, arguments, progress_callback=on_progress)
            finally:
                call.finished = True
    finally:
        _CURRENT_CALL.reset(token)


def _tool_output(tool: McpTool, result: types.CallToolResult) -> ToolOutput:
    """A result the server sent, as the tool's output (``ToolError`` if it reports an error)."""
    rendered = render(result, structured_primary=tool.structured_primary)
    if result.is_error:
        raise ToolError(
            rendered.text or f"MCP tool '{tool.remote_name}' of server '{tool.server}' failed"
        )
    return ToolOutput(
        content=rendered.text, structured=rendered.structured, images=tuple(rendered.images)
    )


DESCRIPTION_SHOWN = 300
"""Characters of a tool's description an approval shows."""


@dataclass(frozen=True)
class McpTool:
    """One server tool as a ``runtime.tools.base.Tool``."""

    name: str
    description: str
    input_schema: dict[str, Any]
    read_only: bool
    approval_default: ApprovalDefault
    server: str
    remote_name: str
    _manager: McpManager = field(repr=False, compare=False)
    structured_primary: bool = False
    """The tool declares an ``outputSchema``: its structured content is the primary result."""

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        return await self._manager._call(self, arguments, ctx)

    def approval_detail(self, arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        # What the tool says it does: often all there is to go by (a call with no arguments
        # showed a trial only "Allow basic__ask?").
        said = " ".join(self.description.split())
        if len(said) > DESCRIPTION_SHOWN:
            said = said[: DESCRIPTION_SHOWN - 1].rstrip() + "…"
        return {"server": self.server, "tool": self.remote_name, "description": said}


if TYPE_CHECKING:

    def _conforms(tool: McpTool) -> Tool:  # mypy proves McpTool implements the Tool protocol
        return tool


class McpManager:
    """The configured MCP servers, as tools.

    A server starts on first use (``tools()`` or a call) and stays up until ``aclose()``. A
    server that fails to start is skipped and its reason kept in ``errors``; ``tools()`` tries it
    again in the background (a step never waits for a server that failed), and it is offered
    once it started. One that exits or stops answering mid-call fails that call and is restarted
    on next use.
    """

    def __init__(
        self,
        servers: Mapping[str, ServerConfig],
        *,
        workspace: Path,
        retry_failed_after: float = RETRY_FAILED_AFTER,
        on_authorize_url: Callable[[str, str], None] | None = None,
        token_dir: Path | None = None,
        clock: Clock | None = None,
    ) -> None:
        """Each server gets its ``startup_timeout`` to start; one that could not start is tried
        again in the background by the first ``tools()`` ``retry_failed_after`` seconds later
        (on ``clock``), or by the next use, as at its first start, when its configuration
        changed. ``on_authorize_url(server, url)`` is told the
        sign-in URL of an OAuth server (the TUI / CLI show it); ``token_dir`` overrides where
        OAuth tokens are kept."""
        self.on_authorize_url = on_authorize_url
        self.token_dir = token_dir
        self.servers: dict[str, ServerConfig] = dict(servers)
        self.workspace = workspace
        self.retry_failed_after = retry_failed_after
        self._clock: Clock = clock or SystemClock()
        self.errors: dict[str, str] = {}
        """Why a server could not be started, by server name (cleared once it starts)."""
        self._connections: dict[str, _Connection] = {}
        self._retired: set[_Connection] = set()
        self._locks: dict[str, asyncio.Lock] = {name: asyncio.Lock() for name in self.servers}
        self._failed_at: dict[str, float] = {}
        self._failures: dict[str, int] = {}
        """Failed starts in a row, by server: each doubles the wait before the next try."""
        self._notices: list[McpNotice] = []
        self._failures_told: set[str] = set()
        """Servers whose failure to start was said: said again only after the server started
        or its configuration changed (a trial read it on every run)."""
        self._retries: dict[str, asyncio.Task[None]] = {}
        """Background starts of servers that could not start, by server (while in flight)."""
        self._closed = False

    async def __aenter__(self) -> McpManager:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- public -----------------------------------------------------------------------------

    async def tools(self) -> list[McpTool]:
        """Every reachable server's tools, named ``server__tool``. A server not started yet is
        started (within its ``startup_timeout``: a run's first step has its tools). Servers that
        fail to start are left out (see ``errors``); one that could not start is not waited
        for again: it is tried again in the background once ``retry_failed_after`` s (doubled
        with each failure in a row) have passed, and offered by the first call after it
        started."""
        names: list[str] = []
        for name in self.servers:
            if name in self.errors:
                self._retry_in_background(name)
            else:
                names.append(name)
        connections = await asyncio.gather(*(self._try_connection(name) for name in names))
        return self._tools_of(zip(names, connections, strict=True))

    async def settle(self) -> None:
        """Wait until the background starts in flight have ended (each within its server's
        ``startup_timeout``), whether the server started or not."""
        retries = list(self._retries.values())
        if retries:
            await asyncio.wait(retries)

    def running_tools(self) -> tuple[list[McpTool], list[str]]:
        """The tools of the servers running now, none started for it (``/context`` counts
        them), and the names of the servers that are not running."""
        running: list[tuple[str, _Connection | None]] = []
        idle: list[str] = []
        for name in self.servers:
            connection = self._connections.get(name)
            if connection is not None and connection.usable:
                running.append((name, connection))
            else:
                idle.append(name)
        return self._tools_of(running), idle

    def _tools_of(self, connections: Iterable[tuple[str, _Connection | None]]) -> list[McpTool]:
        result: list[McpTool] = []
        seen: set[str] = set()
        for name, connection in connections:
            if connection is None:
                continue
            for remote in connection.tools:
                if _requires_tasks(remote):
                    continue
                tool = self._make_tool(name, remote)
                if tool.name in seen:
                    logger.warning(
                        "MCP tool name %r is taken; skipping %s/%s", tool.name, name, remote.name
                    )
                    continue
                seen.add(tool.name)
                result.append(tool)
        return result

    async def check(self) -> list[ServerReport]:
        """Start every server (concurrently, each within its ``startup_timeout``) and report on
        it."""

        async def one(name: str) -> ServerReport:
            config = self.servers[name]
            try:
                connection = await self._connection(name)
            except _StartFailed as exc:
                return ServerReport(name=name, transport=config.type, ok=False, error=exc.reason)
            usable = [remote for remote in connection.tools if not _requires_tasks(remote)]
            tools = [self._make_tool(name, remote).name for remote in usable]
            unsupported = [
                f"{self._make_tool(name, remote).name} (requires MCP tasks)"
                for remote in connection.tools
                if _requires_tasks(remote)
            ]
            return ServerReport(
                name=name, transport=config.type, ok=True, tools=tools, unsupported=unsupported
            )

        return list(await asyncio.gather(*(one(name) for name in self.servers)))

    def status(self) -> dict[str, str]:
        """Each server's state in words, for a person (``/context``): running with how many
        tools, starting, could not start (why), or not started yet (servers start at their
        first use)."""
        states: dict[str, str] = {}
        for name in self.servers:
            connection = self._connections.get(name)
            if name in self.errors and name in self._retries:
                states[name] = f"could not start: {self.errors[name]} (being tried again now)"
            elif name in self.errors:
                states[name] = f"could not start: {self.errors[name]} ({self._retry_words(name)})"
            elif connection is not None and connection.usable:
                # The tools the model is offered, as `doctor` counts them: not those that
                # require MCP tasks (a trial read 17 here and 16 in doctor).
                count = sum(not _requires_tasks(remote) for remote in connection.tools)
                unsupported = len(connection.tools) - count
                states[name] = f"running, {count} tool{'' if count == 1 else 's'}" + (
                    f" ({unsupported} more not offered:"
                    f" {'it requires' if unsupported == 1 else 'they require'} MCP tasks)"
                    if unsupported
                    else ""
                )
            elif connection is not None and connection.starting:
                states[name] = "starting"
            else:
                states[name] = "not started yet (starts when a run first lists tools)"
        return states

    def reconfigure(self, servers: Mapping[str, ServerConfig]) -> list[str]:
        """Take ``servers`` as the configuration from now on (its files changed): a server
        removed or changed is stopped (a changed one starts again, as configured now, at its
        next use); one added starts at its first use; a server that could not start is tried
        again at once. The names of the servers that changed, were added or removed."""
        wanted = dict(servers)
        changed = sorted(
            name for name in {*self.servers, *wanted} if self.servers.get(name) != wanted.get(name)
        )
        for name in changed:
            retry = self._retries.pop(name, None)
            if retry is not None:  # it would start the server as configured before
                retry.cancel()
            connection = self._connections.get(name)
            if connection is not None:
                self._retire(connection, "was stopped: its configuration changed")
            self.errors.pop(name, None)
            self._failed_at.pop(name, None)
            self._failures.pop(name, None)
            self._failures_told.discard(name)
            self._locks.setdefault(name, asyncio.Lock())
            if name not in wanted:
                what = "removed"
            elif name not in self.servers:
                what = "added"
            else:
                what = "its new configuration is used"
            self._add_notice(
                McpNotice(server=name, level="info", text=f"MCP server '{name}': {what}")
            )
        self.servers = wanted
        return changed

    def take_notices(self) -> list[McpNotice]:
        """The notices since the last call (start-up failures, server warnings), oldest first.

        The engine publishes each as a ``Notice`` of the run that is using the servers, after
        ``tools()`` and after each MCP tool call."""
        notices, self._notices = self._notices, []
        return notices

    def _add_notice(self, notice: McpNotice) -> None:
        if len(self._notices) < 100:  # nobody draining: keep the first ones
            self._notices.append(notice)

    async def aclose(self) -> None:
        """Stop every server (bounded; stdio processes are terminated and reaped)."""
        self._closed = True
        retries = list(self._retries.values())
        self._retries.clear()
        for retry in retries:
            retry.cancel()
        if retries:  # each leaves its server (still starting) in _connections, stopped below
            await asyncio.wait(retries)
        connections = [*self._connections.values(), *self._retired]
        self._connections.clear()
        self._retired.clear()
        await asyncio.gather(
            *(
                connection.wait_closed("was stopped because MCP was shut down")
                for connection in connections
            )
        )

    # -- internals --------------------------------------------------------------------------

    def _make_tool(self, server: str, remote: types.Tool) -> McpTool:
        annotations = remote.annotations
        read_only = bool(annotations is not None and annotations.read_only_hint)
        schema = dict(remote.input_schema)
        schema.setdefault("type", "object")
        return McpTool(
            name=tool_name(server, remote.name),
            description=remote.description or f"Tool {remote.name!r} of MCP server {server!r}.",
            input_schema=schema,
            read_only=read_only,
            approval_default="allow" if read_only else "ask",
            server=server,
            remote_name=remote.name,
            _manager=self,
            structured_primary=remote.output_schema is not None,
        )

    async def _try_connection(self, name: str) -> _Connection | None:
        try:
            return await self._connection(name)
        except _StartFailed:
            return None

    def _retry_in_background(self, name: str) -> None:
        """Start server ``name``, which could not start, again in a task of ours, unless one is
        in flight or its wait after the last failure is not over."""
        if self._closed or name in self._retries or self._retry_in(name) is not None:
            return
        retry = asyncio.create_task(self._retry(name), name=f"mcp-retry:{name}")
        self._retries[name] = retry

        def forget(task: asyncio.Task[None]) -> None:
            if self._retries.get(name) is task:
                del self._retries[name]

        retry.add_done_callback(forget)

    async def _retry(self, name: str) -> None:
        """One background start of server ``name``: a failure is recorded as at a first
        start (``errors``, the wait before the next try); a success is said, since the runs
        that did without the server's tools offer them from their next step."""
        try:
            connection = await self._connection(name)
        except _StartFailed:
            return
        except Exception:  # the top of a task nobody awaits: logged, never lost
            logger.exception("MCP server %r: trying it again failed", name)
            return
        count = sum(not _requires_tasks(remote) for remote in connection.tools)
        logger.info("MCP server %r started when tried again", name)
        self._add_notice(
            McpNotice(
                server=name,
                level="info",
                text=f"MCP server '{name}' started when tried again: its {count}"
                f" {'tool is' if count == 1 else 'tools are'} offered from the next step",
            )
        )

    def _retry_in(self, name: str) -> float | None:
        """Seconds until server ``name``, which could not start, is tried again; None when its
        next use tries it (it did not fail, or long enough ago)."""
        if name not in self.errors:
            return None
        failed_at = self._failed_at.get(name)
        if failed_at is None:
            return None
        in_a_row = self._failures.get(name, 1)
        wait = min(self.retry_failed_after * 2 ** (in_a_row - 1), RETRY_FAILED_AT_MOST)
        left = failed_at + wait - self._clock.monotonic()
        return left if left > 0 else None

    def _retry_words(self, name: str) -> str:
        """When server ``name``, which could not start, is tried again, for a person."""
        left = self._retry_in(name)
        if left is None:
            return "tried again when next used"
        return (
            f"tried again when next used after {math.ceil(left)} s,"
            " or at once if its configuration changes"
        )

    async def _connection(self, name: str) -> _Connection:
        if self._closed:
            raise _StartFailed("the MCP manager is closed")
        config = self.servers[name]
        async with self._locks[name]:
            connection = self._connections.get(name)
            if connection is not None and not connection.usable and not connection.starting:
                self._retire(connection, "was not running any more")
                connection = None
            if connection is None:
                connection = _Connection(
                    name,
                    config,
                    self.workspace,
                    self._add_notice,
                    on_authorize_url=self.on_authorize_url,
                    token_path=None if self.token_dir is None else self.token_dir / f"{name}.json",
                )
                self._connections[name] = connection
            if not connection.usable:
                try:
                    await connection.wait_ready(config.startup_timeout)
                except _StartFailed as exc:
                    self._retire(connection, exc.reason)
                    self.errors[name] = exc.reason
                    self._failed_at[name] = self._clock.monotonic()
                    self._failures[name] = self._failures.get(name, 0) + 1
                    logger.warning("MCP server %r could not start: %s", name, exc.reason)
                    if name not in self._failures_told:
                        self._failures_told.add(name)
                        self._add_notice(
                            McpNotice(
                                server=name,
                                # A warning: the run goes on without these tools (as an
                                # error, `agent-tui run` printed "error:" over a run that
                                # then completed).
                                level="warning",
                                text=f"MCP server '{name}' could not start: {exc.reason}; "
                                f"its tools are not available ({self._retry_words(name)})",
                            )
                        )
                    raise
            self.errors.pop(name, None)
            self._failed_at.pop(name, None)
            self._failures.pop(name, None)
            self._failures_told.discard(name)
            return connection

    def _retire(self, connection: _Connection, reason: str) -> None:
        """Take a connection out of service; its task shuts the server down in the background
        (awaited by ``aclose``)."""
        if self._connections.get(connection.name) is connection:
            del self._connections[connection.name]
        connection.stop(reason)
        self._retired.add(connection)
        connection._task.add_done_callback(lambda _: self._retired.discard(connection))

    async def _call(self, tool: McpTool, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        for attempt in range(2):
            try:
                return await self._call_once(tool, arguments, ctx)
            except _NotDelivered as exc:
                if attempt == 1:
                    message = f"MCP server '{tool.server}' {exc.reason}"
                    raise ToolError(message + "; it will be restarted on next use") from None
                logger.info(
                    "MCP server %r %s; restarting it and sending the call again",
                    tool.server,
                    exc.reason,
                )
        raise AssertionError("unreachable")  # pragma: no cover

    async def _call_once(
        self, tool: McpTool, arguments: dict[str, Any], ctx: ToolContext
    ) -> ToolOutput:
        server, remote = tool.server, tool.remote_name
        connection, client = await self._live_client(server)
        call = _Call(ctx=ctx, tool=remote, timeout=connection.config.timeout)
        failure: str | None = None
        written = connection.process.requests_written
        connection.in_flight.append(call)
        try:
            result = await _send_call(client, call, arguments)
        except TimeoutError:
            failure = self._timeout_failure(connection, call)
        except MCPError as exc:
            failure = self._mcp_error_failure(tool, connection, call, exc, written)
        except (ValidationError, RuntimeError) as exc:
            # It answered, but with something we cannot read: whatever it did, it did.
            message = f"MCP server '{server}' returned an unreadable result for '{remote}': {exc}"
            raise (ToolError if tool.read_only else ToolOutcomeUnknown)(message) from None
        except (
            OSError,
            httpx2.HTTPError,
            anyio.BrokenResourceError,
            anyio.ClosedResourceError,
        ) as exc:
            failure = f"lost its connection while running '{remote}' ({type(exc).__name__})"
            self._retire(connection, "lost its connection")
        finally:
            connection.in_flight.remove(call)
            # A question from the server attached to this call keeps the call open until it is
            # settled: its answer must still find the call.
            if not _current_task_cancelling():
                await call.settled.wait()
        if failure is not None:
            message = f"MCP server '{server}' {failure}; it will be restarted on next use"
            if tool.read_only:
                raise ToolError(message)
            raise ToolOutcomeUnknown(message + "; the call may have had effects")
        return _tool_output(tool, result)

    async def _live_client(self, server: str) -> tuple[_Connection, Client]:
        """The server's connection, started if need be, and its client; ``ToolError`` if it
        cannot be had."""
        try:
            connection = await self._connection(server)
        except _StartFailed as exc:
            # Nothing ran: a plain failed call.
            raise ToolError(f"MCP server '{server}' is not available: {exc.reason}") from None
        client = connection.client
        if client is None:  # pragma: no cover - usable implies a client
            raise ToolError(f"MCP server '{server}' is not available")
        return connection, client

    def _timeout_failure(self, connection: _Connection, call: _Call) -> str:
        """What went wrong when ``call`` timed out; the server is retired either way."""
        remote = call.tool
        if call.deadline is not None and call.deadline.expired():
            failure = f"did not answer within {call.timeout:g} s while running '{remote}'"
            self._retire(connection, f"was stopped after '{remote}' did not answer")
        else:
            failure = f"timed out talking to the server while running '{remote}'"
            self._retire(connection, "timed out")
        return failure

    def _mcp_error_failure(
        self,
        tool: McpTool,
        connection: _Connection,
        call: _Call,
        exc: MCPError,
        written: int,
    ) -> str:
        """What went wrong when ``call`` ended in ``exc``: a closed connection is described and
        its server retired; a refused call raises ``ToolError``, and a request that never
        reached the server ``_NotDelivered``."""
        server, remote = tool.server, tool.remote_name
        http_error = call.http_error
        if http_error is not None and http_error.session_lost:
            # The server forgot our session (it restarted): the request was refused before
            # it ran, so a new session may send it again (MCP spec, session management).
            self._retire(connection, "lost its HTTP session")
            raise _NotDelivered(
                f"lost its HTTP session (HTTP {http_error.status}) before '{remote}' ran"
            ) from None
        if http_error is not None:
            raise ToolError(
                f"MCP server '{server}' answered {http_error.describe()} to the call to "
                f"'{remote}': {exc.error.message}"
            ) from None
        if exc.code != types.CONNECTION_CLOSED:
            raise ToolError(
                f"MCP server '{server}' rejected the call to '{remote}': {exc.error.message}"
            ) from None
        failure = self._closed_failure(connection, remote, written)
        self._retire(connection, "exited")
        return failure

    def _closed_failure(self, connection: _Connection, remote: str, written: int) -> str:
        """How the connection came to close while ``remote`` ran; raises ``_NotDelivered`` when
        a stdio server had gone before the request was written (``written`` requests before)."""
        if connection.closed_reason is not None:
            return f"{connection.closed_reason} while running '{remote}'"
        if not isinstance(connection.config, StdioServerConfig):
            return f"closed the connection while running '{remote}'"
        process = connection.process
        if process.write_failed and process.requests_written == written:
            # The request never reached the server (it had gone before we wrote).
            self._retire(connection, "stopped reading its input")
            raise _NotDelivered(f"had stopped before '{remote}' was sent") from None
        if process.returncode is None:
            detail = process.exit_detail().removeprefix("still running")
            return f"closed its output while running '{remote}'{detail}"
        return f"exited while running '{remote}' ({process.exit_detail()})"
