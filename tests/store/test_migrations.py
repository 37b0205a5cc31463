"""Schema migrations and refusals (DESIGN §5): blank databases, every earlier version with rows
in it, non-databases and newer schemas (refused, file unchanged)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from runtime import errors
from runtime.clock import ManualClock
from runtime.events import (
    EVENT_ADAPTER,
    CheckpointCreated,
    DurableEvent,
    MessageCommitted,
    RunStateChanged,
    ToolStateChanged,
    dump_event,
)
from runtime.models import (
    InputKind,
    InputRequest,
    Message,
    Role,
    RunState,
    TextBlock,
    ToolCallState,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
from runtime.store.migrations import LATEST_VERSION, MIGRATIONS, migrate
from runtime.store.sqlite import SqliteStore
from tests.store.helpers import assistant, new_run

EXPECTED_TABLES = {
    "jobs",
    "runs",
    "messages",
    "tool_calls",
    "input_requests",
    "checkpoints",
    "events",
    "owners",
    "draft_parts",
    "composer_drafts",
    "answer_drafts",
    "receipts",
    "messages_fts",
}


def _tables(path: Path) -> set[str]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    return {r[0] for r in rows}


def _version(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])
    finally:
        conn.close()


def _old_database(path: Path, version: int) -> None:
    """A database made by an earlier release: the first ``version`` migrations, with a job, a
    run in the middle of its work, messages and a tool call in it."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        migrate(conn, path=str(path), upto=version)
        conn.execute(
            "INSERT INTO jobs (id, title, workspace, agent, created_at, updated_at,"
            " latest_root_run_id, latest_run_state)"
            " VALUES ('job1', 'Old job', '/w', 'default', 1.0, 2.0, 'run1', 'running')"
        )
        conn.execute(
            "INSERT INTO runs (id, job_id, agent, model, state, revision, input, owner_id,"
            " execution_token, max_steps, created_at, updated_at) VALUES ('run1', 'job1',"
            " 'default', 'demo', 'running', 2, 'find the zebra', 'old-owner', 'tok', 50, 1.0, 2.0)"
        )
        conn.execute(
            "INSERT INTO messages (id, run_id, job_id, position, role, content, created_at)"
            " VALUES ('m0', 'run1', 'job1', 0, 'user',"
            ' \'[{"type":"text","text":"find the zebra"}]\', 1.0)'
        )
        conn.execute(
            "INSERT INTO messages (id, run_id, job_id, position, role, content, created_at)"
            " VALUES ('m1', 'run1', 'job1', 1, 'assistant', '[{\"type\":\"tool_use\","
            '"id":"toolu_1","tool_call_id":"tc1","name":"search","input":{"q":"zebra"}}]\', 2.0)'
        )
        conn.execute(
            "INSERT INTO tool_calls (id, run_id, job_id, message_id, idx, provider_id, name,"
            " arguments, state, step, created_at) VALUES ('tc1', 'run1', 'job1', 'm1', 0,"
            " 'toolu_1', 'search', '{\"q\":\"zebra\"}', 'pending', 0, 2.0)"
        )
        if 2 <= version < 12:  # a draft in one row, rewritten whole at each save
            conn.execute(
                "INSERT INTO drafts (run_id, message_id, text, updated_at)"
                " VALUES ('run1', 'm-streaming', 'Looking for the zeb', 2.5)"
            )
        elif version >= 12:  # a draft in parts
            conn.execute(
                "INSERT INTO draft_parts (run_id, message_id, start, text, updated_at)"
                " VALUES ('run1', 'm-streaming', 0, 'Looking for the zeb', 2.5)"
            )
        if version < 5:
            conn.execute(
                "INSERT INTO events (job_id, run_id, kind, created_at, payload) VALUES"
                " ('job1', 'run1', 'run_state_changed', 1.0, '{\"kind\":\"run_state_changed\","
                '"job_id":"job1","run_id":"run1","created_at":1.0,"from":null,"to":"queued"}\')'
            )
        else:
            # From version 5 an event references its run by row number and keeps only what
            # the row does not say (see migrations.encode_event_v5).
            conn.execute(
                "INSERT INTO events (run_n, kind, ref, created_at, payload) VALUES"
                " ((SELECT n FROM runs WHERE id = 'run1'), 1, NULL, 1.0, '{\"to\":\"queued\"}')"
            )
    finally:
        conn.close()


