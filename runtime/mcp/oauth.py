"""OAuth for HTTP MCP servers through the SDK's client (authorization code with PKCE).

The sign-in URL is shown to the person (a notice, the log, and ``on_authorize_url``); the
browser comes back to a one-shot listener on loopback. Tokens are kept in a file only the user
can read (0600, in a 0700 folder under ``$XDG_STATE_HOME/agent-tui/mcp-oauth``) — never in the
database or the log.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthToken

_CALLBACK_PAGE = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nConnection: close\r\n\r\n"
    b"<html><body><p>Signed in. You can close this window and return to agent-tui.</p>"
    b"</body></html>"
)
_NOT_FOUND = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


def token_path(server: str, url: str, env: Mapping[str, str] | None = None) -> Path:
    """Where the tokens of ``server`` at ``url`` are kept (one file per server and URL)."""
    env = os.environ if env is None else env
    base = env.get("XDG_STATE_HOME") or str(Path(env.get("HOME") or Path.home()) / ".local/state")
    digest = hashlib.sha256(f"{server}\n{url}".encode()).hexdigest()[:16]
    return Path(base) / "agent-tui" / "mcp-oauth" / f"{digest}.json"


class FileTokenStorage:
    """The SDK's ``TokenStorage`` as a JSON file readable only by the user."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _read(self) -> dict[str, object]:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _write(self, key: str, value: object) -> None:
        data = self._read()
        data[key] = value
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(self.path.parent, 0o700)
        temporary = self.path.with_suffix(".tmp")
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            json.dump(data, handle)
        os.replace(temporary, self.path)

    async def get_tokens(self) -> OAuthToken | None:
        raw = self._read().get("tokens")
        return OAuthToken.model_validate(raw) if isinstance(raw, dict) else None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self._write("tokens", tokens.model_dump(mode="json", exclude_none=True))

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        raw = self._read().get("client_info")
        return OAuthClientInformationFull.model_validate(raw) if isinstance(raw, dict) else None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self._write("client_info", client_info.model_dump(mode="json", exclude_none=True))


class LoopbackCallback:
    """Listens on 127.0.0.1 for the browser's redirect back with the authorization code."""

    def __init__(self) -> None:
        self._server: asyncio.Server | None = None
        self._result: asyncio.Future[AuthorizationCodeResult] | None = None
        self.redirect_uri = ""

    async def start(self) -> str:
        self._result = asyncio.get_running_loop().create_future()
        self._server = await asyncio.start_server(self._on_connection, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.redirect_uri = f"http://127.0.0.1:{port}/callback"
        return self.redirect_uri

    async def _on_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        try:
            async with asyncio.timeout(10):
                line = await reader.readline()
                while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                    pass
            parts = line.decode("latin-1").split(" ")
            target = urlsplit(parts[1]) if len(parts) > 1 else urlsplit("/")
            query = parse_qs(target.query)
            code = query.get("code", [""])[0]
            if target.path != "/callback" or not code:
                writer.write(_NOT_FOUND)
                return
            if self._result is not None and not self._result.done():
                self._result.set_result(
                    AuthorizationCodeResult(code=code, state=query.get("state", [None])[0])
                )
            writer.write(_CALLBACK_PAGE)
        except (TimeoutError, OSError, ValueError):
            return
        finally:
            with contextlib.suppress(OSError):
                await writer.drain()
                writer.close()

    async def wait(self) -> AuthorizationCodeResult:
        assert self._result is not None, "start() first"
        return await asyncio.shield(self._result)

    async def aclose(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
