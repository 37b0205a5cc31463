"""Schema migrations of the SQLite store: an append-only list (never edit a shipped one).

Each migration is applied with its ``PRAGMA user_version`` bump in ONE transaction. Main tables
carry an ``n INTEGER PRIMARY KEY`` (a stable rowid: creation order, FTS rowids) beside their
public text ``id``.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from runtime.errors import SchemaTooNew
from runtime.store.stored_content import MESSAGE_TEXT_FUNCTION


@dataclass(frozen=True)
class Migration:
    version: int
    description: str
    statements: Sequence[str] = ()
    apply: Callable[[sqlite3.Connection], None] | None = None


_V1_CORE = (
    """
    CREATE TABLE jobs (
        n INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        title TEXT NOT NULL,
        workspace TEXT NOT NULL,
        agent TEXT NOT NULL,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        input_tokens INTEGER NOT NULL DEFAULT 0,
        output_tokens INTEGER NOT NULL DEFAULT 0,
        cache_read_tokens INTEGER NOT NULL DEFAULT 0,
        cache_write_tokens INTEGER NOT NULL DEFAULT 0,
        cost_usd REAL NOT NULL DEFAULT 0,
        archived INTEGER NOT NULL DEFAULT 0,
        latest_root_run_id TEXT,
        latest_run_state TEXT
    )
    """,
    "CREATE INDEX jobs_by_activity ON jobs (updated_at DESC, id DESC)",
    "CREATE INDEX jobs_by_state ON jobs (latest_run_state, updated_at DESC, id DESC)",
    """
    CREATE TABLE runs (
        n INTEGER PRIMARY KEY,
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
        interrupted INTEGER NOT NULL DEFAULT 0,
        outcome TEXT,
        failure TEXT,
        cancel_reason TEXT,
        input_tokens INTEGER NOT NULL DEFAULT 0,
        output_tokens INTEGER NOT NULL DEFAULT 0,
        cache_read_tokens INTEGER NOT NULL DEFAULT 0,
        cache_write_tokens INTEGER NOT NULL DEFAULT 0,
        cost_usd REAL NOT NULL DEFAULT 0,
        context_tokens INTEGER NOT NULL DEFAULT 0,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    )
    """,
    "CREATE INDEX runs_by_job ON runs (job_id, n)",
    "CREATE INDEX runs_by_age ON runs (created_at DESC, n DESC)",
    "CREATE INDEX runs_by_state ON runs (state, created_at DESC, n DESC)",
    "CREATE INDEX runs_by_owner ON runs (owner_id) WHERE state IN ('queued', 'running')",
    "CREATE INDEX runs_by_parent_tool_call ON runs (parent_tool_call_id)"
    " WHERE parent_tool_call_id IS NOT NULL",
    """
    CREATE TABLE messages (
        n INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        run_id TEXT NOT NULL REFERENCES runs (id),
        job_id TEXT NOT NULL,
        position INTEGER NOT NULL,
        role TEXT NOT NULL,
        content TEXT NOT NULL,
        model TEXT,
        usage TEXT,
        cost_usd REAL NOT NULL DEFAULT 0,
        created_at REAL NOT NULL,
        UNIQUE (run_id, position)
    )
    """,
    """
    CREATE TABLE tool_calls (
        n INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        run_id TEXT NOT NULL REFERENCES runs (id),
        job_id TEXT NOT NULL,
        message_id TEXT NOT NULL REFERENCES messages (id),
        idx INTEGER NOT NULL,
        provider_id TEXT NOT NULL,
        name TEXT NOT NULL,
        arguments TEXT NOT NULL,
        state TEXT NOT NULL,
        idempotent INTEGER NOT NULL DEFAULT 0,
        step INTEGER NOT NULL,
        result TEXT,
        error TEXT,
        child_run_id TEXT,
        created_at REAL NOT NULL,
        started_at REAL,
        finished_at REAL
    )
    """,
    "CREATE INDEX tool_calls_by_run ON tool_calls (run_id, n)",
    """
    CREATE TABLE input_requests (
        n INTEGER PRIMARY KEY,
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
        created_at REAL NOT NULL,
        answered_at REAL
    )
    """,
    "CREATE INDEX input_requests_by_run ON input_requests (run_id, n)",
    "CREATE INDEX input_requests_pending ON input_requests (created_at, n) WHERE state = 'pending'",
    """
    CREATE TABLE checkpoints (
        n INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        run_id TEXT NOT NULL REFERENCES runs (id),
        job_id TEXT NOT NULL,
        step INTEGER NOT NULL,
        last_position INTEGER NOT NULL,
        usage TEXT NOT NULL,
        pending_tool_call_ids TEXT NOT NULL,
        created_at REAL NOT NULL
    )
    """,
    "CREATE INDEX checkpoints_by_run ON checkpoints (run_id, n)",
    """
    CREATE TABLE events (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        job_id TEXT NOT NULL,
        run_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        created_at REAL NOT NULL,
        payload TEXT NOT NULL
    )
    """,
    "CREATE INDEX events_by_run ON events (run_id, seq)",
    "CREATE INDEX events_by_job ON events (job_id, seq)",
    """
    CREATE TABLE owners (
        owner_id TEXT PRIMARY KEY,
        pid INTEGER,
        lease_seconds REAL NOT NULL,
        lease_expires_at REAL NOT NULL,
        heartbeat_at REAL NOT NULL,
        released INTEGER NOT NULL DEFAULT 0,
        recovered_at REAL
    )
    """,
)

_V2_DRAFTS_RECEIPTS = (
    """
    CREATE TABLE drafts (
        run_id TEXT NOT NULL REFERENCES runs (id),
        message_id TEXT NOT NULL,
        text TEXT NOT NULL,
        updated_at REAL NOT NULL,
        PRIMARY KEY (run_id, message_id)
    ) WITHOUT ROWID
    """,
    """
    CREATE TABLE receipts (
        operation TEXT NOT NULL,
        key TEXT NOT NULL,
        input_hash TEXT NOT NULL,
        result TEXT NOT NULL,
        created_at REAL NOT NULL,
        PRIMARY KEY (operation, key)
    ) WITHOUT ROWID
    """,
)

# The searchable text of a message: its text blocks and tool result contents.
_MESSAGE_TEXT = """(
    SELECT group_concat(coalesce(json_extract(b.value, '$.text'),
                                 json_extract(b.value, '$.content')), char(10))
    FROM json_each({content}) AS b
    WHERE json_extract(b.value, '$.type') IN ('text', 'tool_result')
)"""

_V3_SEARCH = (
    "CREATE VIRTUAL TABLE messages_fts USING fts5 (text, tokenize = 'unicode61')",
    f"""
    CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
        INSERT INTO messages_fts (rowid, text)
        VALUES (new.n, coalesce({_MESSAGE_TEXT.format(content="new.content")}, ''));
    END
    """,
    """
    CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
        DELETE FROM messages_fts WHERE rowid = old.n;
    END
    """,
    f"""
    CREATE TRIGGER messages_fts_update AFTER UPDATE OF content ON messages BEGIN
        DELETE FROM messages_fts WHERE rowid = old.n;
        INSERT INTO messages_fts (rowid, text)
        VALUES (new.n, coalesce({_MESSAGE_TEXT.format(content="new.content")}, ''));
    END
    """,
    # Messages committed before this version become searchable too.
    f"""
    INSERT INTO messages_fts (rowid, text)
    SELECT n, coalesce({_MESSAGE_TEXT.format(content="messages.content")}, '') FROM messages
    """,
)

_V4_TOOL_CALL_INDEXES = (
    # A step reads the calls of one message, and a checkpoint the calls still open: neither
    # may scan every call of a long run.
    "CREATE INDEX tool_calls_by_message ON tool_calls (message_id, idx)",
    "CREATE INDEX tool_calls_open ON tool_calls (run_id, n) WHERE state IN ('pending', 'running')",
)

# --- v5: each fact stored once -----------------------------------------------------------------
#
# Events reference the row they describe (``ref``: messages.n, tool_calls.n or checkpoints.n) and
# keep only what that row does not say; readers hydrate them. A tool call's result moves into the
# tool message that carries it to the model (``result_in`` = that message's n). The search index
# keeps no copy of the text: it is an external-content FTS5 table over a view.

EVENT_CODES_V5: Mapping[str, int] = {
    "run_state_changed": 1,
    "message_committed": 2,
    "tool_state_changed": 3,
    "checkpoint_created": 4,
}
"""Event kinds with a compact form; code 0 keeps any other event whole in ``payload``."""

_RUN_EVENT_DEFAULTS_V5: Mapping[str, Any] = {
    "request": None,
    "outcome": None,
    "failure": None,
    "reason": None,
    "interrupted": False,
}
_ENVELOPE = ("kind", "job_id", "run_id", "created_at", "seq")


def encode_event_v5(
    data: Mapping[str, Any],
    *,
    run_known: bool,
    ref_found: bool,
    tool_call: Mapping[str, Any] | None = None,
) -> tuple[int, str | None]:
    """``(kind code, payload)`` of one event in the v5 form. ``data`` is the event's full JSON
    (aliases: ``from``/``to``); ``ref_found`` says whether the row it describes exists;
    ``tool_call`` holds that call's final ``name``, ``arguments`` and ``result`` (so what equals
    them is referenced, not copied). The store writes new events with this same function."""
    code = EVENT_CODES_V5.get(str(data.get("kind")), 0)
    if code == 0 or not run_known or (code != 1 and not ref_found):
        return 0, json.dumps(dict(data), separators=(",", ":"), ensure_ascii=False)
    kept: dict[str, Any] = {}
    if code == 1:
        kept = {k: v for k, v in data.items() if k not in _ENVELOPE}
        for key, default in _RUN_EVENT_DEFAULTS_V5.items():
            if key in kept and kept[key] == default:
                del kept[key]
    elif code == 3:
        assert tool_call is not None
        kept = {"from": data.get("from"), "to": data.get("to")}
        if data.get("error") is not None:
            kept["error"] = data["error"]
        if data.get("name") != tool_call.get("name"):
            kept["name"] = data.get("name")
        result = data.get("result")
        if result is not None:
            if result == tool_call.get("result"):
                kept["result_ref"] = True
            else:
                kept["result"] = result
        arguments = data.get("arguments")
        if arguments is not None:
            if arguments == tool_call.get("arguments"):
                kept["arguments_ref"] = True
            else:
                kept["arguments"] = arguments
    return code, json.dumps(kept, separators=(",", ":"), ensure_ascii=False) if kept else None


def _v5_tool_results(conn: sqlite3.Connection) -> None:
    """A result the tool message carries is kept there only."""
    rows = conn.execute("SELECT n, content FROM messages WHERE role = 'tool'").fetchall()
    for n, content in rows:
        for block in json.loads(content):
            if block.get("type") == "tool_result" and block.get("tool_call_id"):
                conn.execute(
                    "UPDATE tool_calls SET result = NULL, result_in = ?"
                    " WHERE id = ? AND result IS NOT NULL AND result = ?",
                    (n, block["tool_call_id"], block.get("content")),
                )


def _v5_tool_call_facts(conn: sqlite3.Connection) -> dict[str, tuple[int, dict[str, Any]]]:
    facts: dict[str, tuple[int, dict[str, Any]]] = {}
    rows = conn.execute(
        "SELECT t.n, t.id, t.name, t.arguments, t.result, m.content FROM tool_calls AS t"
        " LEFT JOIN messages AS m ON m.n = t.result_in"
    )
    for n, call_id, name, arguments, result, carrier in rows:
        if carrier is not None:
            for block in json.loads(carrier):
                if block.get("tool_call_id") == call_id:
                    result = block.get("content")
                    break
        facts[call_id] = (n, {"name": name, "arguments": json.loads(arguments), "result": result})
    return facts


def _v5_events(conn: sqlite3.Connection) -> None:
    runs = dict(conn.execute("SELECT id, n FROM runs").fetchall())
    messages = dict(conn.execute("SELECT id, n FROM messages").fetchall())
    checkpoints = dict(conn.execute("SELECT id, n FROM checkpoints").fetchall())
    calls = _v5_tool_call_facts(conn)
    last = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'events'").fetchone()
    conn.execute(
        """
        CREATE TABLE events_v5 (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            run_n INTEGER,
            kind INTEGER NOT NULL,
            ref INTEGER,
            created_at REAL NOT NULL,
            payload TEXT
        )
        """
    )
    converted = []
    for seq, run_id, created_at, payload in conn.execute(
        "SELECT seq, run_id, created_at, payload FROM events ORDER BY seq"
    ):
        data = json.loads(payload)
        data.setdefault("run_id", run_id)
        kind = data.get("kind")
        ref: int | None = None
        tool_call = None
        if kind == "message_committed":
            ref = messages.get(str((data.get("message") or {}).get("id")))
        elif kind == "tool_state_changed" and data.get("tool_call_id") in calls:
            ref, tool_call = calls[data["tool_call_id"]]
        elif kind == "checkpoint_created":
            ref = checkpoints.get(str(data.get("checkpoint_id")))
        run_n = runs.get(run_id)
        code, compact = encode_event_v5(
            data, run_known=run_n is not None, ref_found=ref is not None, tool_call=tool_call
        )
        if code == 0:
            run_n = ref = None
        converted.append((seq, run_n, code, ref, created_at, compact))
    conn.executemany(
        "INSERT INTO events_v5 (seq, run_n, kind, ref, created_at, payload)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        converted,
    )
    conn.execute("DROP TABLE events")
    conn.execute("ALTER TABLE events_v5 RENAME TO events")
    if last is not None:
        # seq never goes back, even past events that were deleted.
        conn.execute(
            "UPDATE sqlite_sequence SET seq = max(seq, ?) WHERE name = 'events'", (last[0],)
        )
        conn.execute(
            "INSERT INTO sqlite_sequence (name, seq) SELECT 'events', ?"
            " WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'events')",
            (last[0],),
        )
    conn.execute("CREATE INDEX events_by_run ON events (run_n, seq)")


def _v5_apply(conn: sqlite3.Connection) -> None:
    _v5_tool_results(conn)
    _v5_events(conn)


# The same text as _MESSAGE_TEXT, without json_each: FTS5 reads its external content (for
# snippets and 'rebuild') from inside its own update, where a table-valued function fails.
_MESSAGE_TEXT_VIEW = """(
    WITH RECURSIVE i (k) AS (
        SELECT 0 UNION ALL SELECT k + 1 FROM i WHERE k + 1 < json_array_length({content})
    )
    SELECT group_concat(coalesce(json_extract({content}, '$[' || k || '].text'),
                                 json_extract({content}, '$[' || k || '].content')), char(10))
    FROM i WHERE json_extract({content}, '$[' || k || '].type') IN ('text', 'tool_result')
)"""

_V5_SEARCH = (
    "DROP TRIGGER messages_fts_insert",
    "DROP TRIGGER messages_fts_delete",
    "DROP TRIGGER messages_fts_update",
    "DROP TABLE messages_fts",
    f"""
    CREATE VIEW messages_text AS
    SELECT n, coalesce({_MESSAGE_TEXT_VIEW.format(content="messages.content")}, '') AS text
    FROM messages
    """,
    "CREATE VIRTUAL TABLE messages_fts USING fts5 (text, content = 'messages_text',"
    " content_rowid = 'n', tokenize = 'unicode61')",
    f"""
    CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
        INSERT INTO messages_fts (rowid, text)
        VALUES (new.n, coalesce({_MESSAGE_TEXT.format(content="new.content")}, ''));
    END
    """,
    f"""
    CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
        INSERT INTO messages_fts (messages_fts, rowid, text)
        VALUES ('delete', old.n, coalesce({_MESSAGE_TEXT.format(content="old.content")}, ''));
    END
    """,
    f"""
    CREATE TRIGGER messages_fts_update AFTER UPDATE OF content ON messages BEGIN
        INSERT INTO messages_fts (messages_fts, rowid, text)
        VALUES ('delete', old.n, coalesce({_MESSAGE_TEXT.format(content="old.content")}, ''));
        INSERT INTO messages_fts (rowid, text)
        VALUES (new.n, coalesce({_MESSAGE_TEXT.format(content="new.content")}, ''));
    END
    """,
    "INSERT INTO messages_fts (messages_fts) VALUES ('rebuild')",
    "ALTER TABLE tool_calls ADD COLUMN result_in INTEGER",
)

_V6_BLOBS_FILE_SNAPSHOTS = (
    # Content-addressed bytes, stored once (file snapshots for rewinding; images).
    """
    CREATE TABLE blobs (
        sha256 TEXT PRIMARY KEY,
        media_type TEXT NOT NULL,
        size INTEGER NOT NULL,
        data BLOB NOT NULL,
        created_at TEXT NOT NULL
    )
    """,
    # One row per file an approved write_file / edit_file is about to change: its content
    # before (a blob, NULL when the file did not exist) and, once the tool finished, after.
    # ``checkpoint_n`` is the newest checkpoint row when the write was recorded: a write is
    # "after checkpoint C" when checkpoint_n >= C.n.
    """
    CREATE TABLE file_snapshots (
        n INTEGER PRIMARY KEY,
        job_id TEXT NOT NULL REFERENCES jobs (id),
        run_id TEXT NOT NULL REFERENCES runs (id),
        tool_call_id TEXT NOT NULL,
        path TEXT NOT NULL,
        before_sha256 TEXT REFERENCES blobs (sha256),
        after_sha256 TEXT REFERENCES blobs (sha256),
        after_recorded INTEGER NOT NULL DEFAULT 0,
        checkpoint_n INTEGER NOT NULL,
        created_at REAL NOT NULL,
        UNIQUE (tool_call_id, path)
    )
    """,
    "CREATE INDEX file_snapshots_by_job ON file_snapshots (job_id, n)",
    "CREATE INDEX jobs_archived ON jobs (archived) WHERE archived = 1",
)

_COMPOSER_DRAFTS = (
    # The TUI's unsent composer text, one row per job ('' is the new-job composer); it survives
    # a quit or a crash. Self-contained: nothing else refers to it.
    """
    CREATE TABLE composer_drafts (
        job_id TEXT PRIMARY KEY,
        text TEXT NOT NULL,
        updated_at REAL NOT NULL
    )
    """,
)

_WORKERS_CONSUMERS = (
    # Issue 14. Runs queued for workers (`run --detach`), found by a partial index; and the
    # durable consumers of the event log (`Runtime.consume`): an acknowledged cursor each, held
    # by one process at a time under a lease. Self-contained: nothing refers to these.
    "ALTER TABLE runs ADD COLUMN detached INTEGER NOT NULL DEFAULT 0",
    "CREATE INDEX runs_for_workers ON runs (n) WHERE state = 'queued' AND detached = 1",
    """
    CREATE TABLE consumers (
        consumer_id TEXT PRIMARY KEY,
        cursor INTEGER NOT NULL DEFAULT 0,
        holder TEXT,
        lease_seconds REAL NOT NULL,
        lease_expires_at REAL NOT NULL,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    )
    """,
)

# --- v9: search indexed in batches ---------------------------------------------------------------
#
# A message is no longer indexed by a trigger in the transaction that commits it (the trigger
# parsed its JSON and rewrote four or five FTS pages per commit); the store indexes every message
# not yet indexed in one statement (INDEX_PENDING_MESSAGES) before a search, every so many
# commits and on close. Invariant: the messages indexed are exactly those with ``n`` up to the
# largest rowid in the index (``messages_fts_docsize``, FTS5's one row per indexed document), so
# deleting or changing a message touches the index only when the message is in it.

_INDEXED = "EXISTS (SELECT 1 FROM messages_fts_docsize WHERE id = old.n)"

_V9_BATCHED_SEARCH = (
    "DROP TRIGGER messages_fts_insert",
    "DROP TRIGGER messages_fts_delete",
    "DROP TRIGGER messages_fts_update",
    f"""
    CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages WHEN {_INDEXED} BEGIN
        INSERT INTO messages_fts (messages_fts, rowid, text)
        VALUES ('delete', old.n, coalesce({_MESSAGE_TEXT.format(content="old.content")}, ''));
    END
    """,
    f"""
    CREATE TRIGGER messages_fts_update AFTER UPDATE OF content ON messages WHEN {_INDEXED} BEGIN
        INSERT INTO messages_fts (messages_fts, rowid, text)
        VALUES ('delete', old.n, coalesce({_MESSAGE_TEXT.format(content="old.content")}, ''));
        INSERT INTO messages_fts (rowid, text)
        VALUES (new.n, coalesce({_MESSAGE_TEXT.format(content="new.content")}, ''));
    END
    """,
)

# --- v10: an index no query needs ---------------------------------------------------------------
#
# ``tool_calls_by_run`` cost every reserved call an index entry (a 32-character run id and the
# row number) and every step's first transaction one more page to write. The queries it served
# go elsewhere: the open calls of a run (cancel, checkpoint, recovery) by ``tool_calls_open``,
# the calls of one message by ``tool_calls_by_message``, and all the calls of a run through its
# messages (``messages (run_id, position)``, then ``tool_calls_by_message``). Dropping an index
# loses no row.

_V10_DROP_TOOL_CALLS_BY_RUN = ("DROP INDEX IF EXISTS tool_calls_by_run",)

# And a tool event that says only its transition (and that its result or arguments are its
# call's) keeps it in two to four characters instead of a JSON object of 30 to 55 bytes: the
# letters of its states, then ``R`` (result_ref) and ``A`` (arguments_ref). Nine of a step's
# twelve events are such. Any other payload stays a JSON object (it starts with ``{``).
# The letters are part of the format: never reuse one.

_STATE_LETTERS: Mapping[str | None, str] = {
    None: "-",
    "pending": "p",
    "running": "r",
    "completed": "c",
    "failed": "f",
    "indeterminate": "i",
    "cancelled": "x",
}
_LETTER_STATES: Mapping[str, str | None] = {v: k for k, v in _STATE_LETTERS.items()}
_COMPACT_KEYS = frozenset({"from", "to", "result_ref", "arguments_ref"})


def compact_tool_payload(kept: Mapping[str, Any]) -> str | None:
    """The short form of a tool event's v5 payload ``kept``, or None when it says more than
    its transition and which facts its call holds."""
    if "to" not in kept or not _COMPACT_KEYS.issuperset(kept):
        return None
    if any(kept.get(flag, True) is not True for flag in ("result_ref", "arguments_ref")):
        return None
    source, target = kept.get("from"), kept["to"]
    if source not in _STATE_LETTERS or target not in _STATE_LETTERS or target is None:
        return None
    flags = ("R" if "result_ref" in kept else "") + ("A" if "arguments_ref" in kept else "")
    return _STATE_LETTERS[source] + _STATE_LETTERS[target] + flags


def event_payload(text: str | None) -> dict[str, Any]:
    """An events row's payload as a dict, from either form."""
    if not text:
        return {}
    if text[0] == "{":
        return cast(dict[str, Any], json.loads(text))
    data: dict[str, Any] = {"from": _LETTER_STATES[text[0]], "to": _LETTER_STATES[text[1]]}
    if "R" in text[2:]:
        data["result_ref"] = True
    if "A" in text[2:]:
        data["arguments_ref"] = True
    return data