async def test_a_blank_file_gets_every_migration(db_path: Path) -> None:
    store = SqliteStore(db_path)
    await store.open()
    await store.close()
    assert _version(db_path) == LATEST_VERSION
    assert _tables(db_path) >= EXPECTED_TABLES
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


async def test_an_empty_existing_file_is_initialised(db_path: Path) -> None:
    db_path.write_bytes(b"")
    store = SqliteStore(db_path)
    await store.open()
    await store.close()
    assert _version(db_path) == LATEST_VERSION


def test_the_migration_history_is_append_only_and_numbered_from_one() -> None:
    assert [m.version for m in MIGRATIONS] == list(range(1, len(MIGRATIONS) + 1))
    assert len(MIGRATIONS) >= 3


@pytest.mark.parametrize("version", [m.version for m in MIGRATIONS[:-1]])
async def test_an_earlier_version_with_rows_is_migrated_and_keeps_them(
    db_path: Path, version: int
) -> None:
    _old_database(db_path, version)
    clock = ManualClock()
    store = SqliteStore(db_path, clock=clock)
    await store.open()
    try:
        assert _version(db_path) == LATEST_VERSION
        run = await store.get_run("run1")
        assert (run.state, run.input, run.revision) == (RunState.RUNNING, "find the zebra", 2)
        assert [m.position for m in await store.list_messages("run1")] == [0, 1]
        assert [c.name for c in await store.list_tool_calls("run1")] == ["search"]
        # Messages from before full-text search are searchable after the upgrade.
        [hit] = await store.search_messages("zebra")
        assert hit.message_id == "m0" and hit.job_title == "Old job"
        if version >= 2:  # the draft streamed before the upgrade is kept, and grows in parts
            [draft] = await store.get_drafts("run1")
            assert (draft.message_id, draft.text) == ("m-streaming", "Looking for the zeb")
            await store.save_draft(
                "run1", token="tok", message_id="m-streaming", text="ra", start=19
            )
            [draft] = await store.get_drafts("run1")
            assert draft.text == "Looking for the zebra"
        # The old run keeps working: its execution goes on, drafts work, its events continue.
        await store.save_draft("run1", token="tok", message_id="m2", text="Found")
        found = assistant("Found the zebra").model_copy(update={"id": "m2"})
        await store.commit_message("run1", token="tok", message=found)
        assert await store.get_drafts("run1") == []
        assert len(await store.search_messages("zebra")) == 2
        assert [e.seq for e in await store.read_events()] == [1, 2]
        await store.create_run(new_run("a new job after the upgrade"))
    finally:
        await store.close()


async def test_reopening_a_current_database_changes_nothing(db_path: Path) -> None:
    store = SqliteStore(db_path)
    await store.open()
    run = await store.create_run(new_run())
    await store.close()
    store = SqliteStore(db_path)
    await store.open()
    assert (await store.get_run(run.id)).id == run.id
    assert await store.last_seq() == 2
    await store.close()


# --- refusals ----------------------------------------------------------------------------------


def _assert_one_line_naming(error: errors.AgentTuiError, path: Path) -> None:
    text = str(error)
    assert "\n" not in text
    assert str(path) in text


async def test_a_file_that_is_not_a_database_is_refused_and_left_unchanged(
    tmp_path: Path,
) -> None:
    path = tmp_path / "notes.db"
    original = b"These are my notes, not a database.\n" * 200
    path.write_bytes(original)
    with pytest.raises(errors.NotADatabase) as caught:
        await SqliteStore(path).open()
    _assert_one_line_naming(caught.value, path)
    assert path.read_bytes() == original
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.db"]


async def test_a_short_non_database_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "tiny.db"
    path.write_bytes(b"SQLite")
    with pytest.raises(errors.NotADatabase):
        await SqliteStore(path).open()
    assert path.read_bytes() == b"SQLite"


async def test_another_programs_sqlite_database_is_refused_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE contacts (name TEXT)")
        conn.execute("INSERT INTO contacts VALUES ('Ada')")
    conn.close()
    original = path.read_bytes()
    with pytest.raises(errors.NotADatabase) as caught:
        await SqliteStore(path).open()
    _assert_one_line_naming(caught.value, path)
    assert path.read_bytes() == original


