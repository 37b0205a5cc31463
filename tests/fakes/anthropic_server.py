"""A fake Anthropic Messages API on loopback that speaks the real streaming protocol.

It is a real HTTP/1.1 server (``asyncio.start_server``), so the official SDK talks to it through
its real transport: responses are sent with chunked transfer encoding, one SSE frame (or a piece of
one) per chunk, flushed as it goes. ``httpx.ASGITransport`` buffers whole responses and cannot test
streaming, hence this.

A server is scripted with a list of *responses*, served one per model request, in order:

- a stream: ``{"events": [ITEM, ...], "chunk_size": N | null, "headers": {...}}``, where ITEM is
  ``{"event": NAME, "data": OBJECT_OR_STRING}`` (``event`` may be left out, as OpenAI does),
  ``{"drop": true}`` (close the socket mid-stream, without ending the chunked body),
  ``{"gate": NAME}`` (hold the stream open until ``release(NAME)`` or
  ``POST /_fake/release/NAME``; a client that disconnects meanwhile is recorded), or
  ``{"raw": TEXT}`` (bytes sent as they are);
  ``chunk_size`` cuts the byte stream into pieces of that size, so frames split across chunks;
- a plain reply: ``{"status": 429, "headers": {"retry-after": "2"}, "body": OBJECT}``.

Every request is recorded (method, path, headers, parsed JSON body). When the script runs out,
the server answers 400 with a message saying so, which fails a run clearly instead of hanging.

In process::

    async with FakeAnthropicServer([text_response("Hello")]) as server:
        provider = AnthropicProvider("claude-test", api_key="k", base_url=server.base_url)

As a process (for end-to-end tests of the CLI)::

    python -m tests.fakes.anthropic_server --script FILE.json --port-file PATH \
        [--requests-file PATH] [--port N]

FILE.json is a JSON list of responses (or ``{"responses": [...]}``). The server prints
``READY <base_url>`` on stdout once listening, writes the port to ``--port-file`` (atomically),
appends each recorded request as one JSON line to ``--requests-file``, and serves
``GET /_fake/requests`` and ``POST /_fake/release/NAME``. ``spawn_fake_server`` wraps all this.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Self

Response = dict[str, Any]
"""One scripted response (see the module docstring)."""

_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    408: "Request Timeout",
    413: "Payload Too Large",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    529: "Overloaded",
}

PROJECT_ROOT = Path(__file__).resolve().parents[2]


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    """The parsed JSON body, or the raw text when it is not JSON, or None when empty."""

    def to_json(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "path": self.path,
            "headers": self.headers,
            "body": self.body,
        }


@dataclass
class _Gate:
    reached: asyncio.Event = field(default_factory=asyncio.Event)
    released: asyncio.Event = field(default_factory=asyncio.Event)


class ScriptedServer:
    """A loopback HTTP server replaying scripted responses; see the module docstring."""

    def __init__(
        self,
        responses: Sequence[Response] = (),
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        requests_file: Path | None = None,
        base_path: str = "",
    ) -> None:
        self._responses: list[Response] = [dict(r) for r in responses]
        self._host = host
        self._port = port
        self._requests_file = requests_file
        self._base_path = base_path
        self._server: asyncio.Server | None = None
        self._gates: dict[str, _Gate] = {}
        self._connections: set[asyncio.Task[None]] = set()
        self.requests: list[RecordedRequest] = []
        self.disconnected = asyncio.Event()
        """Set when a client closed its connection while a stream was still open."""
        self.disconnects = 0

    # --- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._on_connection, self._host, self._port)
        self._port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            for task in list(self._connections):
                task.cancel()
            for task in list(self._connections):
                with contextlib.suppress(BaseException):
                    await task
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    @property
    def port(self) -> int:
        return self._port

    @property
    def base_url(self) -> str:
        return f"http://{self._host}:{self._port}{self._base_path}"

    # --- scripting ----------------------------------------------------------------------------

    def add(self, *responses: Response) -> None:
        self._responses.extend(dict(r) for r in responses)

    def _gate(self, name: str) -> _Gate:
        return self._gates.setdefault(name, _Gate())

    def release(self, name: str) -> None:
        self._gate(name).released.set()

    async def wait_for_gate(self, name: str) -> None:
        """Return once a stream has reached gate ``name`` (bound it with ``asyncio.timeout``)."""
        await self._gate(name).reached.wait()

    @property
    def remaining(self) -> int:
        return len(self._responses)

    # --- HTTP ---------------------------------------------------------------------------------

    async def _on_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            request = await _read_request(reader)
            if request is None:
                return
            if request.path.startswith("/_fake/"):
                await self._control(request, writer)
                return
            self._record(request)
            if self._responses:
                response = self._responses.pop(0)
            else:
                response = {
                    "status": 400,
                    "body": {
                        "type": "error",
                        "error": {
                            "type": "invalid_request_error",
                            "message": "fake server: no scripted response left",
                        },
                    },
                }
            if "events" in response:
                await self._stream(response, reader, writer)
            else:
                await _send_plain(
                    writer,
                    int(response.get("status", 200)),
                    response.get("headers", {}),
                    response.get("body", {}),
                )
        except (ConnectionError, asyncio.IncompleteReadError):
            self._mark_disconnected()
        finally:
            self._connections.discard(task)
            if not writer.is_closing():
                writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    def _record(self, request: RecordedRequest) -> None:
        self.requests.append(request)
        if self._requests_file is not None:
            with self._requests_file.open("a", encoding="utf-8") as out:
                out.write(json.dumps(request.to_json()) + "\n")

    def _mark_disconnected(self) -> None:
        self.disconnects += 1
        self.disconnected.set()

    async def _control(self, request: RecordedRequest, writer: asyncio.StreamWriter) -> None:
        parts = request.path.strip("/").split("/")
        if parts[1:2] == ["requests"]:
            body: Any = [r.to_json() for r in self.requests]
            await _send_plain(writer, 200, {}, body)
        elif parts[1:2] == ["release"] and len(parts) == 3:
            self.release(parts[2])
            await _send_plain(writer, 200, {}, {"released": parts[2]})
        elif parts[1:2] == ["status"]:
            body = {"remaining": self.remaining, "disconnects": self.disconnects}
            await _send_plain(writer, 200, {}, body)
        else:
            await _send_plain(writer, 404, {}, {"error": f"unknown control path {request.path}"})

    async def _stream(
        self, response: Response, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        headers = {
            "content-type": "text/event-stream; charset=utf-8",
            "cache-control": "no-cache",
            "request-id": "req_fake",
            **response.get("headers", {}),
        }
        status = int(response.get("status", 200))
        head = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}"]
        head += [f"{k}: {v}" for k, v in headers.items()]
        head += ["transfer-encoding: chunked", "connection: close", "", ""]
        writer.write("\r\n".join(head).encode())
        await writer.drain()
        chunk_size = response.get("chunk_size")
        for item in response["events"]:
            if item.get("drop"):
                # Abort: no terminating chunk, so the client sees an incomplete body.
                writer.transport.abort()
                return
            if "gate" in item:
                if not await self._hold(item["gate"], reader):
                    return
                continue
            payload = item["raw"].encode() if "raw" in item else _frame(item)
            step = int(chunk_size) if chunk_size else len(payload)
            for start in range(0, len(payload), max(step, 1)):
                piece = payload[start : start + step]
                writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    async def _hold(self, name: str, reader: asyncio.StreamReader) -> bool:
        """Wait at a gate until released (True) or until the client goes away (False)."""
        gate = self._gate(name)
        gate.reached.set()
        released = asyncio.ensure_future(gate.released.wait())
        eof = asyncio.ensure_future(reader.read(1))
        try:
            done, _ = await asyncio.wait({released, eof}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            released.cancel()
            eof.cancel()
        if eof in done and not eof.cancelled() and eof.exception() is None and not eof.result():
            self._mark_disconnected()
            return False
        return True


async def _read_request(reader: asyncio.StreamReader) -> RecordedRequest | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    raw = b""
    if "content-length" in headers:
        raw = await reader.readexactly(int(headers["content-length"]))
    elif headers.get("transfer-encoding", "").lower() == "chunked":
        while True:
            size = int((await reader.readuntil(b"\r\n")).strip().split(b";")[0], 16)
            chunk = await reader.readexactly(size + 2)
            if size == 0:
                break
            raw += chunk[:-2]
    body: Any = None
    if raw:
        text = raw.decode("utf-8", errors="replace")
        try:
            body = json.loads(text)
        except ValueError:
            body = text
    return RecordedRequest(method=method, path=path, headers=headers, body=body)


async def _send_plain(
    writer: asyncio.StreamWriter, status: int, headers: Mapping[str, str], body: Any
) -> None:
    payload = body.encode() if isinstance(body, str) else json.dumps(body).encode()
    head = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}"]
    all_headers = {"content-type": "application/json", "request-id": "req_fake", **headers}
    head += [f"{k}: {v}" for k, v in all_headers.items()]
    head += [f"content-length: {len(payload)}", "connection: close", "", ""]
    writer.write("\r\n".join(head).encode() + payload)
    await writer.drain()


def _frame(item: Mapping[str, Any]) -> bytes:
    data = item.get("data", "")
    text = data if isinstance(data, str) else json.dumps(data)
    lines = [f"event: {item['event']}"] if "event" in item else []
    lines += [f"data: {part}" for part in text.split("\n")]
    return ("\n".join(lines) + "\n\n").encode()


class FakeAnthropicServer(ScriptedServer):
    """The fake Anthropic API; ``base_url`` is what the SDK's ``base_url`` takes."""


