"""Real MCP servers for tests, written with the ``mcp`` SDK.

Each one runs in memory (``build_server(name)``, handed to ``McpManager`` as an
``InMemoryServer``), as a stdio subprocess (``python -m tests.fakes.mcp_servers --server NAME``,
see ``stdio_config``) or over streamable HTTP on loopback (``serve_http``).

Servers:

- ``basic``: ``echo`` and ``pid`` (read-only), ``add``, ``fail`` (an ``isError`` result),
  ``progress`` (three progress notifications),
  ``slow`` (works a while, with progress),
  ``big`` (a million characters), ``chatty`` (logs),
  ``ask`` (elicits a name and an age), ``favourites`` (elicits a form with every choice
  shape of the spec, ``FAVOURITES_SCHEMA``, and returns what came back as JSON),
  ``picture`` (an image), ``background`` (requires MCP tasks), ``header`` (an HTTP request
  header), ``crash`` / ``crash_readonly``
  (the process dies mid-call) and ``hang`` / ``hang_readonly`` (never answer); one prompt,
  ``review`` (a required ``topic`` and an optional ``tone``); one resource,
  ``notes://team/style`` (two lines of text).
- ``broken``: writes to stderr and exits with code 3 before speaking MCP.
- ``lingering``: one read-only tool, ``pids`` (its own pid and its helper's), and two things that
  outlive its stdin, as real servers' often do: a worker thread that never ends (so the
  interpreter never exits after the SDK returns at end of input) and a helper process it started
  (as a server starts a browser or a language server). Stdio only.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations, ToolExecution
from pydantic import BaseModel, Field

from runtime.config import StdioServerConfig

READ_ONLY = ToolAnnotations(read_only_hint=True)
DESTRUCTIVE = ToolAnnotations(read_only_hint=False, destructive_hint=True)

# A 1x1 transparent PNG.
PNG_BYTES = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


FAVOURITES_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "opening": {
            "type": "string",
            "title": "Opening line",
            "description": "The first line of your story",
            "default": "It was a dark and stormy night.",
        },
        "instruments": {  # several of a list, untitled, with bounds
            "type": "array",
            "title": "Instruments",
            "description": "One or two instruments",
            "minItems": 1,
            "maxItems": 2,
            "items": {"type": "string", "enum": ["Guitar", "Piano", "Violin", "Drums", "Bass"]},
            "default": ["Guitar"],
        },
        "hero": {  # one of a list, titled
            "type": "string",
            "title": "Hero",
            "oneOf": [
                {"const": "hero-1", "title": "Superman"},
                {"const": "hero-2", "title": "Green Lantern"},
                {"const": "hero-3", "title": "Wonder Woman"},
            ],
            "default": "hero-1",
        },
        "fish": {  # several of a list, titled
            "type": "array",
            "title": "Fish",
            "items": {
                "anyOf": [
                    {"const": "fish-1", "title": "Tuna"},
                    {"const": "fish-2", "title": "Salmon"},
                    {"const": "fish-3", "title": "Trout"},
                ]
            },
            "default": ["fish-1"],
        },
        "pet": {  # one of a list, titled the legacy way
            "type": "string",
            "title": "Pet",
            "enum": ["pet-1", "pet-2", "pet-3"],
            "enumNames": ["Cats", "Dogs", "Birds"],
            "default": "pet-1",
        },
    },
    "required": ["opening"],
}
"""The choice shapes of MCP's elicitation schema (2025-11-25 ``EnumSchema``), as
server-everything's ``trigger-elicitation-request`` sends them."""


class Person(BaseModel):
    name: str = Field(description="Your name")
    age: int = Field(description="Your age in years")


class _BasicServer(MCPServer):
    async def list_tools(self) -> list[Any]:
        tools = await super().list_tools()
        required = ToolExecution(task_support="required")
        return [
            tool.model_copy(update={"execution": required}) if tool.name == "background" else tool
            for tool in tools
        ]


