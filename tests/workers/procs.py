"""Processes of the worker tests: their JSON lines collected by a thread, waited on with a
deadline; DB facts read with plain sqlite3, or asyncpg for a PostgreSQL URL (read-only
queries)."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import re
import signal
import sqlite3
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tests.cli.harness import Cli, agent_tui_command, hangup_as_in_a_terminal

Item = dict[str, Any]


class Proc:
    """A subprocess whose stdout JSON lines are read by a thread (so it never blocks on a
    full pipe); stderr goes to a file."""

    def __init__(
        self, argv: Sequence[str], *, cli: Cli, name: str, env: dict[str, str] | None = None
    ) -> None:
        self.name = name
        self.err_path = cli.root / f"{name}.err"
        self._err = self.err_path.open("w")
        self.proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._err,
            text=True,
            env=env or cli.env,
            cwd=cli.workspace,
            start_new_session=True,
            preexec_fn=hangup_as_in_a_terminal,
        )
        self.items: list[Item] = []
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.strip():
                with self._changed:
                    self.items.append(json.loads(line))
                    self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def wait_for(self, predicate: Callable[[Item], bool], *, timeout: float, start: int = 0) -> int:
        """The index of the first item from ``start`` on that satisfies ``predicate``."""
        deadline = time.monotonic() + timeout
        index = start
        with self._changed:
            while True:
                while index < len(self.items):
                    if predicate(self.items[index]):
                        return index
                    index += 1
                remaining = deadline - time.monotonic()
                if remaining <= 0 or (self.proc.poll() is not None and not self._reader.is_alive()):
                    raise AssertionError(
                        f"{self.name}: no matching line in time; last: {self.items[-3:]}; "
                        f"stderr: {self.stderr()[-2000:]}"
                    )
                self._changed.wait(remaining)

    def stderr(self) -> str:
        if not self._err.closed:
            self._err.flush()
        return self.err_path.read_text(errors="replace")

    def signal(self, sig: int) -> None:
        os.killpg(self.proc.pid, sig)

    def finish(self, *, timeout: float) -> int:
        try:
            code = self.proc.wait(timeout=timeout)
        finally:
            self.kill()
        return code

    def kill(self) -> None:
        if self._err.closed:
            return
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=10)
        self._reader.join(timeout=10)
        self._err.close()


def worker(cli: Cli, name: str, *args: str) -> Proc:
    return Proc(cli.argv("worker", "--json", *args), cli=cli, name=name)


def client(cli: Cli, name: str, workspace: Path, demo: int, stream: int, kib: int) -> Proc:
    argv = [
        *_python(),
        "-m",
        "tests.workers.client_process",
        str(cli.db),
        str(workspace),
        name,
        str(demo),
        str(stream),
        str(kib),
    ]
    env = {**cli.env, "PYTHONPATH": str(REPO)}
    return Proc(argv, cli=cli, name=name, env=env)


REPO = Path(__file__).resolve().parents[2]


def _python() -> list[str]:
    command = agent_tui_command()
    script = Path(command[0])
    return [str(script.parent / "python")] if script.name == "agent-tui" else [command[0]]


def query(db: Path | str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    """Rows of ``sql`` (``?`` placeholders) on the SQLite file or the PostgreSQL URL ``db``."""
    if isinstance(db, str):
        return _pg_query(db, sql, params)
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        return list(conn.execute(sql, params).fetchall())
    finally:
        conn.close()


def _pg_query(url: str, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    import asyncpg

    numbers = itertools.count(1)
    statement = re.sub(r"\?", lambda _: f"${next(numbers)}", sql)

    async def fetch() -> list[tuple[Any, ...]]:
        conn = await asyncpg.connect(url, server_settings={"search_path": "agent_tui"}, timeout=10)
        try:
            return [tuple(row) for row in await conn.fetch(statement, *params, timeout=10)]
        finally:
            await conn.close()

    # The tests calling this run inside an event loop: the query gets a loop of its own.
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, fetch()).result(timeout=30)


def ended_on_a_refusal(executor: Proc, cause: str, *, timeout: float = 60) -> str:
    """The one line a worker ended with (exit status 2) once the database refused it with an
    error naming ``cause``. Reporting that refusal as an outage to wait for fails at once."""
    deadline = time.monotonic() + timeout
    while (code := executor.proc.poll()) is None:
        waited = [
            item["text"]
            for item in list(executor.items)
            if item["kind"] == "worker_unreachable" and cause in item["text"]
        ]
        assert not waited, f"it waits for a refusal as for an outage: {waited[0]}"
        assert time.monotonic() < deadline, f"it never ended: {executor.stderr()[-2000:]}"
        time.sleep(0.1)
    executor.finish(timeout=10)
    assert code == 2, executor.stderr()
    [line] = executor.stderr().splitlines()
    assert line.startswith("agent-tui: error: ") and cause in line, line
    assert "cannot reach" not in line
    return line