# --- builders for Anthropic scripts ---------------------------------------------------------


def event(name: str, data: Mapping[str, Any]) -> dict[str, Any]:
    return {"event": name, "data": dict(data)}


def message_start(
    *,
    model: str = "claude-test",
    input_tokens: int = 12,
    output_tokens: int = 1,
    cache_read: int = 0,
    cache_write: int = 0,
    message_id: str = "msg_fake_01",
) -> dict[str, Any]:
    return event(
        "message_start",
        {
            "type": "message_start",
            "message": {
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {
                    "input_tokens": input_tokens,
                    "output_tokens": output_tokens,
                    "cache_read_input_tokens": cache_read,
                    "cache_creation_input_tokens": cache_write,
                },
            },
        },
    )


def ping() -> dict[str, Any]:
    return event("ping", {"type": "ping"})


def block_start(index: int, block: Mapping[str, Any]) -> dict[str, Any]:
    return event(
        "content_block_start",
        {"type": "content_block_start", "index": index, "content_block": dict(block)},
    )


def block_delta(index: int, delta: Mapping[str, Any]) -> dict[str, Any]:
    return event(
        "content_block_delta", {"type": "content_block_delta", "index": index, "delta": dict(delta)}
    )


def block_stop(index: int) -> dict[str, Any]:
    return event("content_block_stop", {"type": "content_block_stop", "index": index})


