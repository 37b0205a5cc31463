"""`agent-tui run` in a real pseudo-terminal: it prompts for answers right there."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import time
from collections.abc import Iterator

import pytest

from runtime.providers.demo import NOTES_FILE
from tests.cli.harness import Cli

pytestmark = pytest.mark.slow

QUESTION_PROMPT = b"Answer (1-3 or text): "
APPROVAL_PROMPT = b"[r] deny with reason\r\n> "


class Terminal:
    """The master side of a pseudo-terminal running one command, read with deadlines."""

    def __init__(self, cli: Cli, *args: str) -> None:
        self.master, slave = os.openpty()
        self.proc = subprocess.Popen(
            cli.argv(*args),
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env={**cli.env, "TERM": "xterm"},
            cwd=cli.workspace,
            start_new_session=True,
        )
        os.close(slave)
        self.output = b""
        self._seen = 0

    def expect(self, marker: bytes, timeout: float = 30.0) -> bytes:
        """Read until ``marker`` appears after what earlier expects consumed."""
        deadline = time.monotonic() + timeout
        while marker not in self.output[self._seen :]:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"{marker!r} not seen; output so far:\n{self.text()}")
            ready, _, _ = select.select([self.master], [], [], remaining)
            if ready and not self._read():
                raise AssertionError(f"{marker!r} not seen before exit:\n{self.text()}")
        end = self.output.index(marker, self._seen) + len(marker)
        chunk = self.output[self._seen : end]
        self._seen = end
        return chunk

    def _read(self) -> bool:
        try:
            data = os.read(self.master, 65536)
        except OSError:  # EIO: the other side closed
            return False
        self.output += data
        return bool(data)

    def type(self, text: str) -> None:
        os.write(self.master, text.encode())

    def finish(self, timeout: float = 30.0) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.master], [], [], 0.5)
            if ready and not self._read():
                break
            if not ready and self.proc.poll() is not None:
                break
        return self.proc.wait(timeout=max(1.0, deadline - time.monotonic()))

    def text(self) -> str:
        return self.output.decode(errors="replace")

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        os.close(self.master)


@contextlib.contextmanager
def terminal(cli: Cli, *args: str) -> Iterator[Terminal]:
    term = Terminal(cli, *args)
    try:
        yield term
    finally:
        term.close()


def test_run_in_a_terminal_answers_the_question_and_the_approval_at_prompts(cli: Cli) -> None:
    with terminal(cli, "run", "summarise this folder", "--model", "demo:instant") as term:
        question = term.expect(QUESTION_PROMPT)
        assert b"What should the notes focus on?" in question
        assert b"1. A short overview" in question
        term.type("9\n")
        assert b"option 9 does not exist" in term.expect(QUESTION_PROMPT)
        term.type("2\n")

        approval = term.expect(APPROVAL_PROMPT)
        assert b"write_file" in approval
        assert b"+++ b/" + NOTES_FILE.encode() in approval
        assert not (cli.workspace / NOTES_FILE).exists()
        term.type("maybe\n")
        assert b"Please answer y, a, A, n or r." in term.expect(APPROVAL_PROMPT)
        term.type("y\n")

        assert term.finish() == 0, term.text()
    assert b"## Summary" in term.output
    assert b"The files, one by one" in term.output
    assert (cli.workspace / NOTES_FILE).exists()


def test_a_denial_with_a_reason_typed_at_the_prompt_reaches_the_agent(cli: Cli) -> None:
    with terminal(cli, "run", "summarise this folder", "--model", "demo:instant") as term:
        term.expect(QUESTION_PROMPT)
        term.type("1\n")
        term.expect(APPROVAL_PROMPT)
        term.type("r\n")
        term.expect(b"Reason (the agent sees it): ")
        term.type("not today\n")
        assert term.finish() == 0, term.text()
    assert b"not today" in term.output
    assert not (cli.workspace / NOTES_FILE).exists()


def test_ctrl_c_at_a_prompt_leaves_the_request_open_and_says_how_to_answer(cli: Cli) -> None:
    with terminal(cli, "run", "summarise this folder", "--model", "demo:instant") as term:
        term.expect(QUESTION_PROMPT)
        term.proc.send_signal(signal.SIGINT)
        assert term.finish() == 130, term.text()
    assert f"agent-tui --db {cli.db} respond".encode() in term.output
    runs = cli.run("runs", "--state", "input_required", "--json")
    assert runs.returncode == 0 and runs.stdout.count("\n") == 1
