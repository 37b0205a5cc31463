"""Crash recovery end to end: `kill -9` a real `agent-tui run`, reopen the database, resume.

The demo model (`demo`, not `demo:instant`) streams at reading speed, so a kill lands mid-stream;
a workspace with many files makes its search tool run long enough to be killed mid-tool.
"""

from __future__ import annotations

import asyncio
import json
import signal
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from runtime.api import Runtime
from runtime.config import Config
from runtime.events import RunNoted
from runtime.models import Message, Run, RunState, ToolCall, ToolCallState
from runtime.providers.demo import NOTES_FILE
from runtime.store.sqlite import SqliteStore
from tests.cli.harness import Cli, LineStream, boundary_of, json_lines, kill_hard

pytestmark = pytest.mark.slow

PROMPT = "summarise this folder"


class Snapshot:
    def __init__(
        self,
        run: Run,
        messages: list[Message],
        calls: list[ToolCall],
        drafts: dict[str, str],
        notes: list[RunNoted],
        streamed_chars: dict[str, int],
    ) -> None:
        self.run = run
        self.messages = messages
        self.calls = calls
        self.drafts = drafts
        self.notes = notes
        self.streamed_chars = streamed_chars
        """Per draft, the characters of text and thinking it holds."""


def snapshot(db: Path, run_id: str) -> Snapshot:
    """The run as stored, read with the store alone (no runtime: nothing is recovered)."""

    async def read() -> Snapshot:
        store = SqliteStore(db)
        await store.open()
        try:
            run = await store.get_run(run_id)
            messages = await store.list_messages(run_id, limit=10_000)
            calls = await store.list_tool_calls(run_id)
            saved = await store.get_drafts(run_id)
            drafts = {d.message_id: d.text for d in saved}
            chars = {d.message_id: len(d.text) + len(d.thinking) for d in saved}
            notes = await store.list_notes(run_ids=[run_id])
            return Snapshot(run, messages, calls, drafts, notes, chars)
        finally:
            await store.close()

    return asyncio.run(read())


def assert_transcript_is_paired(db: Path, run_id: str) -> None:
    """Every tool_use of the run has exactly one tool_result, and every call has ended."""
    stored = snapshot(db, run_id)
    uses = [u.id for m in stored.messages for u in m.tool_uses]
    results = Counter(r.tool_use_id for m in stored.messages for r in m.tool_results)
    assert uses, "the run called no tools"
    for use_id in uses:
        assert results[use_id] == 1, f"tool_use {use_id} has {results[use_id]} results"
    assert set(results) == set(uses)
    assert all(call.state.is_terminal for call in stored.calls)


def answer_until_done(cli: Cli, run_id: str, boundary: dict[str, Any]) -> dict[str, Any]:
    """Answer each request (first option, allow) until the run ends; returns the last boundary."""
    for _ in range(6):
        if boundary["state"] != "input_required":
            return boundary
        answer = "1" if boundary["request"]["kind"] == "question" else "allow"
        result = cli.run("respond", boundary["request"]["run_id"], answer, "--json")
        assert result.returncode in (0, 3), result.stderr
        boundary = boundary_of(json_lines(result.stdout))
    raise AssertionError(f"run {run_id} did not finish: {boundary}")


def recover_and_show(cli: Cli, run_id: str) -> dict[str, Any]:
    """Recover dead owners (what a process that may execute does when it opens the database:
    `show` itself only reads and never recovers), then show the run."""
    asyncio.run(_open_and_close(cli))
    shown = cli.run("show", run_id, "--json")
    assert shown.returncode == 0, shown.stderr
    data: dict[str, Any] = json.loads(shown.stdout)
    return data


async def _open_and_close(cli: Cli) -> None:
    runtime = await Runtime.open(
        db_path=cli.db, workspace=cli.workspace, config=Config(), model="demo", env={}
    )
    await runtime.close()


def _interrupted_run_ids(cli: Cli) -> list[str]:
    """`agent-tui runs --state interrupted`: the runs a crash stopped that nobody retried."""
    listed = cli.run("runs", "--state", "interrupted", "--json")
    assert listed.returncode == 0, listed.stderr
    return [row["id"] for row in json_lines(listed.stdout)]


def retry_to_completion(cli: Cli, run_id: str, *flags: str) -> str:
    retried = cli.run("retry", run_id, *flags, "--json")
    assert retried.returncode in (0, 3), retried.stderr
    boundary = answer_until_done(cli, run_id, boundary_of(json_lines(retried.stdout)))
    assert boundary["state"] == "completed", boundary
    final_run_id: str = boundary["run_id"]
    return final_run_id