def text_block(index: int, pieces: Sequence[str]) -> list[dict[str, Any]]:
    return [
        block_start(index, {"type": "text", "text": ""}),
        *(block_delta(index, {"type": "text_delta", "text": p}) for p in pieces),
        block_stop(index),
    ]


def thinking_block(index: int, pieces: Sequence[str], signature: str) -> list[dict[str, Any]]:
    return [
        block_start(index, {"type": "thinking", "thinking": "", "signature": ""}),
        *(block_delta(index, {"type": "thinking_delta", "thinking": p}) for p in pieces),
        block_delta(index, {"type": "signature_delta", "signature": signature}),
        block_stop(index),
    ]


def redacted_thinking_block(index: int, data: str) -> list[dict[str, Any]]:
    return [block_start(index, {"type": "redacted_thinking", "data": data}), block_stop(index)]


def tool_use_block(
    index: int, tool_use_id: str, name: str, json_pieces: Sequence[str]
) -> list[dict[str, Any]]:
    """A tool_use block whose input arrives as ``json_pieces`` (split wherever the test likes)."""
    return [
        block_start(index, {"type": "tool_use", "id": tool_use_id, "name": name, "input": {}}),
        block_delta(index, {"type": "input_json_delta", "partial_json": ""}),
        *(block_delta(index, {"type": "input_json_delta", "partial_json": p}) for p in json_pieces),
        block_stop(index),
    ]


