"""A model message cut short before its end — cancelled here (Esc) or by another process
(`agent-tui cancel`), its stream failed, the app closing — counts what it used so far in its
run's and its job's totals. Providers report usage at a message's end, so a run stopped
mid-stream used to record 0 tokens and $0.00 for what the person paid."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from runtime.api import Runtime
from runtime.config import Config
from runtime.errors import ModelError
from runtime.models import Job, Message, Role, Run, RunState, ToolCall, Usage
from runtime.results import CHARS_PER_TOKEN
from runtime.store.sqlite import SqliteStore
from runtime.transcript import partial_answer
from tests.fakes.scripted import ScriptedProvider, Turn

TEXT = "The answer streams in small pieces, then the model pauses for a long while. " * 3
THOUGHT = "First, what does the person want? The file names, then a summary of each."
WAIT = 30


def estimated(*streamed: str) -> int:
    return -(-sum(len(text) for text in streamed) // CHARS_PER_TOKEN)


async def no_sleep(seconds: float) -> None:
    return None


async def open_runtime(provider: ScriptedProvider, db_path: Path, workspace: Path) -> Runtime:
    return await Runtime.open(
        db_path=db_path,
        workspace=workspace,
        config=Config(),
        model="scripted:test",
        providers=lambda reference: provider,
        sleep=no_sleep,
    )


async def totals(db_path: Path, run_id: str) -> tuple[Run, Job]:
    async with SqliteStore(db_path) as store:
        run = await store.get_run(run_id)
        return run, await store.get_job(run.job_id)


async def stopped_mid_stream(db_path: Path, workspace: Path, tmp_path: Path, end: str) -> str:
    """The id of a run whose model showed ``THOUGHT`` and ``TEXT`` and paused, after ``end``."""
    provider = ScriptedProvider([Turn(TEXT, thinking=THOUGHT, pause_until=tmp_path / "never")])
    runtime = await open_runtime(provider, db_path, workspace)
    try:
        run = await runtime.start("go")
        async with asyncio.timeout(WAIT):
            await provider.paused.wait()
        if end == "cancel":
            cancelled = await runtime.cancel(run.id, reason="Esc")
            # Counted in the cancel's own transaction: the run it returns has it.
            assert cancelled.usage.output_tokens == estimated(THOUGHT, TEXT)
        elif end == "cancel elsewhere":
            other = await open_runtime(ScriptedProvider([]), db_path, workspace)
            try:
                await other.cancel(run.id, reason="agent-tui cancel")
            finally:
                await other.close()
            boundary = await runtime.wait(run.id, timeout=WAIT)  # heard here, from the store
            assert boundary.run.state is RunState.CANCELLED
    finally:
        await runtime.close()
    return run.id


@pytest.mark.parametrize("end", ["cancel", "cancel elsewhere", "close"])
async def test_a_run_stopped_mid_stream_counts_the_output_it_streamed_in_run_and_job(
    db_path: Path, workspace: Path, tmp_path: Path, end: str
) -> None:
    run_id = await stopped_mid_stream(db_path, workspace, tmp_path, end)
    run, job = await totals(db_path, run_id)
    assert run.state is (RunState.QUEUED if end == "close" else RunState.CANCELLED)
    # The scripted model reports nothing before its end: the output is the estimate.
    expected = Usage(output_tokens=estimated(THOUGHT, TEXT))
    assert run.usage == expected and job.usage == expected
    assert run.cost_usd == pytest.approx(ScriptedProvider([]).cost_usd(expected))
    assert run.cost_usd > 0 and job.cost_usd == pytest.approx(run.cost_usd)


async def test_a_run_whose_stream_fails_mid_message_counts_what_it_streamed(
    db_path: Path, workspace: Path
) -> None:
    failing = Turn(TEXT, error=ModelError("the server hung up", retryable=False))
    runtime = await open_runtime(ScriptedProvider([failing]), db_path, workspace)
    try:
        run = await runtime.start("go")
        boundary = await runtime.wait(run.id, timeout=WAIT)
        assert boundary.run.state is RunState.FAILED
    finally:
        await runtime.close()
    run, job = await totals(db_path, run.id)
    assert run.usage == Usage(output_tokens=estimated(TEXT)) and job.usage == run.usage
    assert run.cost_usd > 0 and job.cost_usd == pytest.approx(run.cost_usd)


async def test_an_attempt_cut_mid_stream_and_retried_counts_next_to_the_answer(
    db_path: Path, workspace: Path
) -> None:
    """Each attempt is a call the provider may bill: the cut one counts what it streamed,
    the answer that replaces it counts the provider's figures, once."""
    provider = ScriptedProvider(
        [
            Turn(TEXT, error=ModelError("overloaded", retryable=True)),
            Turn("Done.", usage=Usage(input_tokens=10, output_tokens=5)),
        ]
    )
    runtime = await open_runtime(provider, db_path, workspace)
    try:
        run = await runtime.start("go")
        boundary = await runtime.wait(run.id, timeout=WAIT)
        assert boundary.run.state is RunState.COMPLETED
    finally:
        await runtime.close()
    run, job = await totals(db_path, run.id)
    assert run.usage == Usage(input_tokens=10, output_tokens=estimated(TEXT) + 5)
    assert job.usage == run.usage