@pytest.mark.parametrize("journal_mode", ["delete", "wal"])
async def test_a_database_from_a_newer_version_is_refused_unchanged(
    tmp_path: Path, journal_mode: str
) -> None:
    path = tmp_path / "future.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(f"PRAGMA journal_mode = {journal_mode}")
    migrate(conn, path=str(path))
    conn.execute(f"PRAGMA user_version = {LATEST_VERSION + 7}")
    conn.close()
    original = path.read_bytes()

    with pytest.raises(errors.SchemaTooNew) as caught:
        await SqliteStore(path).open()

    _assert_one_line_naming(caught.value, path)
    assert str(LATEST_VERSION + 7) in str(caught.value)
    assert path.read_bytes() == original
    assert _version(path) == LATEST_VERSION + 7
    if journal_mode == "delete":
        assert sorted(p.name for p in tmp_path.iterdir()) == ["future.db"]


async def _real_database(path: Path) -> None:
    store = SqliteStore(path)
    await store.open()
    run = await store.create_run(new_run("hello"))
    await store.claim_run(run.id, owner_id="o")
    await store.close()


@pytest.mark.parametrize(
    ("damage", "named"),
    [
        ("DROP TABLE messages", "table messages is missing"),
        ("DROP INDEX runs_by_job", "index runs_by_job is missing"),
        ("DROP TRIGGER messages_fts_delete", "trigger messages_fts_delete is missing"),
        ("ALTER TABLE runs DROP COLUMN cancel_reason", "column runs.cancel_reason is missing"),
    ],
)
async def test_a_database_with_a_damaged_schema_is_refused_byte_for_byte_unchanged(
    tmp_path: Path, damage: str, named: str
) -> None:
    path = tmp_path / "agent.db"
    await _real_database(path)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA foreign_keys = OFF")
    conn.execute(damage)
    conn.close()
    original = path.read_bytes()

    with pytest.raises(errors.SchemaDamaged) as caught:
        await SqliteStore(path).open()

    assert caught.value.code == "schema_damaged"
    _assert_one_line_naming(caught.value, path)
    assert named in str(caught.value)
    assert path.read_bytes() == original
    assert _version(path) == LATEST_VERSION


@pytest.mark.parametrize("version", [m.version for m in MIGRATIONS])
async def test_an_intact_database_at_every_version_passes_the_schema_check(
    tmp_path: Path, version: int
) -> None:
    path = tmp_path / f"v{version}.db"
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, path=str(path), upto=version)
    conn.close()
    store = SqliteStore(path)
    await store.open()
    await store.close()
    assert _version(path) == LATEST_VERSION


async def test_an_index_a_person_added_is_not_damage(tmp_path: Path) -> None:
    path = tmp_path / "agent.db"
    await _real_database(path)
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE INDEX my_own_index ON runs (model)")
    conn.close()
    store = SqliteStore(path)
    await store.open()
    assert (await store.count_runs_by_state())[RunState.RUNNING] == 1
    await store.close()