def _v10_compact_tool_events(conn: sqlite3.Connection) -> None:
    rows = conn.execute(
        "SELECT seq, payload FROM events WHERE kind = 3 AND payload LIKE '{%'"
    ).fetchall()
    changed = []
    for seq, payload in rows:
        compact = compact_tool_payload(json.loads(payload))
        if compact is not None:
            changed.append((compact, seq))
    conn.executemany("UPDATE events SET payload = ? WHERE seq = ?", changed)


# --- v11: compressed message content ----------------------------------------------------------
#
# ``messages.content`` may be zlib-compressed JSON (a BLOB; see runtime/store/stored_content.py),
# which SQL's JSON functions cannot read: the searchable text comes from the store's SQL function
# instead, which gives the same text for the JSON rows already indexed. Rows are not rewritten.

_TEXT_OF = MESSAGE_TEXT_FUNCTION + "({content})"

INDEX_PENDING_MESSAGES = f"""
    INSERT INTO messages_fts (rowid, text)
    SELECT n, {_TEXT_OF.format(content="content")} FROM messages
    WHERE n > (SELECT coalesce(max(id), 0) FROM messages_fts_docsize) ORDER BY n
"""

_V11_COMPRESSED_CONTENT = (
    "DROP TRIGGER messages_fts_delete",
    "DROP TRIGGER messages_fts_update",
    "DROP VIEW messages_text",
    f"""
    CREATE VIEW messages_text AS
    SELECT n, {_TEXT_OF.format(content="content")} AS text FROM messages
    """,
    f"""
    CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages WHEN {_INDEXED} BEGIN
        INSERT INTO messages_fts (messages_fts, rowid, text)
        VALUES ('delete', old.n, {_TEXT_OF.format(content="old.content")});
    END
    """,
    f"""
    CREATE TRIGGER messages_fts_update AFTER UPDATE OF content ON messages WHEN {_INDEXED} BEGIN
        INSERT INTO messages_fts (messages_fts, rowid, text)
        VALUES ('delete', old.n, {_TEXT_OF.format(content="old.content")});
        INSERT INTO messages_fts (rowid, text)
        VALUES (new.n, {_TEXT_OF.format(content="new.content")});
    END
    """,
)

