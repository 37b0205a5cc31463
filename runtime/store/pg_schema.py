"""Schema migrations of the PostgreSQL store: an append-only list (never edit a shipped one).

Kept apart from ``runtime.store.migrations`` (SQLite's list): the two schemas say the same
things in their own dialects, and each backend moves at its own pace. ``migrate`` applies what a
database lacks, every migration with its version row in ONE transaction, all of it under
``pg_advisory_xact_lock``: two processes starting at once on a fresh database take turns, the
second finds the work done and applies nothing (``agent_tui_migrations`` records who applied
each version).

Differences from the SQLite schema, on purpose:

- ``events`` keeps each durable event whole (JSON) with its run and job ids; ``event_seq`` is a
  one-row counter the writing transaction increments (see ``PostgresStore`` on ordering).
- a tool call's result stays in ``tool_calls.result`` (no ``result_in`` reference);
- search is a ``tsvector`` column over the message's text and tool results, with a GIN index.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from runtime.errors import SchemaTooNew

__all__ = ["LATEST_VERSION", "MIGRATIONS", "PgMigration", "migrate"]

MIGRATION_LOCK = 0x61677475  # "agtu": the advisory lock key of migrations (per schema, below)


@dataclass(frozen=True)
class PgMigration:
    version: int
    description: str
    statements: Sequence[str]


_V1_CORE = (
    """
    CREATE TABLE jobs (
        n BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        title TEXT NOT NULL,
        workspace TEXT NOT NULL,
        agent TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL,
        input_tokens BIGINT NOT NULL DEFAULT 0,
        output_tokens BIGINT NOT NULL DEFAULT 0,
        cache_read_tokens BIGINT NOT NULL DEFAULT 0,
        cache_write_tokens BIGINT NOT NULL DEFAULT 0,
        cost_usd DOUBLE PRECISION NOT NULL DEFAULT 0,
        archived BOOLEAN NOT NULL DEFAULT FALSE,
        latest_root_run_id TEXT,
        latest_run_state TEXT
    )
    """,
    "CREATE INDEX jobs_by_activity ON jobs (updated_at DESC, id DESC)",
    "CREATE INDEX jobs_by_state ON jobs (latest_run_state, updated_at DESC, id DESC)",
    """
    CREATE TABLE runs (
        n BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        job_id TEXT NOT NULL REFERENCES jobs (id),
        agent TEXT NOT NULL,
        model TEXT NOT NULL,
        state TEXT NOT NULL,
        revision INTEGER NOT NULL,
        input TEXT,
        parent_run_id TEXT REFERENCES runs (id),
        parent_tool_call_id TEXT,
        history_run_id TEXT REFERENCES runs (id),
        history_position INTEGER,
        forked_from_checkpoint_id TEXT,
        retry_of_run_id TEXT REFERENCES runs (id),
        idempotency_key TEXT UNIQUE,
        idempotency_hash TEXT,
        owner_id TEXT,
        execution_token TEXT,
        step INTEGER NOT NULL DEFAULT 0,
        max_steps INTEGER NOT NULL,
        interrupted BOOLEAN NOT NULL DEFAULT FALSE,
        outcome TEXT,
        failure TEXT,
        cancel_reason TEXT,
        input_tokens BIGINT NOT NULL DEFAULT 0,
        output_tokens BIGINT NOT NULL DEFAULT 0,
        cache_read_tokens BIGINT NOT NULL DEFAULT 0,
        cache_write_tokens BIGINT NOT NULL DEFAULT 0,
        cost_usd DOUBLE PRECISION NOT NULL DEFAULT 0,
        context_tokens BIGINT NOT NULL DEFAULT 0,
        created_at DOUBLE PRECISION NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL,
        detached BOOLEAN NOT NULL DEFAULT FALSE
    )
    """,
    "CREATE INDEX runs_by_job ON runs (job_id, n)",
    "CREATE INDEX runs_by_age ON runs (created_at DESC, n DESC)",
    "CREATE INDEX runs_by_state ON runs (state, created_at DESC, n DESC)",
    "CREATE INDEX runs_by_owner ON runs (owner_id) WHERE state IN ('queued', 'running')",
    "CREATE INDEX runs_queued ON runs (n) WHERE state = 'queued'",
    "CREATE INDEX runs_for_workers ON runs (n) WHERE state = 'queued' AND detached",
    "CREATE INDEX runs_by_parent_tool_call ON runs (parent_tool_call_id)"
    " WHERE parent_tool_call_id IS NOT NULL",
    """
    CREATE TABLE messages (
        n BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        run_id TEXT NOT NULL REFERENCES runs (id),
        job_id TEXT NOT NULL,
        position INTEGER NOT NULL,
        role TEXT NOT NULL,
        content TEXT NOT NULL,
        model TEXT,
        usage TEXT,
        cost_usd DOUBLE PRECISION NOT NULL DEFAULT 0,
        created_at DOUBLE PRECISION NOT NULL,
        search_text TEXT NOT NULL DEFAULT '',
        search TSVECTOR GENERATED ALWAYS AS (to_tsvector('simple', search_text)) STORED,
        UNIQUE (run_id, position)
    )
    """,
    "CREATE INDEX messages_by_job ON messages (job_id)",
    "CREATE INDEX messages_search ON messages USING GIN (search)",
    """
    CREATE TABLE tool_calls (
        n BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        run_id TEXT NOT NULL REFERENCES runs (id),
        job_id TEXT NOT NULL,
        message_id TEXT NOT NULL REFERENCES messages (id),
        idx INTEGER NOT NULL,
        provider_id TEXT NOT NULL,
        name TEXT NOT NULL,
        arguments TEXT NOT NULL,
        state TEXT NOT NULL,
        idempotent BOOLEAN NOT NULL DEFAULT FALSE,
        step INTEGER NOT NULL,
        result TEXT,
        error TEXT,
        child_run_id TEXT,
        created_at DOUBLE PRECISION NOT NULL,
        started_at DOUBLE PRECISION,
        finished_at DOUBLE PRECISION
    )
    """,
    "CREATE INDEX tool_calls_by_run ON tool_calls (run_id, n)",
    "CREATE INDEX tool_calls_by_message ON tool_calls (message_id, idx)",
    "CREATE INDEX tool_calls_by_job ON tool_calls (job_id)",
    """
    CREATE TABLE input_requests (
        n BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        run_id TEXT NOT NULL REFERENCES runs (id),
        job_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        prompt TEXT NOT NULL,
        options TEXT NOT NULL,
        schema TEXT NOT NULL,
        tool_call_id TEXT,
        arguments_digest TEXT,
        detail TEXT NOT NULL,
        state TEXT NOT NULL,
        answer TEXT,
        created_at DOUBLE PRECISION NOT NULL,
        answered_at DOUBLE PRECISION
    )
    """,
    "CREATE INDEX input_requests_by_run ON input_requests (run_id, n)",
    "CREATE INDEX input_requests_pending ON input_requests (created_at, n) WHERE state = 'pending'",
    """
    CREATE TABLE checkpoints (
        n BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        run_id TEXT NOT NULL REFERENCES runs (id),
        job_id TEXT NOT NULL,
        step INTEGER NOT NULL,
        last_position INTEGER NOT NULL,
        usage TEXT NOT NULL,
        pending_tool_call_ids TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL
    )
    """,
    "CREATE INDEX checkpoints_by_run ON checkpoints (run_id, n)",
    """
    CREATE TABLE owners (
        owner_id TEXT PRIMARY KEY,
        pid INTEGER,
        lease_seconds DOUBLE PRECISION NOT NULL,
        lease_expires_at DOUBLE PRECISION NOT NULL,
        heartbeat_at DOUBLE PRECISION NOT NULL,
        released BOOLEAN NOT NULL DEFAULT FALSE,
        recovered_at DOUBLE PRECISION
    )
    """,
    """
    CREATE TABLE drafts (
        run_id TEXT NOT NULL REFERENCES runs (id),
        message_id TEXT NOT NULL,
        text TEXT NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (run_id, message_id)
    )
    """,
    """
    CREATE TABLE receipts (
        operation TEXT NOT NULL,
        key TEXT NOT NULL,
        input_hash TEXT NOT NULL,
        result TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (operation, key)
    )
    """,
    """
    CREATE TABLE events (
        seq BIGINT PRIMARY KEY,
        run_id TEXT,
        job_id TEXT,
        created_at DOUBLE PRECISION NOT NULL,
        payload TEXT NOT NULL
    )
    """,
    "CREATE INDEX events_by_run ON events (run_id, seq)",
    "CREATE INDEX events_by_job ON events (job_id, seq)",
    "CREATE TABLE event_seq (one BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),"
    " last BIGINT NOT NULL)",
    "INSERT INTO event_seq (one, last) VALUES (TRUE, 0)",
    """
    CREATE TABLE blobs (
        sha256 TEXT PRIMARY KEY,
        media_type TEXT NOT NULL,
        size BIGINT NOT NULL,
        data BYTEA NOT NULL,
        created_at TEXT NOT NULL
    )
    """,
    """
    CREATE TABLE file_snapshots (
        n BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        job_id TEXT NOT NULL REFERENCES jobs (id),
        run_id TEXT NOT NULL REFERENCES runs (id),
        tool_call_id TEXT NOT NULL,
        path TEXT NOT NULL,
        before_sha256 TEXT REFERENCES blobs (sha256),
        after_sha256 TEXT REFERENCES blobs (sha256),
        after_recorded BOOLEAN NOT NULL DEFAULT FALSE,
        checkpoint_n BIGINT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        UNIQUE (tool_call_id, path)
    )
    """,
    "CREATE INDEX file_snapshots_by_job ON file_snapshots (job_id, n)",
    """
    CREATE TABLE composer_drafts (
        job_id TEXT PRIMARY KEY,
        text TEXT NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL
    )
    """,
    # Durable consumers of the event log (Runtime.consume): an acknowledged cursor each, held
    # by one process at a time under a lease (SQLite migration 8).
    """
    CREATE TABLE consumers (
        consumer_id TEXT PRIMARY KEY,
        cursor BIGINT NOT NULL DEFAULT 0,
        holder TEXT,
        lease_seconds DOUBLE PRECISION NOT NULL,
        lease_expires_at DOUBLE PRECISION NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL
    )
    """,
)

_V2_DRAFT_PARTS = (
    """
    CREATE TABLE draft_parts (
        run_id TEXT NOT NULL REFERENCES runs (id),
        message_id TEXT NOT NULL,
        start BIGINT NOT NULL,
        text TEXT NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (run_id, message_id, start)
    )
    """,
    "INSERT INTO draft_parts (run_id, message_id, start, text, updated_at)"
    " SELECT run_id, message_id, 0, text, updated_at FROM drafts",
    "DROP TABLE drafts",
)
"""A draft is the parts saved one after the other, not one row rewritten whole (SQLite
migration 12)."""

_V3_ANSWER_DRAFTS = (
    """
    CREATE TABLE answer_drafts (
        request_id TEXT PRIMARY KEY,
        job_id TEXT NOT NULL,
        text TEXT NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL
    )
    """,
)
"""The unsent free-text answer to a question, per input request (SQLite migration 13)."""

_V4_THINKING_DRAFTS = (
    "ALTER TABLE draft_parts ADD COLUMN kind TEXT NOT NULL DEFAULT 'text'"
    " CHECK (kind IN ('text', 'thinking'))",
    "ALTER TABLE draft_parts DROP CONSTRAINT draft_parts_pkey",
    "ALTER TABLE draft_parts ADD PRIMARY KEY (run_id, message_id, kind, start)",
)
"""A draft keeps the thinking that streamed as well as the text (SQLite migration 14)."""

_V5_QUEUED_FOLLOW_UPS = (
    "ALTER TABLE composer_drafts ADD COLUMN queued TEXT NOT NULL DEFAULT '[]'",
)
"""The follow-ups queued for a job are kept with its draft (SQLite migration 15)."""

_V6_DRAFT_WRITERS = (
    "ALTER TABLE composer_drafts ADD COLUMN writer TEXT NOT NULL DEFAULT ''",
    "ALTER TABLE composer_drafts DROP CONSTRAINT composer_drafts_pkey",
    "ALTER TABLE composer_drafts ADD PRIMARY KEY (job_id, writer)",
    "ALTER TABLE answer_drafts ADD COLUMN writer TEXT NOT NULL DEFAULT ''",
    "ALTER TABLE answer_drafts DROP CONSTRAINT answer_drafts_pkey",
    "ALTER TABLE answer_drafts ADD PRIMARY KEY (request_id, writer)",
)
"""Each draft carries the process that wrote it (SQLite migration 16)."""

_V7_KEPT_DRAFTS = ("ALTER TABLE draft_parts ADD COLUMN before_position BIGINT",)
"""The partial answer of an attempt that ended stays when its run goes on (SQLite migration
17)."""

MIGRATIONS: Sequence[PgMigration] = (
    PgMigration(1, "the whole schema", _V1_CORE),
    PgMigration(
        2,
        "a draft is the parts saved one after the other, not one row rewritten whole",
        _V2_DRAFT_PARTS,
    ),
    PgMigration(3, "the unsent answer to a question, per input request", _V3_ANSWER_DRAFTS),
    PgMigration(
        4, "a draft keeps the thinking that streamed, not only the text", _V4_THINKING_DRAFTS
    ),
    PgMigration(
        5, "the follow-ups queued for a job are kept with its draft", _V5_QUEUED_FOLLOW_UPS
    ),
    PgMigration(6, "each draft carries the process that wrote it", _V6_DRAFT_WRITERS),
    PgMigration(
        7,
        "the partial answer of an attempt that ended stays when its run goes on",
        _V7_KEPT_DRAFTS,
    ),
)
LATEST_VERSION = MIGRATIONS[-1].version

_LEDGER = """
CREATE TABLE IF NOT EXISTS agent_tui_migrations (
    version INTEGER PRIMARY KEY,
    description TEXT NOT NULL,
    applied_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    applied_by_pid INTEGER NOT NULL
)
"""


def too_new_message(where: str, version: int) -> str:
    return (
        f"{where}: database schema version {version} is newer than this agent-tui supports "
        f"({LATEST_VERSION}); upgrade agent-tui to open it"
    )


async def schema_version(conn: Any, schema: str) -> int | None:
    """The schema's version, read without writing (None: no ledger there yet)."""
    ledger = await conn.fetchval(
        "SELECT to_regclass(format('%I.agent_tui_migrations', $1::text))", schema
    )
    if ledger is None:
        return None
    return int(
        await conn.fetchval(
            f'SELECT coalesce(max(version), 0) FROM "{schema}".agent_tui_migrations'
        )
    )


