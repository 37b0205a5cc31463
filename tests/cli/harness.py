"""Running the installed ``agent-tui`` command as a subprocess, bounded in time.

Every test gets its own database, workspace, HOME and XDG folders under tmp, and an environment
with no API keys, so the offline demo model is used and nothing reaches the network.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

DEFAULT_TIMEOUT = 60.0
SCRUBBED_ENV = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_AUTH_TOKEN",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "AGENT_TUI_DB",
    "AGENT_TUI_MODEL",
    "MCP_TIMEOUT",
)


def agent_tui_command() -> list[str]:
    """The installed console script next to this interpreter, else ``python -m tui.cli``."""
    script = Path(sys.executable).parent / "agent-tui"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "tui.cli"]


@dataclass
class Cli:
    """One test's installation: a database, a workspace and a clean environment."""

    root: Path
    workspace: Path
    db: Path
    env: dict[str, str] = field(default_factory=dict)

    @classmethod
    def create(cls, root: Path, workspace: Path) -> Cli:
        home = root / "home"
        for sub in ("", ".config", ".local/share", ".cache"):
            (home / sub).mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if k not in SCRUBBED_ENV}
        env.update(
            HOME=str(home),
            XDG_CONFIG_HOME=str(home / ".config"),
            XDG_DATA_HOME=str(home / ".local/share"),
            XDG_CACHE_HOME=str(home / ".cache"),
            PYTHONUNBUFFERED="1",
            NO_COLOR="1",
            COLUMNS="120",
        )
        return cls(root=root, workspace=workspace, db=root / "data" / "agent-tui.db", env=env)

    def make_database(self) -> None:
        """An empty agent-tui database at ``db`` (a command that only looks creates none)."""
        from runtime.store.migrations import migrate

        self.db.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.db, isolation_level=None)
        try:
            migrate(conn, path=str(self.db))
        finally:
            conn.close()

    def argv(self, *args: str, global_options: bool = True) -> list[str]:
        options = ["--db", str(self.db), "--workspace", str(self.workspace)]
        return [*agent_tui_command(), *(options if global_options else []), *args]

    def run(
        self,
        *args: str,
        timeout: float = DEFAULT_TIMEOUT,
        input: str | None = None,
        global_options: bool = True,
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.argv(*args, global_options=global_options),
            input=input,
            stdin=None if input is not None else subprocess.DEVNULL,
            capture_output=True,
            text=True,
            env=self.env,
            cwd=self.workspace,
            timeout=timeout,
            check=False,
        )

    def spawn(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self.argv(*args),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=self.env,
            cwd=self.workspace,
            start_new_session=True,
            preexec_fn=hangup_as_in_a_terminal,
        )


def hangup_as_in_a_terminal() -> None:
    """In a child, before it runs: SIGHUP at its default action, as a program started from a
    terminal has it, whatever the tests run under (``nohup``, which agent-tui respects by
    leaving SIGHUP ignored, so the tests of what a hangup does must not inherit it)."""
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def json_lines(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


class LineStream:
    """Lines of a subprocess's stdout read with a deadline (raw reads, so no hidden buffer)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        self.proc = proc
        self._fd = proc.stdout.fileno()
        self._buffer = b""
        self.eof = False
        self.lines: list[str] = []

    def readline(self, deadline: float) -> str | None:
        """The next line, or None at end of output; AssertionError after the deadline."""
        while b"\n" not in self._buffer and not self.eof:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no output line in time; last lines: {self.lines[-3:]}")
            ready, _, _ = select.select([self._fd], [], [], remaining)
            if ready:
                chunk = os.read(self._fd, 65536)
                if chunk:
                    self._buffer += chunk
                else:
                    self.eof = True
        if not self._buffer:
            return None
        line, _, self._buffer = self._buffer.partition(b"\n")
        text = line.decode()
        self.lines.append(text)
        return text

    def json_until(self, stop: Any, *, timeout: float = DEFAULT_TIMEOUT) -> list[dict[str, Any]]:
        """JSON lines until ``stop(item, seen)`` is true (AssertionError if output ends first)."""
        deadline = time.monotonic() + timeout
        seen: list[dict[str, Any]] = []
        while True:
            line = self.readline(deadline)
            if line is None:
                raise AssertionError(f"output ended before the expected line; saw {seen[-3:]}")
            if not line.strip():
                continue
            item = json.loads(line)
            seen.append(item)
            if stop(item, seen):
                return seen

    def rest(self, *, timeout: float = DEFAULT_TIMEOUT) -> list[str]:
        deadline = time.monotonic() + timeout
        rest: list[str] = []
        while (line := self.readline(deadline)) is not None:
            rest.append(line)
        return rest


def kill_hard(proc: subprocess.Popen[str]) -> None:
    """SIGKILL the process (and its session), then reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=10)
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


def finish(proc: subprocess.Popen[str], timeout: float = DEFAULT_TIMEOUT) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_hard(proc)
        raise
    return proc.returncode, out, err


def boundary_of(lines: Sequence[dict[str, Any]]) -> dict[str, Any]:
    assert lines, "no output"
    last = lines[-1]
    assert last["kind"] == "boundary", f"last line is not the boundary: {last}"
    return last


def folder_state(folder: Path) -> dict[str, bytes | None]:
    """Every entry under ``folder`` with the bytes of its files (None for a folder)."""
    if not folder.exists():
        return {}
    return {
        str(path.relative_to(folder)): None if path.is_dir() else path.read_bytes()
        for path in sorted(folder.rglob("*"))
    }


def read_only(cli: Cli, *paths: Path, by: str | None = None) -> list[str]:
    """Make ``paths`` unwritable for the command; returns a prefix for its argv.

    ``by="mount"``: a read-only bind mount (bubblewrap), as a backup on read-only media is.
    ``by="permissions"``: file modes, as a folder of another user is; root ignores them, so as
    root the command runs as an unprivileged user of its own user namespace (bubblewrap), who
    owns the files as root did and is held by their modes. Unsaid: the mount as root, the modes
    otherwise (whichever needs nothing more)."""
    if by is None:
        by = "mount" if os.geteuid() == 0 else "permissions"
    if by == "permissions" and os.geteuid() != 0:
        for path in paths:
            path.chmod(0o555 if path.is_dir() else 0o444)
        return []
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        pytest.skip(f"no bwrap: no way to make a folder read-only by {by} here")
    if by == "permissions":
        for path in paths:
            path.chmod(0o555 if path.is_dir() else 0o444)
        return [bwrap, "--unshare-user", "--uid", "1000", "--gid", "1000", "--dev-bind", "/", "/"]
    prefix = [bwrap, "--dev-bind", "/", "/"]
    for path in paths:
        prefix += ["--ro-bind", str(path), str(path)]
    return prefix


def run_cli(cli: Cli, prefix: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*prefix, *cli.argv(*args)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=cli.env,
        cwd=cli.workspace,
        timeout=60,
        check=False,
    )


def assert_one_line_error(result: subprocess.CompletedProcess[str], *words: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("agent-tui: error: ")
    assert "Traceback" not in result.stderr
    for word in words:
        assert word in result.stderr, result.stderr
