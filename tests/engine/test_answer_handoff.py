"""Who goes on with a run after an answer (DESIGN §4.4, §5 "queued runs are executed by the
process that queued them"): the process that answers, or, when it answers with ``detach``, the
live process that ran the run; never both, never nobody."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from runtime.api import Runtime
from runtime.errors import RunStateConflict
from runtime.events import RunStateChanged
from runtime.models import InputRequestState, RunState, ToolResultBlock
from tests.fakes.scripted import ScriptedProvider, ScriptItem, Turn, open_scripted

ASK = Turn("", [("ask_user", {"question": "Which colour?"})])


async def _open(db: Path, workspace: Path, script: list[ScriptItem]) -> Runtime:
    return await open_scripted(ScriptedProvider(script), db, workspace)


async def _waiting_run(runtime: Runtime) -> tuple[str, str]:
    run = await runtime.start("pick a colour")
    boundary = await runtime.wait(run.id, timeout=15)
    assert boundary.run.state is RunState.INPUT_REQUIRED and boundary.request is not None
    return run.id, boundary.request.id


async def _until_terminal(runtime: Runtime, run_id: str, after: int) -> RunState:
    async with asyncio.timeout(15):
        async for event in runtime.observe(run_id, after=after):
            if isinstance(event, RunStateChanged) and event.to_state.is_terminal:
                return event.to_state
    raise AssertionError("the observation ended before the run did")


async def test_an_answer_sent_detached_from_another_process_goes_on_in_the_process_that_ran_it(
    db_path: Path, workspace: Path
) -> None:
    owner = await _open(db_path, workspace, [ASK, Turn("Blue it is.")])
    answerer = await _open(db_path, workspace, [])  # would fail the run if it executed it
    try:
        run_id, request_id = await _waiting_run(owner)
        cursor = await owner.store.last_seq()
        answered = await answerer.respond(run_id, request_id, "blue", detach=True)
        assert answered.state is RunState.QUEUED and answered.owner_id == owner.owner_id
        assert await _until_terminal(owner, run_id, cursor) is RunState.COMPLETED
        run = await owner.get_run(run_id)
        assert run.owner_id == owner.owner_id
        messages = await owner.all_messages(run_id)
        results = [b for m in messages for b in m.content if isinstance(b, ToolResultBlock)]
        assert "blue" in str(results[-1].content)
        # The answering process took no lease: it executed nothing.
        assert await owner.store.live_owners() == [owner.owner_id]
    finally:
        await answerer.close()
        await owner.close()


async def test_an_answer_sent_without_detach_goes_on_in_the_answering_process_only(
    db_path: Path, workspace: Path
) -> None:
    owner = await _open(db_path, workspace, [ASK])  # would fail the run if it went on with it
    answerer = await _open(db_path, workspace, [Turn("Blue it is.")])
    try:
        run_id, request_id = await _waiting_run(owner)
        answered = await answerer.respond(run_id, request_id, "blue")
        assert answered.owner_id == answerer.owner_id  # named in the answer's own write
        boundary = await answerer.wait(run_id, timeout=15)
        assert boundary.run.state is RunState.COMPLETED
        assert boundary.run.owner_id == answerer.owner_id
    finally:
        await answerer.close()
        await owner.close()


async def test_a_detached_answer_is_refused_when_no_process_would_go_on_and_changes_nothing(
    db_path: Path, workspace: Path
) -> None:
    owner = await _open(db_path, workspace, [ASK])
    run_id, request_id = await _waiting_run(owner)
    await owner.close()  # the process that ran it has ended
    answerer = await _open(db_path, workspace, [])
    try:
        before = await answerer.get_run(run_id)
        with pytest.raises(RunStateConflict, match="no process would go on"):
            await answerer.respond(run_id, request_id, "blue", detach=True)
        assert await answerer.get_run(run_id) == before
        request = await answerer.store.get_input_request(request_id)
        assert request.state is InputRequestState.PENDING
    finally:
        await answerer.close()