def build_basic() -> MCPServer:
    server = _BasicServer("basic")

    @server.prompt()
    def review(topic: str, tone: str = "kind") -> str:
        """Ask for a review of a topic."""
        return f"Please review {topic}, in a {tone} tone."

    @server.resource("notes://team/style", name="style", description="The team's style guide.")
    def style() -> str:
        return "Use short sentences.\nName tests as behaviour sentences."

    @server.tool(annotations=READ_ONLY)
    def background() -> str:
        """Declared as requiring MCP tasks (``taskSupport: required``)."""
        return "ran without a task"

    @server.tool(annotations=READ_ONLY)
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @server.tool(annotations=READ_ONLY)
    def pid() -> int:
        """The server's process id."""
        return os.getpid()

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool(annotations=READ_ONLY)
    def fail(reason: str) -> str:
        """Always fails with the given reason."""
        raise ToolError(reason)

    @server.tool(annotations=READ_ONLY)
    async def progress(ctx: Context, steps: int = 3) -> str:
        """Count to ``steps``, reporting progress."""
        for step in range(1, steps + 1):
            await ctx.report_progress(step, steps, f"step {step} of {steps}")
        return f"counted to {steps}"

    @server.tool(annotations=READ_ONLY)
    async def slow(ctx: Context, seconds: float = 1.0, steps: int = 2) -> str:
        """Work for ``seconds``, reporting progress ``steps`` times, the last one at the end."""
        for step in range(steps):
            await ctx.report_progress(step, steps, f"step {step} of {steps}")
            await asyncio.sleep(seconds / steps)
        await ctx.report_progress(steps, steps, "done")
        return f"worked {seconds:g} s"

    @server.tool(annotations=DESTRUCTIVE)
    async def ask(ctx: Context) -> str:
        """Ask the person for their name and age."""
        answer = await ctx.elicit("Who are you?", Person)
        if answer.action == "accept":
            return f"hello {answer.data.name}, aged {answer.data.age}"
        return f"no answer: {answer.action}"

    @server.tool(annotations=READ_ONLY)
    async def favourites(ctx: Context) -> str:
        """Ask for favourites, every kind of choice; return the answer as JSON."""
        answer = await ctx.session.elicit_form(
            "Your favourites", FAVOURITES_SCHEMA, related_request_id=ctx.request_id
        )
        if answer.action == "accept":
            return json.dumps(answer.content, sort_keys=True)
        return f"no answer: {answer.action}"

    @server.tool(annotations=READ_ONLY)
    async def chatty(ctx: Context) -> str:
        """Log one message at each of debug, info, warning and error, then answer."""
        await ctx.debug("debug detail")
        await ctx.info("starting up the flux capacitor")
        await ctx.warning("disk almost full", logger_name="storage")
        await ctx.error({"error": "quota exceeded"})
        return "said my piece"

    @server.tool(annotations=READ_ONLY)
    def big(lines: int = 50_000) -> str:
        """``lines`` numbered lines of 20 characters (a million characters by default)."""
        return "".join(f"line {number:014d}\n" for number in range(lines))

    @server.tool(annotations=READ_ONLY)
    def picture() -> Image:
        """A tiny PNG."""
        return Image(data=PNG_BYTES, format="png")

    @server.tool(annotations=READ_ONLY)
    def header(ctx: Context, name: str) -> str:
        """The value of one HTTP request header ('' when absent or not over HTTP)."""
        headers = ctx.headers or {}
        return str(headers.get(name.lower(), ""))

    @server.tool(annotations=DESTRUCTIVE)
    def crash() -> str:
        """Kill the server process in the middle of the call."""
        sys.stderr.write("about to crash on purpose\n")
        sys.stderr.flush()
        os._exit(7)

    @server.tool(annotations=READ_ONLY)
    def crash_readonly() -> str:
        """Kill the server process in the middle of a read-only call."""
        os._exit(7)

    @server.tool(annotations=DESTRUCTIVE)
    async def hang() -> str:
        """Never answer."""
        await asyncio.Event().wait()
        return "unreachable"

    @server.tool(annotations=READ_ONLY)
    async def hang_readonly() -> str:
        """Never answer (read-only)."""
        await asyncio.Event().wait()
        return "unreachable"

    return server


def build_server(name: str) -> MCPServer:
    if name == "basic":
        return build_basic()
    raise ValueError(f"no test server named {name!r}")


def run_lingering() -> None:
    """Serve ``lingering`` on stdio; the process goes on after its stdin closes."""
    helper = subprocess.Popen(
        [sys.executable, "-c", "import signal; signal.pause()"], stdin=subprocess.DEVNULL
    )
    threading.Thread(target=threading.Event().wait, name="never-ends").start()
    server = MCPServer("lingering")

    @server.tool(annotations=READ_ONLY)
    def pids() -> dict[str, int]:
        """This server's pid and its helper's."""
        return {"server": os.getpid(), "helper": helper.pid}

    server.run("stdio")


def stdio_config(
    name: str, *, timeout: float = 30.0, startup_timeout: float = 30.0
) -> StdioServerConfig:
    """Config that runs test server ``name`` as a stdio subprocess of this interpreter (given
    longer than the default to start: the test machine may be busy)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return StdioServerConfig(
        command=sys.executable,
        args=["-m", "tests.fakes.mcp_servers", "--server", name],
        env={"PYTHONPATH": root, "PYTHONUNBUFFERED": "1"},
        cwd=root,
        timeout=timeout,
        startup_timeout=startup_timeout,
    )


@contextmanager
def serve_http(
    name: str = "basic",
    *,
    ready_timeout: float = 10.0,
    require_token: str | None = None,
    transport: str = "streamable-http",
) -> Iterator[str]:
    """Serve test server ``name`` over streamable HTTP on 127.0.0.1 (a random free port) in a
    background thread; yields the endpoint URL. With ``require_token``, a request without
    ``Authorization: Bearer <token>`` gets 401. ``transport="sse"`` serves the legacy SSE
    transport instead (yields the ``/sse`` URL)."""
    import uvicorn

    class _Server(uvicorn.Server):
        ready = threading.Event()

        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets=sockets)
            self.ready.set()

    built = build_server(name)
    app: Any = built.sse_app() if transport == "sse" else built.streamable_http_app()
    if require_token is not None:
        app = _require_token(app, require_token)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = _Server(uvicorn.Config(app, log_level="error", lifespan="on"))
    server.ready = threading.Event()
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        if not server.ready.wait(ready_timeout):
            raise RuntimeError(f"HTTP test server did not start within {ready_timeout} s")
        yield f"http://127.0.0.1:{port}/" + ("sse" if transport == "sse" else "mcp")
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def _require_token(app: Any, token: str) -> Any:
    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            if headers.get(b"authorization") != f"Bearer {token}".encode():
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b"unauthorized"})
                return
        await app(scope, receive, send)

    return guarded


def unused_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Run an MCP test server on stdio.")
    parser.add_argument("--server", required=True, choices=["basic", "broken", "lingering"])
    args = parser.parse_args(argv)
    if args.server == "broken":
        sys.stderr.write("loading configuration\nfatal: the broken server refuses to start\n")
        sys.stderr.flush()
        os._exit(3)
    if args.server == "lingering":
        run_lingering()
        return
    build_server(args.server).run("stdio")


if __name__ == "__main__":
    main()