async def migrate(conn: Any, *, schema: str, where: str) -> list[int]:
    """Bring ``schema`` up to ``LATEST_VERSION`` in one transaction under the migration lock;
    returns the versions this call applied (empty when another process had done it).

    A schema already at the latest version is only read: a role that may only read (a team
    member who watches) opens it, where ``CREATE SCHEMA IF NOT EXISTS`` is refused."""
    current = await schema_version(conn, schema)
    if current is not None and current > LATEST_VERSION:
        raise SchemaTooNew(too_new_message(where, current))
    if current == LATEST_VERSION:
        return []
    applied: list[int] = []
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1, hashtext($2))", MIGRATION_LOCK, schema)
        await conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
        await conn.execute(f'SET LOCAL search_path TO "{schema}"')
        await conn.execute(_LEDGER)
        current = int(
            await conn.fetchval("SELECT coalesce(max(version), 0) FROM agent_tui_migrations")
        )
        if current > LATEST_VERSION:
            raise SchemaTooNew(too_new_message(where, current))
        for migration in MIGRATIONS:
            if migration.version <= current:
                continue
            # One round trip: a simple-query script runs its statements in this transaction.
            await conn.execute(";\n".join(migration.statements))
            await conn.execute(
                "INSERT INTO agent_tui_migrations (version, description, applied_by_pid)"
                " VALUES ($1, $2, $3)",
                migration.version,
                migration.description,
                os.getpid(),
            )
            applied.append(migration.version)
    return applied