async def test_a_run_that_ends_normally_counts_only_the_providers_figures(
    db_path: Path, workspace: Path
) -> None:
    provider = ScriptedProvider([Turn(TEXT, usage=Usage(input_tokens=10, output_tokens=5))])
    runtime = await open_runtime(provider, db_path, workspace)
    try:
        run = await runtime.start("go")
        assert (await runtime.wait(run.id, timeout=WAIT)).run.state is RunState.COMPLETED
    finally:
        await runtime.close()
    run, job = await totals(db_path, run.id)
    assert run.usage == Usage(input_tokens=10, output_tokens=5) and job.usage == run.usage


class CommitGate(SqliteStore):
    """A real SQLite store whose next commit of a message (with tool calls) waits on ``gate``,
    ``before`` it is written or once it is: ``reached`` says a commit is waiting there."""

    def __init__(self, db_path: Path, *, before: bool) -> None:
        super().__init__(db_path)
        self.before = before
        self.reached = asyncio.Event()
        self.gate = asyncio.Event()

    async def commit_message(self, run_id: str, **options: Any) -> tuple[Message, list[ToolCall]]:
        if self.before:
            self.reached.set()
            await self.gate.wait()
        committed = await super().commit_message(run_id, **options)
        if not self.before:
            self.reached.set()
            await self.gate.wait()
        return committed


USED = Usage(input_tokens=1200, output_tokens=40)
"""What the provider reports at the message's end (more than the estimate of its text)."""


async def gated_runtime(db_path: Path, workspace: Path, *, before: bool) -> Runtime:
    """A runtime on a ``CommitGate`` store whose model asks for a tool, reporting ``USED``."""
    asks = Turn("I will look.", tool_calls=[("read_file", {"path": "README.md"})], usage=USED)
    provider = ScriptedProvider([asks])
    return await Runtime.open(
        db_path=db_path,
        workspace=workspace,
        config=Config(),
        model="scripted:test",
        providers=lambda reference: provider,
        sleep=no_sleep,
        store=CommitGate(db_path, before=before),
    )


async def cancelled_at_the_commit(db_path: Path, workspace: Path, *, before: bool) -> str:
    """The id of a run cancelled while its first message's commit waits (``CommitGate``): the
    stream has ended, with the provider's usage."""
    runtime = await gated_runtime(db_path, workspace, before=before)
    store = runtime.store
    assert isinstance(store, CommitGate)
    try:
        run = await runtime.start("go")
        async with asyncio.timeout(WAIT):
            await store.reached.wait()
        cancelled = await runtime.cancel(run.id, reason="Esc")
        assert cancelled.state is RunState.CANCELLED
        assert cancelled.usage == USED  # in the cancel's own transaction, once
    finally:
        store.gate.set()
        await runtime.close()
    return run.id


async def test_a_cancel_between_the_streams_end_and_the_commit_counts_the_message(
    db_path: Path, workspace: Path
) -> None:
    """Found by review: the stream's end stopped handing the usage out, and the cancel that
    stopped the commit then counted nothing: 0 tokens for a message the provider billed."""
    run_id = await cancelled_at_the_commit(db_path, workspace, before=True)
    run, job = await totals(db_path, run_id)
    assert run.state is RunState.CANCELLED
    assert run.usage == USED and job.usage == USED
    assert run.cost_usd == pytest.approx(ScriptedProvider([]).cost_usd(USED))
    assert job.cost_usd == pytest.approx(run.cost_usd)
    async with SqliteStore(db_path) as store:
        assert [m.role for m in await store.list_messages(run_id)] == [Role.USER]
        # The whole message was shown: all of it is the partial answer, not only what the
        # draft's clock had saved when the stream ended (nothing, for a message this short).
        partial = await partial_answer(store, await store.get_run(run_id))
    assert partial is not None and partial.text == "I will look."


async def test_a_message_committed_then_cancelled_is_counted_once(
    db_path: Path, workspace: Path
) -> None:
    run_id = await cancelled_at_the_commit(db_path, workspace, before=False)
    run, job = await totals(db_path, run_id)
    assert run.state is RunState.CANCELLED
    assert run.usage == USED and job.usage == USED
    assert run.cost_usd == pytest.approx(ScriptedProvider([]).cost_usd(USED))
    async with SqliteStore(db_path) as store:
        messages = await store.list_messages(run_id)
    assert [m.role for m in messages] == [Role.USER, Role.ASSISTANT]
    assert messages[1].usage == USED
    # The cancel's last save of what was shown came after the commit: no draft of a
    # committed message (it showed twice, the second time as a "partial answer").
    async with SqliteStore(db_path) as store:
        assert await store.get_drafts(run_id) == []
        assert await partial_answer(store, await store.get_run(run_id)) is None


async def test_a_cancel_by_another_process_before_the_commit_counts_the_message(
    db_path: Path, workspace: Path
) -> None:
    """The commit is refused then (the run is no longer this execution's): the process that
    streamed the message counts it."""
    runtime = await gated_runtime(db_path, workspace, before=True)
    store = runtime.store
    assert isinstance(store, CommitGate)
    try:
        run = await runtime.start("go")
        async with asyncio.timeout(WAIT):
            await store.reached.wait()
        other = await open_runtime(ScriptedProvider([]), db_path, workspace)
        try:
            await other.cancel(run.id, reason="agent-tui cancel")
        finally:
            await other.close()
        store.gate.set()
        boundary = await runtime.wait(run.id, timeout=WAIT)
        assert boundary.run.state is RunState.CANCELLED  # heard here, from the store
    finally:
        store.gate.set()
        await runtime.close()
    run, job = await totals(db_path, run.id)
    assert run.usage == USED and job.usage == USED
    async with SqliteStore(db_path) as read:
        partial = await partial_answer(read, await read.get_run(run.id))
    assert partial is not None and partial.text == "I will look."