def test_kill_mid_stream_keeps_committed_messages_and_the_draft_then_retry_finishes(
    cli: Cli,
) -> None:
    proc = cli.spawn("run", PROMPT, "--model", "demo", "--json")
    stream = LineStream(proc)
    try:
        seen = stream.json_until(
            lambda item, lines: (
                sum(1 for e in lines if e["kind"] == "message_delta" and not e["thinking"]) >= 25
            )
        )
    finally:
        kill_hard(proc)
    run_id = seen[0]["run_id"]
    deltas = [e for e in seen if e["kind"] == "message_delta" and not e["thinking"]]
    streaming_id = deltas[0]["message_id"]
    streamed = "".join(e["text"] for e in deltas if e["message_id"] == streaming_id)
    committed = [e["message"] for e in seen if e["kind"] == "message_committed"]

    before = snapshot(cli.db, run_id)
    assert before.run.state is RunState.RUNNING
    stored_ids = [m.id for m in before.messages]
    assert [m["id"] for m in committed] == stored_ids[: len(committed)]
    assert streaming_id not in stored_ids, "the streamed message was not cut short"
    draft = before.drafts.get(streaming_id, "")
    assert draft, "no draft was flushed while the message streamed"
    assert streamed.startswith(draft) or draft.startswith(streamed)

    recovered = recover_and_show(cli, run_id)
    assert recovered["run"]["state"] == "queued"
    assert recovered["run"]["interrupted"] is True
    assert [m["id"] for m in recovered["messages"]] == stored_ids
    # What it had streamed counts in the totals as an answer cut short by Esc does: its output
    # estimated from the saved draft (the model's own figures died with the process), noted.
    estimate = -(-before.streamed_chars[streaming_id] // 4)
    counted = before.run.usage.output_tokens + estimate
    assert recovered["run"]["usage"]["output_tokens"] == counted
    assert recovered["job"]["usage"]["output_tokens"] == counted
    [noted] = [n for n in snapshot(cli.db, run_id).notes if n.note == "cut_short"]
    assert noted.data["message_id"] == streaming_id and noted.data["output_tokens"] == estimate
    assert f"about {estimate:,} tokens" in noted.text
    recover_and_show(cli, run_id)  # opened again: counted once
    assert snapshot(cli.db, run_id).run.usage.output_tokens == counted
    assert _interrupted_run_ids(cli) == [run_id]
    # The table says what the TUI says: it waits for a person, it does not start by itself.
    table = cli.run("runs", "--state", "interrupted")
    assert "interrupted (waits for retry)" in table.stdout and "queued" not in table.stdout

    final_run_id = retry_to_completion(cli, run_id)
    assert final_run_id == run_id
    assert _interrupted_run_ids(cli) == []
    # The run went on and finished; what the killed attempt had shown is still shown with it,
    # where it was cut short: before the first message the retry committed.
    shown = cli.run("show", run_id, "--json")
    [kept] = json.loads(shown.stdout)["kept_partial_answers"]
    assert (kept["text"], kept["before_position"]) == (draft, len(stored_ids))
    text = cli.run("show", run_id).stdout
    cut_at = text.index("[partial] assistant (partial answer — cut short when its process stopped")
    assert text.index(f"[{len(stored_ids) - 1}] ") < cut_at < text.index(f"[{len(stored_ids)}] ")
    assert text.index(draft.splitlines()[0]) > cut_at
    nothing = cli.run("runs", "--state", "interrupted")
    assert (nothing.returncode, nothing.stdout) == (0, "")
    assert "No interrupted runs" in nothing.stderr
    assert_transcript_is_paired(cli.db, run_id)
    assert (cli.workspace / NOTES_FILE).exists()


def _many_files(workspace: Path, count: int = 2000) -> None:
    data = workspace / "data"
    data.mkdir()
    for index in range(count):
        (data / f"part-{index:04d}.txt").write_text(f"record {index}\n" * 40)


def test_kill_while_a_read_only_tool_runs_requeues_the_run_and_reruns_the_tool(cli: Cli) -> None:
    _many_files(cli.workspace)
    proc = cli.spawn("run", PROMPT, "--model", "demo:instant", "--json")
    stream = LineStream(proc)
    try:
        seen = stream.json_until(
            lambda item, lines: sum(1 for e in lines if e["kind"] == "tool_progress") >= 20
        )
    finally:
        kill_hard(proc)
    run_id = seen[0]["run_id"]

    before = snapshot(cli.db, run_id)
    search = next(c for c in before.calls if c.name == "search")
    assert search.state is ToolCallState.RUNNING
    assert search.idempotent

    recovered = recover_and_show(cli, run_id)
    assert recovered["run"]["state"] == "queued"
    assert recovered["run"]["interrupted"] is True
    calls = {c["id"]: c for c in recovered["tool_calls"]}
    assert calls[search.id]["state"] == "pending"

    retry_to_completion(cli, run_id)
    after = snapshot(cli.db, run_id)
    assert next(c for c in after.calls if c.id == search.id).state is ToolCallState.COMPLETED
    assert_transcript_is_paired(cli.db, run_id)


def test_kill_around_a_file_write_fails_or_requeues_as_the_write_state_says(cli: Cli) -> None:
    first = cli.run("run", PROMPT, "--model", "demo:instant", "--json")
    run_id = boundary_of(json_lines(first.stdout))["run_id"]
    assert cli.run("respond", run_id, "1").returncode == 3

    proc = cli.spawn("respond", run_id, "allow", "--json")
    stream = LineStream(proc)
    try:
        stream.json_until(
            lambda item, lines: (
                item["kind"] == "tool_state_changed"
                and item["name"] == "write_file"
                and item["to"] == "running"
            )
        )
    finally:
        kill_hard(proc)

    before = snapshot(cli.db, run_id)
    write = next(c for c in before.calls if c.name == "write_file")
    recovered = recover_and_show(cli, run_id)
    if before.run.state is RunState.RUNNING and write.state is ToolCallState.RUNNING:
        # The write may or may not have happened: the run fails and waits for a person.
        assert recovered["run"]["state"] == "failed"
        assert recovered["run"]["failure"]["code"] == "tool_indeterminate"
        # Retry must choose what to do with the unknown write: here, run it again.
        final_run_id = retry_to_completion(cli, run_id, "--rerun")
        assert final_run_id != run_id
        assert_transcript_is_paired(cli.db, final_run_id)
    elif before.run.state is RunState.RUNNING:
        assert recovered["run"]["state"] == "queued"
        assert recovered["run"]["interrupted"] is True
        retry_to_completion(cli, run_id)
        assert_transcript_is_paired(cli.db, run_id)
    else:
        assert recovered["run"]["state"] == before.run.state.value
    assert (cli.workspace / NOTES_FILE).exists()


def _signalled_while_it_streams(cli: Cli, signum: signal.Signals) -> tuple[str, int, str]:
    """``run`` sent ``signum`` once its answer streams: its run id, exit status and stderr."""
    proc = cli.spawn("run", PROMPT, "--model", "demo", "--json")
    stream = LineStream(proc)
    try:
        seen = stream.json_until(lambda item, lines: item["kind"] == "message_delta")
        proc.send_signal(signum)
        stream.rest(timeout=30)
        code = proc.wait(timeout=30)
        assert proc.stderr is not None
        stderr = proc.stderr.read()
    finally:
        if proc.poll() is None:
            kill_hard(proc)
    return seen[0]["run_id"], code, stderr


def test_ctrl_c_during_a_run_keeps_it_recoverable_and_says_how_to_resume(cli: Cli) -> None:
    run_id, code, stderr = _signalled_while_it_streams(cli, signal.SIGINT)
    assert code == 130
    assert f"agent-tui --db {cli.db} retry {run_id}" in stderr
    assert "Traceback" not in stderr

    recovered = recover_and_show(cli, run_id)
    assert recovered["run"]["state"] == "queued"
    assert recovered["run"]["interrupted"] is True
    retry_to_completion(cli, run_id)
    assert_transcript_is_paired(cli.db, run_id)


def test_sigterm_during_a_run_releases_it_as_interrupted_and_says_how_to_resume(cli: Cli) -> None:
    """``kill PID`` (or ``timeout``) ended the process on the spot: the run read "running (its
    process is gone)" until another agent-tui recovered it, and nothing said how to go on."""
    run_id, code, stderr = _signalled_while_it_streams(cli, signal.SIGTERM)
    assert code == 128 + signal.SIGTERM
    assert f"agent-tui: terminated. Run {run_id} stays recoverable" in stderr
    assert f"agent-tui --db {cli.db} retry {run_id}" in stderr
    assert "Traceback" not in stderr

    # Released by the process itself: no other agent-tui had to find it gone.
    shown = cli.run("show", run_id, "--json")
    assert shown.returncode == 0, shown.stderr
    details = json.loads(shown.stdout)
    assert (details["run"]["state"], details["run"]["interrupted"]) == ("queued", True)
    assert details["owner_gone"] is False
    retry_to_completion(cli, run_id)
    assert_transcript_is_paired(cli.db, run_id)


def test_sighup_during_a_run_releases_it_as_interrupted_as_sigterm_does(cli: Cli) -> None:
    """SIGHUP (the terminal closed) kept its default action, which ended the process on the
    spot as SIGTERM's did: the run read "running (its process is gone)"."""
    run_id, code, stderr = _signalled_while_it_streams(cli, signal.SIGHUP)
    assert code == 128 + signal.SIGHUP
    assert f"agent-tui: hung up. Run {run_id} stays recoverable" in stderr
    assert "Traceback" not in stderr

    shown = cli.run("show", run_id, "--json")
    assert shown.returncode == 0, shown.stderr
    details = json.loads(shown.stdout)
    assert (details["run"]["state"], details["run"]["interrupted"]) == ("queued", True)
    assert details["owner_gone"] is False