_V12_DRAFT_PARTS = (
    """
    CREATE TABLE draft_parts (
        run_id TEXT NOT NULL REFERENCES runs (id),
        message_id TEXT NOT NULL,
        start INTEGER NOT NULL,
        text TEXT NOT NULL,
        updated_at REAL NOT NULL,
        PRIMARY KEY (run_id, message_id, start)
    )
    """,
    "INSERT INTO draft_parts (run_id, message_id, start, text, updated_at)"
    " SELECT run_id, message_id, 0, text, updated_at FROM drafts",
    "DROP TABLE drafts",
)
"""A draft is kept as the parts saved one after the other (each save writes only the text
streamed since the last one), not rewritten whole: an 8 MB answer wrote 172 MB in 41 saves."""

_V13_ANSWER_DRAFTS = (
    # The unsent free-text answer to a question, one row per input request: typed, then the
    # app quit (or crashed), it is back in the field when the question is shown again. Deleted
    # once the question is answered, and with its job. Self-contained, like composer drafts.
    """
    CREATE TABLE answer_drafts (
        request_id TEXT PRIMARY KEY,
        job_id TEXT NOT NULL,
        text TEXT NOT NULL,
        updated_at REAL NOT NULL
    )
    """,
)

_V14_THINKING_DRAFTS = (
    """
    CREATE TABLE draft_parts_v14 (
        run_id TEXT NOT NULL REFERENCES runs (id),
        message_id TEXT NOT NULL,
        kind TEXT NOT NULL DEFAULT 'text' CHECK (kind IN ('text', 'thinking')),
        start INTEGER NOT NULL,
        text TEXT NOT NULL,
        updated_at REAL NOT NULL,
        PRIMARY KEY (run_id, message_id, kind, start)
    )
    """,
    "INSERT INTO draft_parts_v14 (run_id, message_id, kind, start, text, updated_at)"
    " SELECT run_id, message_id, 'text', start, text, updated_at FROM draft_parts",
    "DROP TABLE draft_parts",
    "ALTER TABLE draft_parts_v14 RENAME TO draft_parts",
)
"""A draft keeps the thinking that streamed as well as the text (DESIGN §5: every character
shown), each kind its own parts: SQLite cannot change a table's primary key, so the table is
made again with ``kind`` in it and its rows copied."""

