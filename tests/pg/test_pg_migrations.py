"""A PostgreSQL database of an earlier schema version, with rows in it, is brought up to date
and keeps them."""

from __future__ import annotations

import asyncpg

from runtime.models import DraftKind
from runtime.store.base import NewRun
from runtime.store.pg_schema import LATEST_VERSION
from runtime.store.postgres import PostgresStore
from tests.store.helpers import WRITER, queued_messages


async def test_a_draft_saved_before_drafts_kept_thinking_is_kept_as_its_text(
    pg_database: str,
) -> None:
    store = PostgresStore(pg_database)
    await store.open()
    try:
        run = await store.create_run(
            NewRun(agent="default", model="demo", input="find the zebra", workspace="/w")
        )
        await store.register_owner("owner-1", lease_seconds=30)
        token = (await store.claim_run(run.id, owner_id="owner-1")).execution_token or ""
        await store.save_draft(run.id, token=token, message_id="m", text="Looking for the zeb")
        await store.save_composer_draft(run.job_id, "and then the giraffe", writer=WRITER)
    finally:
        await store.close()
    # The database as version 3 left it: draft parts with no kind (and, from version 5 on,
    # composer drafts with a queue; from version 6 on, drafts with their writer; from version
    # 7 on, draft parts that may be kept before a position).
    conn = await asyncpg.connect(pg_database)
    try:
        await conn.execute("SET search_path TO agent_tui")
        await conn.execute("ALTER TABLE draft_parts DROP COLUMN before_position")
        await conn.execute("ALTER TABLE draft_parts DROP CONSTRAINT draft_parts_pkey")
        await conn.execute("ALTER TABLE draft_parts DROP COLUMN kind")
        await conn.execute("ALTER TABLE draft_parts ADD PRIMARY KEY (run_id, message_id, start)")
        for table, key in (("composer_drafts", "job_id"), ("answer_drafts", "request_id")):
            await conn.execute(f"ALTER TABLE {table} DROP CONSTRAINT {table}_pkey")
            await conn.execute(f"ALTER TABLE {table} DROP COLUMN writer")
            await conn.execute(f"ALTER TABLE {table} ADD PRIMARY KEY ({key})")
        await conn.execute("ALTER TABLE composer_drafts DROP COLUMN queued")
        await conn.execute("DELETE FROM agent_tui_migrations WHERE version >= 4")
    finally:
        await conn.close()

    store = PostgresStore(pg_database)
    await store.open()
    try:
        [draft] = await store.get_drafts(run.id)
        assert (draft.message_id, draft.text, draft.thinking) == ("m", "Looking for the zeb", "")
        # It goes on growing, and thinking can be kept beside it.
        await store.save_draft(run.id, token=token, message_id="m", text="ra", start=19)
        await store.save_draft(
            run.id, token=token, message_id="m", text="Where?", kind=DraftKind.THINKING
        )
        [draft] = await store.get_drafts(run.id)
        assert (draft.text, draft.thinking) == ("Looking for the zebra", "Where?")
        assert draft.before_position is None  # version 7: the run's latest attempt's
        # Version 5: the composer draft is kept, with an empty queue that can fill.
        # Version 6: it has no writer (''), so whichever agent-tui opens the job restores it.
        [composer_draft] = await store.get_composer_drafts(run.job_id)
        assert (composer_draft.writer, composer_draft.text) == ("", "and then the giraffe")
        assert await queued_messages(store, run.job_id) == []
        await store.save_queued_messages(run.job_id, ["the zebra first"], writer=WRITER)
        assert await queued_messages(store, run.job_id) == ["the zebra first"]
    finally:
        await store.close()
    conn = await asyncpg.connect(pg_database)
    try:
        versions = await conn.fetch("SELECT version FROM agent_tui.agent_tui_migrations")
    finally:
        await conn.close()
    applied = {row["version"] for row in versions}
    assert {4, 5, 6, 7} <= applied and max(applied) == LATEST_VERSION