def _v4_database_with_a_whole_step(path: Path) -> list[DurableEvent]:
    """A version-4 database holding one step written the way version 4 wrote it (every event
    whole in its payload, the tool result in the call and the tool message), and those events."""
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, path=str(path), upto=4)
    conn.execute(
        "INSERT INTO jobs (id, title, workspace, agent, created_at, updated_at,"
        " latest_root_run_id, latest_run_state) VALUES ('job1', 'Old', '/w', 'default', 1, 1,"
        " 'run1', 'input_required')"
    )
    conn.execute(
        "INSERT INTO runs (id, job_id, agent, model, state, revision, input, max_steps,"
        " execution_token, created_at, updated_at) VALUES ('run1', 'job1', 'default', 'demo',"
        " 'input_required', 5, 'hi', 50, 'tok', 1, 1)"
    )
    user = Message(
        id="m0",
        run_id="run1",
        job_id="job1",
        position=0,
        role=Role.USER,
        content=[TextBlock(text="find the zebra")],
        created_at=1.0,
    )
    asked = Message(
        id="m1",
        run_id="run1",
        job_id="job1",
        position=1,
        role=Role.ASSISTANT,
        content=[ToolUseBlock(id="toolu_1", tool_call_id="tc1", name="search", input={"q": "z"})],
        usage=Usage(input_tokens=10),
        created_at=2.0,
    )
    answered = Message(
        id="m2",
        run_id="run1",
        job_id="job1",
        position=2,
        role=Role.TOOL,
        content=[ToolResultBlock(tool_use_id="toolu_1", tool_call_id="tc1", content="zebra.txt")],
        created_at=3.0,
    )
    for m in (user, asked, answered):
        conn.execute(
            "INSERT INTO messages (id, run_id, job_id, position, role, content, usage,"
            " created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                m.id,
                m.run_id,
                m.job_id,
                m.position,
                m.role.value,
                json.dumps([b.model_dump(mode="json") for b in m.content]),
                m.usage.model_dump_json() if m.usage else None,
                m.created_at,
            ),
        )
    conn.execute(
        "INSERT INTO tool_calls (id, run_id, job_id, message_id, idx, provider_id, name,"
        " arguments, state, step, result, created_at, started_at, finished_at) VALUES ('tc1',"
        " 'run1', 'job1', 'm1', 0, 'toolu_1', 'search', '{\"q\":\"z\"}', 'completed', 1,"
        " 'zebra.txt', 2, 2, 3)"
    )
    conn.execute(
        "INSERT INTO checkpoints (id, run_id, job_id, step, last_position, usage,"
        " pending_tool_call_ids, created_at) VALUES ('cp1', 'run1', 'job1', 1, 2, '{}', '[]', 3)"
    )
    request = InputRequest(
        id="rq1",
        run_id="run1",
        job_id="job1",
        kind=InputKind.QUESTION,
        prompt="Which?",
        created_at=4.0,
    )
    env = {"job_id": "job1", "run_id": "run1"}
    events: list[DurableEvent] = [
        RunStateChanged(**env, created_at=1.0, from_state=None, to_state=RunState.QUEUED),
        MessageCommitted(**env, created_at=1.0, message=user),
        RunStateChanged(
            **env, created_at=1.5, from_state=RunState.QUEUED, to_state=RunState.RUNNING
        ),
        MessageCommitted(**env, created_at=2.0, message=asked),
        ToolStateChanged(
            **env,
            created_at=2.0,
            tool_call_id="tc1",
            name="search",
            from_state=None,
            to_state=ToolCallState.PENDING,
            arguments={"q": "z"},
        ),
        ToolStateChanged(
            **env,
            created_at=2.0,
            tool_call_id="tc1",
            name="search",
            from_state=ToolCallState.PENDING,
            to_state=ToolCallState.RUNNING,
        ),
        ToolStateChanged(
            **env,
            created_at=3.0,
            tool_call_id="tc1",
            name="search",
            from_state=ToolCallState.RUNNING,
            to_state=ToolCallState.COMPLETED,
            result="zebra.txt",
        ),
        MessageCommitted(**env, created_at=3.0, message=answered),
        CheckpointCreated(**env, created_at=3.0, checkpoint_id="cp1", step=1),
        RunStateChanged(
            **env,
            created_at=4.0,
            from_state=RunState.RUNNING,
            to_state=RunState.INPUT_REQUIRED,
            request=request,
        ),
        # An event about a run that is not there any more stays whole.
        RunStateChanged(
            job_id="gone", run_id="gone", created_at=5.0, from_state=None, to_state=RunState.QUEUED
        ),
    ]
    for event in events:
        conn.execute(
            "INSERT INTO events (job_id, run_id, kind, created_at, payload) VALUES (?, ?, ?, ?, ?)",
            (
                event.job_id,
                event.run_id,
                event.kind,
                event.created_at,
                EVENT_ADAPTER.dump_json(event, by_alias=True, exclude={"seq"}).decode(),
            ),
        )
    conn.close()
    return [e.model_copy(update={"seq": seq}) for seq, e in enumerate(events, start=1)]


async def test_events_of_version_4_read_back_the_same_after_each_fact_is_stored_once(
    db_path: Path,
) -> None:
    written = _v4_database_with_a_whole_step(db_path)
    store = SqliteStore(db_path)
    await store.open()
    try:
        read = await store.read_events(limit=100)
        assert [dump_event(e) for e in read] == [dump_event(e) for e in written]
        assert [dump_event(e) for e in await store.read_events(run_id="run1")] == [
            dump_event(e) for e in written[:-1]
        ]
        assert (await store.get_tool_call("tc1")).result == "zebra.txt"
        [hit] = await store.search_messages("zebra.txt")
        assert hit.message_id == "m2"
        assert len(await store.search_messages("zebra")) == 2
        next_seq = await store.last_seq() + 1
        await store.create_run(new_run("after the upgrade"))
        assert [e.seq for e in await store.read_events(after=next_seq - 1)] == [
            next_seq,
            next_seq + 1,
        ]
    finally:
        await store.close()
    with sqlite3.connect(db_path) as conn:
        result, carrier = conn.execute(
            "SELECT result, result_in FROM tool_calls WHERE id = 'tc1'"
        ).fetchone()
        payloads = [r[0] for r in conn.execute("SELECT payload FROM events")]
    conn.close()
    assert result is None and carrier is not None, "the result lives in the tool message only"
    assert not any("zebra.txt" in (p or "") for p in payloads), "no event copies the result"