_V15_QUEUED_FOLLOW_UPS = (
    "ALTER TABLE composer_drafts ADD COLUMN queued TEXT NOT NULL DEFAULT '[]'",
)
"""The messages a person queued for a job while its run worked (a JSON list, sent when the run
finishes) are kept with the job's composer draft, so a quit or a crash loses none of them."""

_V16_DRAFT_WRITERS = (
    """
    CREATE TABLE composer_drafts_v16 (
        job_id TEXT NOT NULL,
        writer TEXT NOT NULL DEFAULT '',
        text TEXT NOT NULL,
        queued TEXT NOT NULL DEFAULT '[]',
        updated_at REAL NOT NULL,
        PRIMARY KEY (job_id, writer)
    )
    """,
    "INSERT INTO composer_drafts_v16 (job_id, writer, text, queued, updated_at)"
    " SELECT job_id, '', text, queued, updated_at FROM composer_drafts",
    "DROP TABLE composer_drafts",
    "ALTER TABLE composer_drafts_v16 RENAME TO composer_drafts",
    """
    CREATE TABLE answer_drafts_v16 (
        request_id TEXT NOT NULL,
        writer TEXT NOT NULL DEFAULT '',
        job_id TEXT NOT NULL,
        text TEXT NOT NULL,
        updated_at REAL NOT NULL,
        PRIMARY KEY (request_id, writer)
    )
    """,
    "INSERT INTO answer_drafts_v16 (request_id, writer, job_id, text, updated_at)"
    " SELECT request_id, '', job_id, text, updated_at FROM answer_drafts",
    "DROP TABLE answer_drafts",
    "ALTER TABLE answer_drafts_v16 RENAME TO answer_drafts",
)
"""Each draft carries its writer (the owner id of the process that typed it): a second live
agent-tui on the database neither shows nor sends the first one's half-typed text, and a draft
comes back only from a writer that is gone (a quit or a crash). Rows written before have no
writer (''), which counts as gone. SQLite cannot change a primary key: the tables are made
again with ``writer`` in theirs."""

