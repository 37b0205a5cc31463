"""The published reference MCP servers (npm), installed into the git-ignored ``.mcp-npm``.

``make test`` installs them (``make mcp-servers``); a test run without them installs them once
itself when npm is there, and the tests skip, saying why, only when npm cannot be had.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from runtime.config import StdioServerConfig
from tests.fakes.mcp_servers import unused_port

ROOT = Path(__file__).resolve().parents[2]
NPM_DIR = ROOT / ".mcp-npm"
PACKAGES = {
    "everything": "@modelcontextprotocol/server-everything@2026.8.31",
    "filesystem": "@modelcontextprotocol/server-filesystem@2026.8.31",
}
BINARIES = {"everything": "mcp-server-everything", "filesystem": "mcp-server-filesystem"}


def binary(name: str) -> Path:
    """The installed server's executable; installs the servers or skips when npm is missing."""
    path = NPM_DIR / "node_modules" / ".bin" / BINARIES[name]
    if path.exists():
        return path
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        pytest.skip(
            "node/npm are not installed (apt-get install nodejs npm; then make mcp-servers)"
        )
    result = subprocess.run(
        [
            npm,
            "install",
            "--silent",
            "--no-audit",
            "--no-fund",
            "--prefix",
            str(NPM_DIR),
            *PACKAGES.values(),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if result.returncode != 0 or not path.exists():
        pytest.skip(f"npm could not install the published MCP servers: {result.stderr[-300:]}")
    return path


def stdio(name: str, *args: str, timeout: float = 60.0) -> StdioServerConfig:
    command = binary(name)
    return StdioServerConfig(command=str(command), args=list(args), timeout=timeout)


class HttpServer:
    """server-everything over streamable HTTP on a loopback port; can be restarted."""

    def __init__(self, transport: str = "streamableHttp") -> None:
        self.command = str(binary("everything"))
        self.transport = transport
        self.port = unused_port()
        self.process: subprocess.Popen[bytes] | None = None
        path = "/mcp" if transport == "streamableHttp" else "/sse"
        self.url = f"http://127.0.0.1:{self.port}{path}"

    def start(self, ready_timeout: float = 60.0) -> None:
        env = os.environ | {"PORT": str(self.port)}
        self.process = subprocess.Popen(
            [self.command, self.transport],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        assert self.process.stderr is not None
        deadline = time.monotonic() + ready_timeout
        seen = b""
        while time.monotonic() < deadline:
            line = self.process.stderr.readline()
            if not line:
                break
            seen += line
            if b"listening on port" in line.lower() or b"running on port" in line.lower():
                # Keep reading its log so a full pipe never blocks the server.
                threading.Thread(target=self.process.stderr.read, daemon=True).start()
                return
        self.stop()
        raise RuntimeError(f"server-everything did not start: {seen.decode(errors='replace')}")

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
        if self.process.stderr is not None:
            self.process.stderr.close()
        self.process = None


@contextmanager
def http_server(transport: str = "streamableHttp") -> Iterator[HttpServer]:
    server = HttpServer(transport)
    server.start()
    try:
        yield server
    finally:
        server.stop()