# --- v10: no index of tool calls by run -----------------------------------------------------------


def _every_row(path: Path) -> dict[str, list[tuple[object, ...]]]:
    with sqlite3.connect(path) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
                " AND name NOT LIKE 'messages_fts%' ORDER BY name"
            )
        ]
        rows = {t: conn.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall() for t in tables}
    conn.close()
    return rows


async def test_a_version_9_database_with_rows_in_every_table_migrates_to_10_losing_nothing(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from functools import partial

    import runtime.store.sqlite as sqlite_module
    from runtime.models import InputKind
    from runtime.store.base import NewInputRequest, ToolStateChange
    from tests.store.helpers import running_run, step_with_tools, tool_result_message

    clock = ManualClock()
    monkeypatch.setattr(sqlite_module, "migrate", partial(migrate, upto=9))
    # Version 9 wrote every tool event's payload as a JSON object.
    monkeypatch.setattr(sqlite_module, "compact_tool_payload", lambda kept: None)
    sqlite_module._plain_tool_payload.cache_clear()
    store = SqliteStore(db_path, clock=clock)
    await store.open()
    # Today's store clears a run's draft parts when it commits (and keeps them when it claims
    # it, migration 17); version 9 has no such table (its drafts table gets its row below):
    # one to write into, dropped before the upgrade.
    with sqlite3.connect(db_path) as conn:
        conn.execute(next(m for m in MIGRATIONS if m.version == 12).statements[0])
        conn.execute(next(m for m in MIGRATIONS if m.version == 17).statements[0])
        # Nor answer drafts, which an answer clears (migration 13): also dropped before it.
        conn.execute(next(m for m in MIGRATIONS if m.version == 13).statements[0])
    await store.register_owner("owner-1", lease_seconds=30)
    run, token = await running_run(store, idempotency_key="key-1")
    calls = await step_with_tools(store, run, token, "read_file", "write_file")
    await store.set_tool_states(
        run.id,
        token=token,
        changes=[ToolStateChange(tool_call_id=c.id, to=ToolCallState.RUNNING) for c in calls],
    )
    await store.finish_step(
        run.id,
        token=token,
        tool_changes=[
            ToolStateChange(tool_call_id=c.id, to=ToolCallState.COMPLETED, result=f"out {c.name}")
            for c in calls
        ],
        message=tool_result_message(calls, "done"),
        checkpoint_step=1,
    )
    later = await step_with_tools(store, run, token, "shell")
    _, request = await store.open_input_request(
        run.id,
        token=token,
        request=NewInputRequest(kind=InputKind.QUESTION, prompt="Which file?"),
    )
    await store.answer_input_request(request.id, answer="README", idempotency_key="answer-1")
    await store.record_file_snapshot(later[0].id, "notes.txt", b"before")
    await store.put_blob(b"image bytes", "image/png")
    await store.acquire_consumer("exporter", holder="h1", lease_seconds=30)
    before_calls = await store.list_tool_calls(run.id)
    before_events = [dump_event(e) for e in await store.read_events(limit=1000)]
    await store.close()
    sqlite_module._plain_tool_payload.cache_clear()
    with sqlite3.connect(db_path) as conn:  # a draft as version 9 kept it: one row, whole
        conn.execute("DROP TABLE draft_parts")
        conn.execute("DROP TABLE answer_drafts")
        conn.execute(
            "INSERT INTO drafts (run_id, message_id, text, updated_at) VALUES (?, ?, ?, ?)",
            (run.id, "m-draft", "Thinking", clock.now()),
        )
        conn.execute(  # a composer draft as version 9 kept it (no queue)
            "INSERT INTO composer_drafts (job_id, text, updated_at) VALUES ('', ?, ?)",
            ("half a prompt", clock.now()),
        )
    assert _version(db_path) == 9
    before = _every_row(db_path)
    assert all(before[t] for t in before), [t for t in before if not before[t]]

    monkeypatch.undo()
    store = SqliteStore(db_path, clock=clock)
    await store.open()
    try:
        assert _version(db_path) == LATEST_VERSION
        assert await store.list_tool_calls(run.id) == before_calls
        assert [dump_event(e) for e in await store.read_events(limit=1000)] == before_events
        assert [c.id for c in await store.list_tool_calls(run.id)] == [c.id for c in calls + later]
        assert [(d.message_id, d.text) for d in await store.get_drafts(run.id)] == [
            ("m-draft", "Thinking")
        ]
        # Recovery still finds the run's call in flight: its outcome is unknown, the run fails.
        assert (await store.get_run(run.id)).state is RunState.QUEUED  # answered
        claimed = await store.claim_run(run.id, owner_id="owner-1")
        assert claimed.execution_token is not None
        await store.set_tool_states(
            run.id,
            token=claimed.execution_token,
            changes=[ToolStateChange(tool_call_id=later[0].id, to=ToolCallState.RUNNING)],
        )
        report = await store.recover_owners(["owner-1"])
        assert report.failed == [run.id]
        assert (await store.get_tool_call(later[0].id)).state is ToolCallState.INDETERMINATE
    finally:
        await store.close()
    after = _every_row(db_path)
    unchanged = {
        t: rows
        for t, rows in after.items()
        # draft_parts: migration 12 made the drafts table its parts (the draft is read above);
        # answer_drafts: new in 13, empty; composer_drafts: columns more in 15, 16 (below)
        if t not in ("runs", "tool_calls", "events", "jobs", "owners", "input_requests")
        and t not in ("draft_parts", "answer_drafts", "composer_drafts")
    }
    # Migrations 15 and 16: each composer draft keeps its text and gets an empty queue and no
    # writer ('': whichever agent-tui opens the job restores it).
    assert [
        (job_id, "", text, "[]", updated_at)
        for job_id, text, updated_at in before["composer_drafts"]
    ] == after["composer_drafts"]
    before.pop("drafts")
    assert unchanged == {t: before[t] for t in unchanged}
    for table in before:
        assert len(after[table]) >= len(before[table]), table
    with sqlite3.connect(db_path) as conn:
        indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
        plan = " ".join(
            str(r[3])
            for r in conn.execute(
                "EXPLAIN QUERY PLAN SELECT * FROM tool_calls WHERE message_id IN"
                " (SELECT id FROM messages WHERE run_id = ?) AND run_id = ? ORDER BY n",
                (run.id, run.id),
            )
        )
    conn.close()
    assert "tool_calls_by_run" not in indexes
    assert "tool_calls_by_message" in plan and "SCAN" not in plan
    # (seq, run_n, kind, ref, created_at, payload): 3 pending, 2 running, 2 completed.
    old_tool_events = [r for r in before["events"] if r[2] == 3]
    assert len(old_tool_events) == 7 and all(r[5].startswith("{") for r in old_tool_events)
    compacted = {r[0]: r[5] for r in after["events"]}
    assert (
        sorted(compacted[r[0]] for r in old_tool_events) == ["-pA"] * 3 + ["pr"] * 2 + ["rcR"] * 2
    )


def test_every_plain_tool_transition_reads_back_from_its_short_form() -> None:
    from runtime.store.migrations import compact_tool_payload, event_payload

    seen = set()
    for source in [None, *ToolCallState]:
        for target in ToolCallState:
            for flags in (
                {},
                {"result_ref": True},
                {"arguments_ref": True},
                {"result_ref": True, "arguments_ref": True},
            ):
                kept = {"from": source.value if source else None, "to": target.value, **flags}
                short = compact_tool_payload(kept)
                assert short is not None and len(short) <= 4
                assert event_payload(short) == kept
                seen.add(short)
    assert len(seen) == 7 * 6 * 4, "no two transitions share a form"
    # What says more stays JSON.
    assert compact_tool_payload({"from": "running", "to": "failed", "error": "boom"}) is None
    assert compact_tool_payload({"from": "running", "to": "completed", "result": "x"}) is None
    assert event_payload('{"from":"running","to":"failed","error":"boom"}')["error"] == "boom"


def test_a_current_database_is_opened_without_waiting_for_another_writer(tmp_path: Path) -> None:
    """Every open (a CLI command beside a busy TUI, the TUI's first page) migrates; a database
    already at the latest version needs nothing, so it takes no write lock: it took one per
    migration, and waited behind another process's writes for each."""
    path = tmp_path / "agent-tui.db"
    setup = sqlite3.connect(path, isolation_level=None)
    migrate(setup, path=str(path))
    setup.close()
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # another process, writing
    try:
        opening = sqlite3.connect(path, isolation_level=None, timeout=0)
        try:
            assert migrate(opening, path=str(path)) == LATEST_VERSION
        finally:
            opening.close()
    finally:
        writer.execute("ROLLBACK")
        writer.close()