_V17_KEPT_DRAFTS = ("ALTER TABLE draft_parts ADD COLUMN before_position INTEGER",)
"""A draft whose execution ended without committing it (a crash, a close) stays when the run
goes on: claimed again, its drafts are kept before the message position the run had reached
(``before_position``), and a commit deletes only the drafts still NULL there (the ones its own
execution streamed). A retry's first commit deleted the partial answer a crash had left."""

MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "core tables: jobs, runs, messages, tool calls, requests, events", _V1_CORE),
    Migration(2, "drafts and receipts", _V2_DRAFTS_RECEIPTS),
    Migration(3, "full-text search over message text", _V3_SEARCH),
    Migration(
        4, "indexes for the tool calls of a message and the open ones", _V4_TOOL_CALL_INDEXES
    ),
    Migration(
        5,
        "each fact once: events reference their rows, results live in the tool message,"
        " search keeps no copy of the text",
        _V5_SEARCH,
        _v5_apply,
    ),
    Migration(6, "blobs, file snapshots for rewinding, archived jobs", _V6_BLOBS_FILE_SNAPSHOTS),
    Migration(7, "composer drafts of the TUI, per job", _COMPOSER_DRAFTS),
    Migration(8, "runs queued for workers; durable consumers' cursors", _WORKERS_CONSUMERS),
    Migration(
        9, "search indexes committed messages in batches, not one by one", _V9_BATCHED_SEARCH
    ),
    Migration(
        10,
        "the tool calls of a run are found through its messages: no index of calls by run;"
        " a tool event that says only its transition keeps it in a few characters",
        _V10_DROP_TOOL_CALLS_BY_RUN,
        _v10_compact_tool_events,
    ),
    Migration(
        11,
        "message content may be stored compressed; search reads its text through a function",
        _V11_COMPRESSED_CONTENT,
    ),
    Migration(
        12,
        "a draft is the parts saved one after the other, not one row rewritten whole",
        _V12_DRAFT_PARTS,
    ),
    Migration(13, "the unsent answer to a question, per input request", _V13_ANSWER_DRAFTS),
    Migration(
        14, "a draft keeps the thinking that streamed, not only the text", _V14_THINKING_DRAFTS
    ),
    Migration(
        15, "the follow-ups queued for a job are kept with its draft", _V15_QUEUED_FOLLOW_UPS
    ),
    Migration(16, "each draft carries the process that wrote it", _V16_DRAFT_WRITERS),
    Migration(
        17,
        "the partial answer of an attempt that ended stays when its run goes on",
        _V17_KEPT_DRAFTS,
    ),
)

