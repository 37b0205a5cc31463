"""``agent-tui events --follow --consumer NAME``: a script's durable consumer, killed with
``kill -9`` mid-stream and started again (DESIGN §15, issue 14 "must show")."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import time
from pathlib import Path

import pytest

from runtime.api import Runtime
from runtime.config import Config
from tests.cli.harness import Cli, LineStream, finish, json_lines, kill_hard

TIMEOUT = 60.0


async def _make_events(cli: Cli, runs: int, *, kib: int = 1) -> int:
    """Complete ``runs`` instant demo runs in this process, each answering ``kib`` KiB of
    text; the newest event's seq."""
    cli.db.parent.mkdir(parents=True, exist_ok=True)
    runtime = await Runtime.open(
        db_path=cli.db, workspace=cli.workspace, config=Config(), model="demo:instant", env={}
    )
    try:
        for number in range(runs):
            run = await runtime.start(f"/stream {kib + number % 2}")
            boundary = await runtime.wait(run.id, timeout=TIMEOUT)
            assert boundary.state.value == "completed"
        return await runtime.last_seq()
    finally:
        await runtime.close()


def _cursor(db: Path, name: str) -> int:
    with sqlite3.connect(db) as conn:
        row = conn.execute("SELECT cursor FROM consumers WHERE consumer_id = ?", (name,)).fetchone()
    assert row is not None
    return int(row[0])


def _seqs(lines: list[str], *, partial_last: bool = False) -> list[int]:
    """The events of whole JSON lines; the last line may be cut off by the kill (a line half
    written is not an event delivered)."""
    if partial_last and lines:
        try:
            json.loads(lines[-1])
        except json.JSONDecodeError:
            lines = lines[:-1]
    return [int(item["seq"]) for item in json_lines("\n".join(lines))]


async def test_a_consumer_killed_mid_stream_resumes_after_its_last_acknowledged_event(
    cli: Cli,
) -> None:
    # About 200 KiB of JSON lines: once this test stops reading, the consumer fills its pipe
    # (64 KiB) and waits in a write, mid-stream, until the kill.
    first_batch = await _make_events(cli, 14, kib=8)

    consumer = cli.spawn("events", "--follow", "--consumer", "bot", "--json")
    stream = LineStream(consumer)
    deadline = time.monotonic() + TIMEOUT
    printed = [stream.readline(deadline) for _ in range(10)]
    assert all(line is not None for line in printed)

    # While it runs, the name is taken: a second process is refused, one clear line, exit 2.
    second = cli.run("events", "--follow", "--consumer", "bot", timeout=TIMEOUT)
    assert second.returncode == 2
    assert "already active" in second.stderr and "Traceback" not in second.stderr

    os.killpg(consumer.pid, signal.SIGKILL)  # kill -9, mid-stream: it had more to print
    consumer.wait(timeout=TIMEOUT)
    first_seqs = _seqs([*stream.lines, *stream.rest(timeout=5)], partial_last=True)
    kill_hard(consumer)  # closes its pipes
    acknowledged = _cursor(cli.db, "bot")
    assert first_seqs == list(range(1, len(first_seqs) + 1))  # in order, none missing
    assert first_seqs[-1] < first_batch
    # Each event is acknowledged right after it is printed: at most one printed, not acked.
    assert first_seqs[-1] - 1 <= acknowledged <= first_seqs[-1]

    restarted = cli.spawn("events", "--follow", "--consumer", "bot", "--json")
    again = LineStream(restarted)
    newest = await _make_events(cli, 2)  # more events while it follows
    seen = again.json_until(lambda item, _: item["seq"] == newest, timeout=TIMEOUT)
    restarted.send_signal(signal.SIGTERM)
    code, _, err = finish(restarted, timeout=TIMEOUT)
    assert code == 0, err

    second_seqs = [int(item["seq"]) for item in seen]
    assert second_seqs[0] == acknowledged + 1  # resumes right after the acknowledged event
    assert second_seqs == list(range(acknowledged + 1, newest + 1))
    duplicates = sorted(set(first_seqs) & set(second_seqs))
    assert duplicates == list(range(acknowledged + 1, first_seqs[-1] + 1))
    assert len(duplicates) <= 1
    assert sorted(set(first_seqs) | set(second_seqs)) == list(range(1, newest + 1))
    assert _cursor(cli.db, "bot") == newest


async def test_events_without_follow_print_the_log_and_a_consumer_needs_follow(cli: Cli) -> None:
    newest = await _make_events(cli, 1)
    listed = cli.run("events", "--json", "--after", "2", timeout=TIMEOUT)
    assert listed.returncode == 0, listed.stderr
    assert [item["seq"] for item in json_lines(listed.stdout)] == list(range(3, newest + 1))
    plain = cli.run("events", timeout=TIMEOUT)
    assert plain.stdout.splitlines()[0].startswith("1 run_state_changed run ")

    refused = cli.run("events", "--consumer", "bot", timeout=TIMEOUT)
    assert refused.returncode == 2
    assert "--consumer needs --follow" in refused.stderr
    with sqlite3.connect(cli.db) as conn:
        assert conn.execute("SELECT count(*) FROM consumers").fetchone()[0] == 0


@pytest.mark.parametrize("consumer", [[], ["--consumer", "bot"]], ids=["plain", "consumer"])
async def test_following_from_past_the_end_of_the_log_is_one_line_and_exit_2(
    cli: Cli, consumer: list[str]
) -> None:
    """A review found ``events --follow --after 500`` on a log of a few events saying "cannot
    reach the database (event cursor 500 is outside the log …)" and "the database answers
    again" every half second, for ever: only a server that cannot be reached is waited for."""
    newest = await _make_events(cli, 1)
    after = str(newest + 500)
    result = cli.run("events", "--follow", "--after", after, *consumer, timeout=TIMEOUT)
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith("agent-tui: error: ") and after in line
    assert "cannot reach" not in line


async def test_a_follower_goes_on_when_the_job_of_the_newest_events_is_deleted(cli: Cli) -> None:
    """Found by a trial of several processes on one database: `agent-tui archive JOB` then
    `agent-tui delete JOB --yes` of the job updated last, while `events --follow` ran in another
    shell: it ended, "event cursor N is outside the log (last event is M)" (the deletion took
    the job's events, the newest ones, with it)."""
    first = await _make_events(cli, 1)
    follower = cli.spawn("events", "--follow", "--json", "--after", str(first))
    stream = LineStream(follower)
    try:
        newest = await _make_events(cli, 1)  # the job to delete, its events the newest
        stream.json_until(lambda item, seen: item["seq"] == newest, timeout=TIMEOUT)
        [job] = [r["job_id"] for r in json_lines(cli.run("runs", "--json", "--limit", "1").stdout)]
        for command in (("archive", job), ("delete", job, "--yes")):
            done = cli.run(*command, timeout=TIMEOUT)
            assert done.returncode == 0, done.stderr
        # What the follower reads next (after the archive's event, deleted too): nothing yet.
        listed = cli.run("events", "--json", "--after", str(newest + 1), timeout=TIMEOUT)
        assert (listed.returncode, listed.stdout, listed.stderr) == (0, "", "")
        after = await _make_events(cli, 1)
        seen = stream.json_until(lambda item, seen: item["seq"] == after, timeout=TIMEOUT)
        assert all(item["seq"] > newest for item in seen)
        assert follower.poll() is None
    finally:
        kill_hard(follower)
