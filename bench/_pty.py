"""A program in a real pseudo-terminal, for benchmarks that time what a person sees: bytes go in
through the terminal and frames are read back as they are written."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import select
import signal
import statistics
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FRAME_BYTES = 200
"""Writes at least this big are frames; a blinking cursor or a single cell is less."""
PYTHON = sys.executable

_ESCAPE = re.compile(
    rb"\x1b\[[0-9;?<>=$]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][0-9A-Za-z]"
)


def _in_escape(data: bytearray, index: int) -> bool:
    """Whether the byte at ``index`` is part of an escape sequence (looks back a little)."""
    start = data.rfind(b"\x1b", max(0, index - 64), index + 1)
    if start == -1:
        return False
    match = _ESCAPE.match(bytes(data[start : index + 64]))
    return match is not None and start + match.end() > index


def plain(data: bytes) -> str:
    """Terminal output without escape sequences (what it spells, not where)."""
    return _ESCAPE.sub(b"", data).decode("utf-8", "replace")


class Pty:
    """``argv`` running on a pty of ``size`` (columns, rows); output is collected as it comes."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        size: tuple[int, int] = (120, 40),
    ) -> None:
        master, slave = os.openpty()
        columns, rows = size
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        environment = dict(os.environ if env is None else env)
        environment.setdefault("TERM", "xterm-256color")
        environment.setdefault("COLORTERM", "truecolor")
        # A person's Python reads and writes bytecode caches; without them every launch would
        # compile the program from source (this sandbox sets PYTHONDONTWRITEBYTECODE).
        environment.pop("PYTHONDONTWRITEBYTECODE", None)
        self.started = time.perf_counter()
        self.process = subprocess.Popen(
            list(argv),
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=environment,
            cwd=cwd,
            start_new_session=True,
            close_fds=True,
        )
        os.close(slave)
        self.fd = master
        self.data = bytearray()
        self.last_output = self.started
        self.last_frame = self.started
        """When the last write of at least ``FRAME_BYTES`` came (a cursor blink is smaller)."""

    @property
    def pid(self) -> int:
        return self.process.pid

    def _pump(self, timeout: float) -> bool:
        """Read what is there (waiting up to ``timeout``); False once the program is gone."""
        ready, _, _ = select.select([self.fd], [], [], max(timeout, 0))
        if not ready:
            return True
        try:
            chunk = os.read(self.fd, 1 << 16)
        except OSError:
            return False
        if not chunk:
            return False
        self.data += chunk
        self.last_output = time.perf_counter()
        if len(chunk) >= FRAME_BYTES:
            self.last_frame = self.last_output
        return True

    def read_for(self, seconds: float) -> None:
        """Collect output for ``seconds``."""
        deadline = time.perf_counter() + seconds
        while (remaining := deadline - time.perf_counter()) > 0:
            if not self._pump(min(remaining, 0.05)):
                return

    def wait_for(self, predicate: Callable[[bytes], bool], *, timeout: float = 60) -> float:
        """Read until ``predicate(all output so far)``; the time it first held (perf_counter)."""
        deadline = time.perf_counter() + timeout
        while not predicate(bytes(self.data)):
            if time.perf_counter() > deadline:
                tail = plain(bytes(self.data[-2000:]))
                raise TimeoutError(f"no match within {timeout} s; output ends with {tail!r}")
            if not self._pump(0.05) and not predicate(bytes(self.data)):
                raise RuntimeError(f"the program ended: {plain(bytes(self.data[-2000:]))!r}")
        return self.last_output

    def wait_for_text(self, text: str, *, since: int = 0, timeout: float = 60) -> float:
        """Read until ``text`` is written (as printed characters, not inside an escape
        sequence) after offset ``since``; the time it came. Only new output is searched, so
        this keeps up with a program that writes megabytes."""
        needle = text.encode()
        deadline = time.perf_counter() + timeout
        start = since
        while True:
            found = self.data.find(needle, start)
            while found != -1 and _in_escape(self.data, found):
                found = self.data.find(needle, found + 1)
            if found != -1:
                return self.last_output
            start = max(since, len(self.data) - len(needle) - 32)
            if time.perf_counter() > deadline:
                tail = plain(bytes(self.data[-2000:]))
                raise TimeoutError(f"no {text!r} within {timeout} s; output ends with {tail!r}")
            if not self._pump(0.05):
                raise RuntimeError(f"the program ended: {plain(bytes(self.data[-2000:]))!r}")

    def settle(self, quiet: float = 0.3, *, timeout: float = 60) -> float:
        """Read until no frame is written for ``quiet`` seconds (a blinking cursor does not
        count); the time of the last frame."""
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            remaining = self.last_frame + quiet - time.perf_counter()
            if remaining <= 0:
                return self.last_frame
            if not self._pump(min(remaining, 0.05)):
                return self.last_frame
        raise TimeoutError(f"still drawing after {timeout} s")

    def send(self, data: bytes | str) -> float:
        """Write ``data`` to the terminal as typed keys; the time it was sent."""
        os.write(self.fd, data.encode() if isinstance(data, str) else data)
        return time.perf_counter()

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.send(b"\x11")  # ctrl+q
        try:
            # Keep reading while it quits: a program whose last frames fill the terminal's
            # buffer would otherwise block writing them and never exit.
            deadline = time.perf_counter() + 10
            while self.process.poll() is None and time.perf_counter() < deadline:
                if not self._pump(0.05):
                    break
            self.process.wait(timeout=max(0.1, deadline - time.perf_counter()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)
        with contextlib.suppress(OSError):
            os.close(self.fd)

    def __enter__(self) -> Pty:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return (
        f"machine load {one:.2f} / {five:.2f} / {fifteen:.2f} (1/5/15 min, {os.cpu_count()} CPUs)"
    )


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def spread(values: Sequence[float], scale: float = 1000, unit: str = "ms") -> str:
    return (
        f"median {median(values) * scale:8.1f} {unit}"
        f"  (min {min(values) * scale:.1f}, max {max(values) * scale:.1f}, n={len(values)})"
    )


def compile_tree(tree: Path) -> None:
    """Write the bytecode caches of ``tree``'s packages, as ``make run`` and ``make install``
    do, so that no figure includes compiling agent-tui from source (both trees alike)."""
    subprocess.run(
        [PYTHON, "-m", "compileall", "-q", *(str(tree / p) for p in ("tui", "runtime", "themes"))],
        check=True,
        stdout=subprocess.DEVNULL,
    )


def agent_tui(tree: Path, *, probe: Path | None = None) -> list[str]:
    """The command line of agent-tui from the source tree ``tree`` (this one or another);
    ``probe``: with ``loop_probe`` watching its event loop, reporting to that file at exit."""
    watch = (
        ""
        if probe is None
        else f"sys.path.insert(0, {str(ROOT / 'bench')!r}); import loop_probe; "
        f"loop_probe.install({str(probe)!r}); "
    )
    return [
        PYTHON,
        "-c",
        f"import sys; sys.path.insert(0, {str(tree)!r}); {watch}"
        "from tui.cli import main; sys.exit(main())",
    ]