LATEST_VERSION = MIGRATIONS[-1].version


def user_version(conn: sqlite3.Connection) -> int:
    row = conn.execute("PRAGMA user_version").fetchone()
    return int(row[0])


def migrate(conn: sqlite3.Connection, *, path: str, upto: int | None = None) -> int:
    """Apply the migrations the database lacks (up to ``upto``), each with its version bump in
    one ``BEGIN IMMEDIATE`` transaction. ``conn`` must be in autocommit mode
    (``isolation_level=None``). Returns the resulting version."""
    target = LATEST_VERSION if upto is None else upto
    # Versions only grow, each with the commit of its migration: a database already at the
    # target needs no write lock at all. Taking it once per migration to find nothing to do
    # made every open (a CLI command, the TUI's first page) wait behind another process's
    # writes, 17 times.
    current = user_version(conn)
    if current > LATEST_VERSION:
        raise SchemaTooNew(too_new_message(path, current))
    if current >= target:
        return current
    for migration in MIGRATIONS:
        if migration.version > target:
            break
        conn.execute("BEGIN IMMEDIATE")
        try:
            current = user_version(conn)
            if current > LATEST_VERSION:
                raise SchemaTooNew(too_new_message(path, current))
            if current < migration.version:
                for statement in migration.statements:
                    conn.execute(statement)
                if migration.apply is not None:
                    migration.apply(conn)
                conn.execute(f"PRAGMA user_version = {int(migration.version)}")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
    return user_version(conn)


def too_new_message(path: str, version: int) -> str:
    return (
        f"{path}: database schema version {version} is newer than this agent-tui supports "
        f"({LATEST_VERSION}); upgrade agent-tui to open it"
    )