def message_delta(
    stop_reason: str | None,
    *,
    output_tokens: int = 20,
    input_tokens: int | None = None,
    cache_read: int | None = None,
    cache_write: int | None = None,
) -> dict[str, Any]:
    usage: dict[str, Any] = {"output_tokens": output_tokens}
    if input_tokens is not None:
        usage["input_tokens"] = input_tokens
    if cache_read is not None:
        usage["cache_read_input_tokens"] = cache_read
    if cache_write is not None:
        usage["cache_creation_input_tokens"] = cache_write
    return event(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": None},
            "usage": usage,
        },
    )


def message_stop() -> dict[str, Any]:
    return event("message_stop", {"type": "message_stop"})


def error_event(
    error_type: str = "overloaded_error", message: str = "Overloaded"
) -> dict[str, Any]:
    return event("error", {"type": "error", "error": {"type": error_type, "message": message}})


def drop() -> dict[str, Any]:
    return {"drop": True}


def gate(name: str) -> dict[str, Any]:
    return {"gate": name}


def stream(events: Sequence[Mapping[str, Any]], *, chunk_size: int | None = None) -> Response:
    response: Response = {"events": [dict(e) for e in events]}
    if chunk_size is not None:
        response["chunk_size"] = chunk_size
    return response


def text_response(
    text: str | Sequence[str],
    *,
    stop_reason: str = "end_turn",
    input_tokens: int = 12,
    output_tokens: int = 20,
    cache_read: int = 0,
    cache_write: int = 0,
    chunk_size: int | None = None,
) -> Response:
    """A whole streamed answer of text (a string, or the pieces it arrives in)."""
    pieces = [text] if isinstance(text, str) else list(text)
    return stream(
        [
            message_start(
                input_tokens=input_tokens, cache_read=cache_read, cache_write=cache_write
            ),
            *text_block(0, pieces),
            message_delta(stop_reason, output_tokens=output_tokens),
            message_stop(),
        ],
        chunk_size=chunk_size,
    )


def tool_use_response(
    calls: Sequence[tuple[str, str, Mapping[str, Any]]],
    *,
    text: str | None = None,
    input_tokens: int = 12,
    output_tokens: int = 30,
) -> Response:
    """A streamed answer asking for tools: ``calls`` is ``[(tool_use_id, name, input), ...]``."""
    events: list[dict[str, Any]] = [message_start(input_tokens=input_tokens)]
    index = 0
    if text:
        events += text_block(0, [text])
        index = 1
    for offset, (tool_use_id, name, arguments) in enumerate(calls):
        encoded = json.dumps(dict(arguments))
        middle = len(encoded) // 2
        events += tool_use_block(
            index + offset, tool_use_id, name, [encoded[:middle], encoded[middle:]]
        )
    events += [message_delta("tool_use", output_tokens=output_tokens), message_stop()]
    return stream(events)


def error_response(
    status: int,
    error_type: str,
    message: str,
    *,
    retry_after: float | str | None = None,
    headers: Mapping[str, str] | None = None,
) -> Response:
    all_headers = dict(headers or {})
    if retry_after is not None:
        all_headers["retry-after"] = str(retry_after)
    return {
        "status": status,
        "headers": all_headers,
        "body": {"type": "error", "error": {"type": error_type, "message": message}},
    }


# --- running as a process -------------------------------------------------------------------


def load_script(path: Path) -> list[Response]:
    data = json.loads(path.read_text(encoding="utf-8"))
    if isinstance(data, dict):
        data = data.get("responses", [])
    if not isinstance(data, list):
        raise SystemExit(f"{path}: a script is a JSON list of responses")
    return [dict(r) for r in data]


async def serve_forever(
    responses: Sequence[Response],
    *,
    port: int = 0,
    port_file: Path | None = None,
    requests_file: Path | None = None,
    base_path: str = "",
) -> None:
    server = ScriptedServer(responses, port=port, requests_file=requests_file, base_path=base_path)
    await server.start()
    if port_file is not None:
        temporary = port_file.with_name(port_file.name + ".tmp")
        temporary.write_text(str(server.port), encoding="utf-8")
        os.replace(temporary, port_file)
    sys.stdout.write(f"READY {server.base_url}\n")
    sys.stdout.flush()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        await stop.wait()
    finally:
        await server.close()


def main(argv: Sequence[str] | None = None, *, base_path: str = "") -> None:
    parser = argparse.ArgumentParser(description="Serve a scripted fake model API on loopback.")
    parser.add_argument("--script", type=Path, required=True, help="JSON list of responses")
    parser.add_argument("--port", type=int, default=0, help="port (default: a free one)")
    parser.add_argument("--port-file", type=Path, help="write the chosen port to this file")
    parser.add_argument("--requests-file", type=Path, help="append recorded requests (JSON lines)")
    args = parser.parse_args(argv)
    asyncio.run(
        serve_forever(
            load_script(args.script),
            port=args.port,
            port_file=args.port_file,
            requests_file=args.requests_file,
            base_path=base_path,
        )
    )


@dataclass
class SpawnedServer:
    base_url: str
    requests_file: Path
    process: subprocess.Popen[str]

    def requests(self) -> list[dict[str, Any]]:
        """Requests the server recorded so far (method, path, headers, body)."""
        if not self.requests_file.exists():
            return []
        lines = self.requests_file.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines if line.strip()]


@contextlib.contextmanager
def spawn_fake_server(
    responses: Sequence[Response],
    *,
    flavor: Literal["anthropic", "openai"] = "anthropic",
    directory: Path | None = None,
    timeout: float = 15.0,
) -> Iterator[SpawnedServer]:
    """Run a fake server as a subprocess; yields its base URL once it is listening.

    For the anthropic flavor pass ``base_url`` as ``ANTHROPIC_BASE_URL``; for the openai flavor it
    already ends in ``/v1`` and is what ``OPENAI_BASE_URL`` takes.
    """
    with contextlib.ExitStack() as stack:
        if directory is None:
            directory = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        script = directory / f"{flavor}-script.json"
        script.write_text(json.dumps(list(responses)), encoding="utf-8")
        requests_file = directory / f"{flavor}-requests.jsonl"
        module = f"tests.fakes.{flavor}_server"
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                module,
                "--script",
                str(script),
                "--requests-file",
                str(requests_file),
            ],
            cwd=PROJECT_ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert process.stdout is not None
            with selectors.DefaultSelector() as selector:
                selector.register(process.stdout, selectors.EVENT_READ)
                if not selector.select(timeout):
                    raise TimeoutError(f"fake {flavor} server did not start in {timeout} s")
            line = process.stdout.readline()
            if not line.startswith("READY "):
                raise RuntimeError(f"fake {flavor} server failed to start: {line!r}")
            yield SpawnedServer(line.split(" ", 1)[1].strip(), requests_file, process)
        finally:
            process.terminate()
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=timeout)


if __name__ == "__main__":
    main()
