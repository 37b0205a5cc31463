"""The SQLite implementation of the ``Store`` protocol (DESIGN §3-§6).

One long-lived sqlite3 connection per store (WAL, ``synchronous=NORMAL``, foreign keys on) and
one worker thread. Every operation is ONE synchronous function holding the store's lock: a write
is a whole ``BEGIN IMMEDIATE`` … ``COMMIT`` transaction, so a transaction never stays open
across an ``await`` and two stores on one file never deadlock. Reads run on the worker; a write
runs at once on the caller's thread when the connection is free and the file's write lock can
be taken without waiting (no thread hop), else on the worker, which waits up to the busy
timeout. The WAL is checkpointed by the worker, never inside a caller's commit.

Each write fetches the records the rule needs, asks ``runtime.store.rules`` (the only place that
decides transitions, tokens, revisions, totals and events) for a ``Plan``, and writes it with
``_apply``. Rows read back become records with ``model_construct``: they were validated on the
way in, so they are not validated twice.

Rules beyond the protocol docstrings:

- A run that is ``queued`` or terminal has no execution token; the token is kept while the run is
  ``input_required`` (an execution may still be waiting, e.g. an MCP elicitation).
- ``revision`` grows on every change of the run's row (state, step, usage, interrupted flag).
- Marking a queued run of a dead owner ``interrupted`` changes no state and emits no event;
  neither do ``set_run_step``, drafts, nor cancelling a request while its run stays where it is.
- ``list_messages`` with ``before_position`` returns the LAST ``limit`` messages before it
  (scrolling up); otherwise the first ``limit`` after ``after_position``. Both in position order.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import os
import sqlite3
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import cache, partial
from pathlib import Path
from typing import Any, Literal, TypeVar, cast

from pydantic import TypeAdapter

from runtime import errors, hints
from runtime.canonical import canonical_hash
from runtime.clock import Clock, SystemClock
from runtime.drafts import DraftRevisions, draft_revision
from runtime.events import (
    DURABLE_EVENT_ADAPTER,
    EVENT_ADAPTER,
    CheckpointCreated,
    DurableEvent,
    HistoryRepaired,
    MessageCommitted,
    RepairNote,
    RunNoted,
    ToolStateChanged,
)
from runtime.models import (
    Checkpoint,
    ContentBlock,
    Draft,
    DraftKind,
    Failure,
    InputKind,
    InputRequest,
    InputRequestState,
    Job,
    Message,
    Role,
    Run,
    RunState,
    SearchHit,
    TextBlock,
    ToolCall,
    ToolCallState,
    ToolResultBlock,
    Usage,
    trusted,
)
from runtime.store import rules
from runtime.store.base import (
    CutShortUsage,
    FileContent,
    FileSnapshot,
    LeaseRenewer,
    NewInputRequest,
    NewMessage,
    NewRun,
    NewToolCall,
    Page,
    Pricing,
    RecoveryReport,
    StaleOwner,
    StepCommit,
    ToolStateChange,
    WrittenDraft,
)
from runtime.store.checks import SQLITE_HEADER as SQLITE_HEADER
from runtime.store.checks import check_database_file as check_database_file
from runtime.store.checks import (
    damaged_file,
    database_writable,
    folder_writable,
    read_only_uri,
)
from runtime.store.migrations import (
    EVENT_CODES_V5,
    INDEX_PENDING_MESSAGES,
    LATEST_VERSION,
    compact_tool_payload,
    encode_event_v5,
    event_payload,
    migrate,
)
from runtime.store.rules import Plan
from runtime.store.stored_content import (
    content_json,
    encode_content,
    parse_json,
    register_functions,
    remember_text,
)

__all__ = ["SNIPPET_CLOSE", "SNIPPET_OPEN", "SqliteStore", "canonical_hash", "open_sqlite_store"]

R = TypeVar("R")
Conn = sqlite3.Connection

BUSY_TIMEOUT_MS = 10_000
CHECKPOINT_EVERY = 100
"""Commits between two WAL checkpoints (run on the worker thread)."""
CATCH_UP_PASSES = 6
CATCH_UP_FRAMES = 64
"""After its first copy, the checkpoint thread copies again what came meanwhile, up to
CATCH_UP_PASSES times, until a pass finds no more than this many new frames."""
RESTART_WAIT_MS = 100
"""How long the checkpoint thread waits for the write lock (and for readers of old frames) to
have the WAL start over; busy longer, it tries again at the next round."""
WAL_SIZE_LIMIT = 64 * 1024 * 1024
"""Bytes a WAL file is cut back to when it starts over (a burst, a huge tool result, may have
left a larger one)."""
HOLD_WAIT = 0.02
"""Seconds an operation on the caller's thread waits, blocking, for the worker to hand back
the connection before it goes to the worker (``SqliteStore._hold``)."""
_DELETE_EMPTY_DRAFT = (
    "DELETE FROM composer_drafts WHERE job_id = ? AND writer = ? AND text = '' AND queued = '[]'"
)
"""A writer's composer row of a job goes once it holds neither a draft nor a queued message."""
_OWNER_OR_WRITER = (
    "EXISTS (SELECT 1 FROM owners WHERE owner_id = ?1)"
    " OR EXISTS (SELECT 1 FROM composer_drafts WHERE writer = ?1)"
    " OR EXISTS (SELECT 1 FROM answer_drafts WHERE writer = ?1)"
)
"""An owner that ``release_owner`` marks gone: one that held a lease, or left drafts (a process
that only read, or was refused, writes nothing)."""


def _queued_texts(stored: str | None) -> list[str]:
    """The queued messages of a composer row (a JSON list of strings)."""
    texts = json.loads(stored) if stored else []
    return [str(text) for text in texts] if isinstance(texts, list) else []


def written_draft(row: Mapping[str, Any]) -> WrittenDraft:
    """A draft row with its writer's owner facts (both stores' draft queries select them)."""
    return WrittenDraft(
        writer=row["writer"],
        text=row["text"],
        queued=tuple(_queued_texts(row["queued"])),
        updated_at=row["updated_at"],
        writer_released=bool(row["released"]),
        writer_lease_live=bool(row["lease_live"]),
    )


_SQLITE_FULL = 13
"""SQLITE_FULL: the disk (or ``max_page_count``) is full."""

_READ_ONLY_FOR_GOOD = frozenset((8, 8 | 4 << 8, 8 | 6 << 8))
"""SQLITE_READONLY and its DBMOVED and DIRECTORY forms: the file (or its folder, or where it
was) cannot be written, and will not be until it is opened again. Not the forms another
connection's recovery or a lock being set up give (RECOVERY, CANTLOCK, CANTINIT), which pass."""

PAGE_SIZE = 8_192
TITLE_LENGTH = rules.TITLE_LENGTH
SNIPPET_OPEN = "«"
SNIPPET_CLOSE = "»"
SEARCH_WINDOW = 2_000
_OPEN_RUN_STATES = (RunState.QUEUED, RunState.RUNNING, RunState.INPUT_REQUIRED)
_committed = threading.local()
"""While a write transaction runs (on whichever thread), ``_committed.events`` collects what
``_emit`` wrote, for ``SqliteStore._write`` to report once it committed; ``_committed.refs``
holds the row number (``n``) of each run, message, tool call and checkpoint the transaction read
or wrote, keyed by (table, id): the events and the result references it writes point at rows
by number without looking their text ids up again."""
"""Search ranks the best matches among this many most recent ones."""

_CONTENT: TypeAdapter[list[ContentBlock]] = TypeAdapter(list[ContentBlock])
_JSON = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
"""One encoder for every row written (``json.dumps`` with options builds one per call)."""


def _dumps(value: Any) -> str:
    return _JSON.encode(value)


# --- rows → records -----------------------------------------------------------------------------
#
# Records read on every step are made from the row with ``trusted`` (the tool calls: the store
# wrote those rows from validated records) or validated from it (pydantic-core's path, from a
# dict or straight from JSON text): in pydantic 2.14 that costs a third to a half of
# ``model_construct``, which loops over the fields in Python. Rows read rarely are constructed.


def _usage_of(row: sqlite3.Row) -> Usage:
    return Usage.model_construct(
        input_tokens=row["input_tokens"],
        output_tokens=row["output_tokens"],
        cache_read_tokens=row["cache_read_tokens"],
        cache_write_tokens=row["cache_write_tokens"],
    )


def _usage_json(text: str | None) -> Usage | None:
    return Usage.model_validate_json(text) if text else None


def _content(value: str | bytes) -> list[ContentBlock]:
    # Validation straight from the JSON text is pydantic-core's fast path: a third of the cost
    # of ``json.loads`` then ``model_construct`` per block (pydantic 2.14), and it checks the
    # row on the way out.
    return _CONTENT.validate_json(content_json(value))


def _stored_content(content: list[ContentBlock]) -> str | bytes:
    """The ``messages.content`` value of ``content`` (JSON, compressed when that saves space),
    its searchable text noted for the search indexing (``remember_text``)."""
    has_images = any(isinstance(b, ToolResultBlock) and b.images for b in content)
    value = encode_content(_CONTENT.dump_json(content), has_images=has_images)
    remember_text(value, _searchable_text(content))
    return value


def _searchable_text(content: list[ContentBlock]) -> str:
    """``message_text`` of content stored from ``content``: its text blocks and tool result
    contents, one per line (both are strings by their models)."""
    return "\n".join(
        [
            block.text if isinstance(block, TextBlock) else block.content
            for block in content
            if isinstance(block, (TextBlock, ToolResultBlock))
        ]
    )


def _job(row: sqlite3.Row) -> Job:
    return Job.model_construct(
        id=row["id"],
        title=row["title"],
        workspace=row["workspace"],
        agent=row["agent"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        usage=_usage_of(row),
        cost_usd=row["cost_usd"],
        archived=bool(row["archived"]),
        latest_run_state=RunState(row["latest_run_state"]) if row["latest_run_state"] else None,
    )


_RUN_PLAIN = (
    "id",
    "job_id",
    "agent",
    "model",
    "revision",
    "input",
    "parent_run_id",
    "parent_tool_call_id",
    "history_run_id",
    "history_position",
    "forked_from_checkpoint_id",
    "retry_of_run_id",
    "idempotency_key",
    "owner_id",
    "execution_token",
    "step",
    "max_steps",
    "outcome",
    "cancel_reason",
    "cost_usd",
    "context_tokens",
    "created_at",
    "updated_at",
    "state",
    "interrupted",
    "detached",
)


_USAGE_COLUMNS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")


def _columns(row: sqlite3.Row) -> dict[str, Any]:
    """``row`` as a dict by column name: ``row[name]`` compares the name with each column's in
    turn (ignoring case), so reading the run's 30 columns by name cost more than validating
    them (4.5 against 3 us; the dict is made in 1.6)."""
    return dict(zip(row.keys(), row, strict=True))


def _run(row: sqlite3.Row) -> Run:
    return _run_of(_columns(row))


_RUN_KEY_COLUMNS = (*_RUN_PLAIN, "failure", *_USAGE_COLUMNS)
_KNOWN_RUNS_KEPT = 64
_known_runs: dict[tuple[Any, ...], Run] = {}
"""Run rows (every column a ``Run`` is made of, as stored) -> the ``Run`` they make: those
this process wrote or read last. Each step reads its run row twice, as the store's previous
commit wrote it; validating its 30 columns again cost 13 us of a step's 1,000. A row is
looked up by all of its values, never by id or revision (a row may change without its
revision: ``delete_job`` clears a reference), so a hit is the run the row makes."""


def _remember_run(key: tuple[Any, ...], run: Run) -> None:
    _known_runs[key] = run
    while len(_known_runs) > _KNOWN_RUNS_KEPT:
        try:
            del _known_runs[next(iter(_known_runs))]
        except (KeyError, RuntimeError, StopIteration):  # another thread's change meanwhile
            break


def _written_run_key(run: Run) -> tuple[Any, ...]:
    """The values ``run``'s row holds once ``_update_run`` wrote it, as SQLite gives them
    back (a bool equals its 0 or 1 and a state its text, hashes included)."""
    failure = run.failure.model_dump_json() if run.failure else None
    usage = run.usage
    fields = run.__dict__  # a pydantic model's fields: faster than getattr through its hooks
    return (
        *[fields[key] for key in _RUN_PLAIN],
        failure,
        usage.input_tokens,
        usage.output_tokens,
        usage.cache_read_tokens,
        usage.cache_write_tokens,
    )


def _run_of(columns: Mapping[str, Any]) -> Run:
    key = tuple([columns[name] for name in _RUN_KEY_COLUMNS])
    known = _known_runs.get(key)
    if known is not None:
        return known
    # Validation from a dict is pydantic-core's fast path (a third of ``model_construct``'s
    # cost, which loops over the fields in Python), and checks the row on the way out.
    values = {key: columns[key] for key in _RUN_PLAIN}
    failure = columns["failure"]
    values["failure"] = json.loads(failure) if failure else None
    values["usage"] = {key: columns[key] for key in _USAGE_COLUMNS}
    run = Run.model_validate(values)
    _remember_run(key, run)
    return run


def _message(row: sqlite3.Row) -> Message:
    return Message.model_validate(
        {
            "id": row["id"],
            "run_id": row["run_id"],
            "job_id": row["job_id"],
            "position": row["position"],
            "role": row["role"],
            "content": _content(row["content"]),
            "model": row["model"],
            "usage": _usage_json(row["usage"]),
            "cost_usd": row["cost_usd"],
            "created_at": row["created_at"],
        }
    )


_TOOL_SELECT = (
    "SELECT t.*, m.content AS result_message FROM tool_calls AS t"
    " LEFT JOIN messages AS m ON m.n = t.result_in"
)
"""Tool call rows with the tool message that carries a result kept there (``_tool_call``)."""


def _carried_result(content: str | bytes, tool_call_id: str) -> str | None:
    for block in parse_json(content_json(content)):
        if block.get("tool_call_id") == tool_call_id and block.get("type") == "tool_result":
            return cast(str, block.get("content"))
    return None


def _tool_call(row: sqlite3.Row) -> ToolCall:
    result = row["result"]
    if result is None and row["result_in"] is not None and row["result_message"] is not None:
        result = _carried_result(row["result_message"], row["id"])
    # A row this store wrote from a validated record: made without validating it again.
    return trusted(
        ToolCall,
        {
            "id": row["id"],
            "run_id": row["run_id"],
            "job_id": row["job_id"],
            "message_id": row["message_id"],
            "index": row["idx"],
            "provider_id": row["provider_id"],
            "name": row["name"],
            "arguments": json.loads(row["arguments"]),
            "state": ToolCallState(row["state"]),
            "idempotent": bool(row["idempotent"]),
            "step": row["step"],
            "result": result,
            "error": row["error"],
            "child_run_id": row["child_run_id"],
            "created_at": row["created_at"],
            "started_at": row["started_at"],
            "finished_at": row["finished_at"],
        },
    )


def _input_request(row: sqlite3.Row) -> InputRequest:
    return InputRequest.model_construct(
        id=row["id"],
        run_id=row["run_id"],
        job_id=row["job_id"],
        kind=InputKind(row["kind"]),
        prompt=row["prompt"],
        options=json.loads(row["options"]),
        answer_schema=json.loads(row["schema"]),
        tool_call_id=row["tool_call_id"],
        arguments_digest=row["arguments_digest"],
        detail=json.loads(row["detail"]),
        state=InputRequestState(row["state"]),
        answer=json.loads(row["answer"]) if row["answer"] is not None else None,
        created_at=row["created_at"],
        answered_at=row["answered_at"],
    )


def _checkpoint(row: sqlite3.Row) -> Checkpoint:
    return Checkpoint.model_construct(
        id=row["id"],
        run_id=row["run_id"],
        job_id=row["job_id"],
        step=row["step"],
        last_position=row["last_position"],
        usage=Usage.model_construct(**json.loads(row["usage"])),
        pending_tool_call_ids=json.loads(row["pending_tool_call_ids"]),
        created_at=row["created_at"],
    )


def _encode_cursor(*parts: Any) -> str:
    raw = base64.urlsafe_b64encode(_dumps(list(parts)).encode()).decode()
    return raw.rstrip("=")


def _decode_cursor(cursor: str, kinds: tuple[type | tuple[type, ...], ...]) -> list[Any]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        parts = json.loads(base64.urlsafe_b64decode(padded.encode()))
    except (ValueError, TypeError) as exc:
        raise errors.InvalidInput(f"invalid page cursor: {cursor!r}") from exc
    if (
        not isinstance(parts, list)
        or len(parts) != len(kinds)
        or not all(isinstance(p, k) for p, k in zip(parts, kinds, strict=True))
    ):
        raise errors.InvalidInput(f"invalid page cursor: {cursor!r}")
    return parts


def fts_query(text: str) -> str | None:
    """The user's words as a safe FTS5 query: every word a quoted phrase (so punctuation and
    operators are plain text), all required, the last one matched as a prefix."""
    words = [w for w in text.split() if any(ch.isalnum() for ch in w)]
    if not words:
        return None
    phrases = ['"' + w.replace('"', '""') + '"' for w in words]
    phrases[-1] += "*"
    return " ".join(phrases)


class SqliteStore:
    """A ``Store`` on one SQLite file. ``await open()`` before use, ``await close()`` after."""

    def __init__(
        self,
        path: str | Path,
        *,
        clock: Clock | None = None,
        read_only: bool = False,
        peek: bool = False,
    ) -> None:
        self.path = Path(path)
        self.read_only = read_only or peek
        """Opened by a process that only looks (DESIGN §4.4): it never indexes messages for
        search (a search then finds what the writers indexed) nor copies the WAL back on close,
        so it takes no write lock a process working runs would wait for."""
        self.peek = peek
        """Read through SQLite's own read-only mode (``read_only_uri``) however writable the
        file: nothing is set up or migrated (a database of another schema is refused), and the
        last connection's close copies no write-ahead log back. For a look before anything
        was checked (the TUI's first page, read before its command line is)."""
        self._clock: Clock = clock or SystemClock()
        self._draft_revisions = DraftRevisions()
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        """Held by whichever thread runs an operation on the connection, for that operation."""
        self._checkpointer: sqlite3.Connection | None = None
        """A second connection, used on the checkpoint thread only, that copies the WAL back
        into the database while this one goes on committing (opened at the first checkpoint)."""
        self._checkpoints: ThreadPoolExecutor | None = None
        """The checkpoint thread: not the worker, so an operation sent to the worker never
        waits behind a checkpoint's copy and sync."""
        self._checkpointing = threading.Event()
        """Set while a checkpoint is queued or running: the next one is not queued behind it."""
        self._worker: ThreadPoolExecutor | None = None
        self._commits = 0
        self._listeners: list[Callable[[int, list[DurableEvent]], None]] = []
        self._damage: errors.DatabaseCorrupt | None = None
        """Set once a read or write found the file damaged: every write is refused from then
        on, and closing neither indexes nor checkpoints (nothing more is written to the file)."""
        self._damage_listeners: list[Callable[[errors.DatabaseCorrupt], None]] = []

    # --- plumbing ------------------------------------------------------------------------------

    async def __aenter__(self) -> SqliteStore:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _now(self) -> float:
        return self._clock.now()

    def _connection(self) -> tuple[sqlite3.Connection, ThreadPoolExecutor]:
        if self._conn is None or self._worker is None:
            raise errors.DatabaseError(f"{self.path}: the store is not open")
        return self._conn, self._worker

    def _translated(self, exc: sqlite3.Error) -> errors.AgentTuiError:
        """Our error for ``exc``, on the thread that awaited the operation. A damaged file is
        remembered and its listeners told (``on_damaged``), once."""
        if isinstance(exc, sqlite3.IntegrityError):
            return errors.ConflictError(f"{self.path}: {exc}")
        damage = damaged_file(self.path, exc)
        if damage is None:
            if getattr(exc, "sqlite_errorcode", 0) in _READ_ONLY_FOR_GOOD:
                return errors.DatabaseReadOnly(f"{self.path}: {exc}")
            if getattr(exc, "sqlite_errorcode", 0) == _SQLITE_FULL:
                return errors.DatabaseFull(f"{self.path}: {exc}")
            return errors.DatabaseError(f"{self.path}: {exc}")
        if self._damage is None:
            self._damage = damage
            for listener in list(self._damage_listeners):
                listener(damage)
        return damage

    def _locked(self, fn: Callable[[Conn], R], conn: Conn) -> R:
        """``fn(conn)`` on the worker thread: it may wait for another process's lock up to the
        busy timeout (a commit on the caller's thread never waits: the timeout is 0 between
        operations)."""
        with self._lock:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            try:
                return fn(conn)
            finally:
                conn.execute("PRAGMA busy_timeout = 0")

    async def _call(self, fn: Callable[[Conn], R]) -> R:
        """Run ``fn(connection)`` on the store's worker thread, one operation at a time."""
        conn, worker = self._connection()
        try:
            return await asyncio.get_running_loop().run_in_executor(worker, self._locked, fn, conn)
        except sqlite3.Error as exc:
            raise self._translated(exc) from exc

    async def _hold(self) -> Conn | None:
        """The connection with its lock held, for an operation on the caller's thread; None
        when the worker still holds it after finishing what it was doing when asked (then the
        operation goes to the worker behind it)."""
        conn, worker = self._connection()
        if self._lock.acquire(blocking=False):
            return conn
        # Wait a moment for the worker right here, giving up the GIL: while the event loop is
        # busy (a run streaming flat out), a thread that waits for the GIL seldom wins it, so
        # the worker took up to seconds to finish a few statements and hand back the
        # connection (and a hop to it to ask, as below, took as long again).
        if self._lock.acquire(timeout=HOLD_WAIT):
            return conn
        await asyncio.get_running_loop().run_in_executor(worker, _nothing)
        conn, _ = self._connection()
        return conn if self._lock.acquire(blocking=False) else None

    async def _read(self, fn: Callable[[Conn], R]) -> R:
        """A small read (rows by key, a page, the rows of one run or job): run at once on the
        caller's thread when the connection is free or once the worker is done with it (see
        ``_hold``), else on the worker as ``_call`` does.

        On the worker, every row SQLite steps through gives up the GIL and must win it back;
        while the event loop's thread is busy (a run streaming flat out), each of those waits
        for the interpreter's switch interval (5 ms), so a 100-row page took half a second to
        read and the screen waited for it. Inline, it takes what SQLite takes. The connection's
        busy timeout is 0 here, so a read never waits for another process: in WAL a read is
        only refused in rare moments (recovery), and is then tried again on the worker, which
        may wait. Scans whose cost grows with the database (search, counts, lists with filters)
        stay on the worker with ``_call``."""
        conn = await self._hold()
        if conn is not None:
            try:
                result = fn(conn)
            except sqlite3.OperationalError:
                done = False  # locked or busy: no side effects, so the worker tries it again
            except sqlite3.Error as exc:
                raise self._translated(exc) from exc
            else:
                done = True
            finally:
                self._lock.release()
            if done:
                # Still a suspension point, as the hop to the worker was (see ``_write``).
                await asyncio.sleep(0)
                return result
        return await self._call(fn)

    async def _write(self, fn: Callable[[Conn], R]) -> R:
        """One write transaction, reported to the ``on_commit`` listeners once it committed.

        Run at once on the caller's thread when the connection is free and no other process
        holds the write lock (a step's commit is a millisecond or two: a hop to a thread and
        back costs more than that on a busy machine); otherwise on the worker thread, which
        waits for the lock up to the busy timeout.

        When the worker itself holds the connection (its search indexing after every
        CHECKPOINT_EVERY commits, a long read), the transaction waits for the worker to be done
        and then runs here: on the worker, each of its ~25 statements gives the GIL up and, with
        the event loop's thread busy, waits up to the switch interval (5 ms) to win it back, so
        a step's commit took 5-10 ms there instead of half of one."""
        if self._damage is not None:
            raise self._damage  # writing to a damaged file may spread the damage
        conn = await self._hold()
        if conn is not None:
            try:
                try:
                    conn.execute("BEGIN IMMEDIATE")  # busy_timeout is 0 here: never waits
                except sqlite3.OperationalError:
                    began = False  # another process writes: wait for it on the worker
                else:
                    began = True
                if began:
                    try:
                        result, events = _transaction_body(fn, conn)
                    except sqlite3.Error as exc:
                        raise self._translated(exc) from exc
                    self._after_commit(conn)
            finally:
                self._lock.release()
            if began:
                self._report(events)
                # Still a suspension point, as a hop was: a caller committing in a loop never
                # starves the other tasks (the UI, lease renewal) of the event loop.
                await asyncio.sleep(0)
                return result
        result, events = await self._call(partial(_in_transaction, fn))
        self._report(events)
        return result

    def _report(self, events: list[DurableEvent]) -> None:
        if events:
            before = (events[0].seq or 1) - 1
            for listener in self._listeners:
                listener(before, events)

    def _after_commit(self, conn: Conn) -> None:
        """Commits on the caller's thread never checkpoint the WAL themselves (that may write
        and sync megabytes), nor index their messages for search; every CHECKPOINT_EVERY of
        them, the worker does both."""
        self._commits += 1
        if self._commits % CHECKPOINT_EVERY == 0 and self._worker is not None:
            self._worker.submit(self._maintain, conn)

    def _maintain(self, conn: Conn) -> None:
        """On the worker: index the new messages for search (a write, so under the lock), then
        hand the WAL checkpoint to the checkpoint thread. A passive checkpoint on the second
        connection never blocks a writer, so commits go on meanwhile, on the caller's thread or
        on the worker, instead of waiting for the copy and its sync (10-20 ms every 50 steps
        when the worker did it itself)."""
        with contextlib.suppress(sqlite3.Error):  # busy: the next round or a search does it
            self._locked(_index_pending, conn)
        checkpoints = self._checkpoints
        if checkpoints is not None and not self._checkpointing.is_set():
            self._checkpointing.set()
            with contextlib.suppress(RuntimeError):  # shut down: closing checkpoints anyway
                checkpoints.submit(self._checkpoint)

    def _checkpoint(self) -> None:
        """On the checkpoint thread: copy the WAL back into the database file, then have it
        start over.

        SQLite starts the WAL over only at a write that begins when every frame in it has been
        copied back, and a run committing flat out always adds some while a passive checkpoint
        copies: the WAL grew by every commit for as long as the store was open (230 MB after
        1,000 steps of engine_bench, whose steps 990-1,000 cost up to 1.7x steps 1-10 for it).
        So the copy is followed by passes copying what came meanwhile (each finds less:
        copying is faster than committing), then by a RESTART checkpoint, which holds the write
        lock while it copies the last few frames and has the next write start the WAL over. A
        commit meanwhile waits on the worker (``_write``), not on the event loop."""
        try:
            if self._checkpointer is None:
                with contextlib.suppress(sqlite3.Error):
                    self._checkpointer = sqlite3.connect(
                        str(self.path),
                        isolation_level=None,
                        check_same_thread=False,
                        timeout=RESTART_WAIT_MS / 1000,
                    )
            if self._checkpointer is not None:
                _checkpoint_wal(self._checkpointer)
                _restart_wal(self._checkpointer)
        finally:
            self._checkpointing.clear()

    @property
    def location(self) -> Path:
        return self.path

    async def open(self) -> None:
        if self._conn is not None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        check_database_file(self.path)
        worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agent-tui-store")
        loop = asyncio.get_running_loop()
        try:
            conn = await loop.run_in_executor(worker, self._connect)
        except sqlite3.Error as exc:
            worker.shutdown(wait=False)
            raise self._translated(exc) from exc
        except BaseException:
            worker.shutdown(wait=False)
            raise
        self._conn, self._worker = conn, worker
        self._checkpoints = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="agent-tui-checkpoint"
        )

    def _connect(self) -> Conn:
        if self.peek or (self.read_only and not database_writable(self.path)):
            # A copy or a backup in a read-only folder (or a read-only file): nothing can be set
            # up or migrated, and in the folder SQLite cannot make its -wal and -shm files
            # (``read_only_uri``).
            uri = read_only_uri(self.path)
            conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
            setup = self._setup_to_read
        else:
            conn = sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False)
            setup = self._setup
        try:
            setup(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _setup_to_read(self, conn: Conn) -> None:
        conn.row_factory = sqlite3.Row
        register_functions(conn)
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA cache_size = -32000")
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        if version == LATEST_VERSION:
            return
        where = (
            f"the database folder {self.path.parent}"
            if not folder_writable(self.path)
            else "the database file"
        )
        needs = (
            "is empty and needs setting up"
            if version == 0
            else f"has schema version {version} and needs migrating to {LATEST_VERSION}"
        )
        raise errors.DatabaseError(
            f"{self.path}: the database {needs}, but {where} is not writable; "
            "open it once where it can be written"
        )

    def _setup(self, conn: Conn) -> None:
        conn.row_factory = sqlite3.Row
        register_functions(conn)
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        # Only a new, empty file takes a page size. SQLite's default 4 KiB wrote fewer bytes to
        # the WAL per commit (store_bench: 7% more steps a second, 1.27x the raw bytes against
        # 1.32x), but with it the engine's steps 990-1,000 cost 1.12-1.32x steps 1-10 against
        # 0.62-1.0x with 8 KiB (engine_bench, alternating runs; budget 1.2x): kept at 8 KiB.
        conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA cache_size = -32000")
        conn.execute("PRAGMA wal_autocheckpoint = 0")
        conn.execute(f"PRAGMA journal_size_limit = {WAL_SIZE_LIMIT}")
        migrate(conn, path=str(self.path))
        conn.execute("PRAGMA busy_timeout = 0")  # see _locked

    def _closed(self, conn: Conn) -> None:
        checkpoints, self._checkpoints = self._checkpoints, None
        if checkpoints is not None:
            checkpoints.shutdown(wait=True)  # the checkpointer is free once it returns
        if self._checkpointer is not None:
            self._checkpointer.close()
            self._checkpointer = None
        with self._lock:
            if self.read_only or self._damage is not None:
                conn.close()
            else:
                _close_connection(conn)

    async def close(self) -> None:
        conn, worker = self._conn, self._worker
        self._conn = self._worker = None
        if conn is None or worker is None:
            return
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(worker, self._closed, conn)
        finally:
            worker.shutdown(wait=True)

    # --- owners and recovery ---------------------------------------------------------------------

    async def register_owner(self, owner_id: str, *, lease_seconds: float) -> None:
        now = self._now()

        def tx(conn: Conn) -> None:
            conn.execute(
                "INSERT INTO owners (owner_id, pid, lease_seconds, lease_expires_at,"
                " heartbeat_at, released, recovered_at) VALUES (?, ?, ?, ?, ?, 0, NULL)"
                " ON CONFLICT (owner_id) DO UPDATE SET pid = excluded.pid,"
                " lease_seconds = excluded.lease_seconds,"
                " lease_expires_at = excluded.lease_expires_at,"
                " heartbeat_at = excluded.heartbeat_at, released = 0, recovered_at = NULL",
                (owner_id, os.getpid(), lease_seconds, now + lease_seconds, now),
            )

        await self._write(tx)

    async def heartbeat(self, owner_id: str) -> None:
        now = self._now()

        def tx(conn: Conn) -> None:
            row = conn.execute("SELECT * FROM owners WHERE owner_id = ?", (owner_id,)).fetchone()
            owner = (
                rules.Owner(
                    owner_id=row["owner_id"],
                    lease_seconds=row["lease_seconds"],
                    lease_expires_at=row["lease_expires_at"],
                    released=bool(row["released"]),
                    recovered_at=row["recovered_at"],
                )
                if row is not None
                else None
            )
            expires_at = rules.heartbeat(owner, owner_id, now)
            conn.execute(
                "UPDATE owners SET lease_expires_at = ?, heartbeat_at = ? WHERE owner_id = ?",
                (expires_at, now, owner_id),
            )

        await self._write(tx)

    async def release_owner(self, owner_id: str) -> None:
        now = self._now()

        def tx(conn: Conn) -> None:
            conn.execute(
                "INSERT INTO owners (owner_id, pid, lease_seconds, lease_expires_at,"
                " heartbeat_at, released, recovered_at) SELECT ?1, ?2, 0, ?3, ?3, 1, NULL"
                f" WHERE {_OWNER_OR_WRITER}"
                " ON CONFLICT (owner_id) DO UPDATE SET released = 1,"
                " lease_expires_at = min(lease_expires_at, excluded.lease_expires_at)",
                (owner_id, os.getpid(), now),
            )

        await self._write(tx)

    async def live_owners(self) -> list[str]:
        now = self._now()

        def read(conn: Conn) -> list[str]:
            rows = conn.execute(
                "SELECT owner_id FROM owners WHERE released = 0 AND recovered_at IS NULL"
                " AND lease_expires_at >= ? ORDER BY owner_id",
                (now,),
            )
            return [r[0] for r in rows]

        return await self._read(read)

    async def recover_expired(self, *, price: Pricing | None = None) -> RecoveryReport:
        now = self._now()

        def tx(conn: Conn) -> RecoveryReport:
            report = RecoveryReport()
            rows = conn.execute(
                "SELECT r.* FROM runs AS r LEFT JOIN owners AS o ON o.owner_id = r.owner_id"
                " WHERE r.state IN ('queued', 'running') AND r.owner_id IS NOT NULL"
                " AND (o.owner_id IS NULL OR o.released = 1 OR o.lease_expires_at < ?)"
                " ORDER BY r.n",
                (now,),
            ).fetchall()
            _recover_rows(conn, rows, now, report, price)
            conn.execute(
                "UPDATE owners SET recovered_at = ? WHERE recovered_at IS NULL"
                " AND (released = 1 OR lease_expires_at < ?)",
                (now, now),
            )
            return report

        return await self._write(tx)

    # --- runs ------------------------------------------------------------------------------------

    async def create_run(self, new_run: NewRun) -> Run:
        now = self._now()
        input_hash = canonical_hash(new_run.model_dump(mode="json", exclude={"owner_id"}))

        def tx(conn: Conn) -> Run:
            key = new_run.idempotency_key
            if key is not None:
                existing = conn.execute(
                    "SELECT * FROM runs WHERE idempotency_key = ?", (key,)
                ).fetchone()
                if existing is not None:
                    replay = rules.idempotent_replay(
                        _run(existing), existing["idempotency_hash"], input_hash
                    )
                    if replay is not None:
                        return replay
            _check_references(conn, new_run)
            active, archived = None, False
            if new_run.job_id is not None and new_run.parent_run_id is None:
                found = conn.execute(
                    "SELECT * FROM runs WHERE job_id = ? AND parent_run_id IS NULL"
                    " AND state IN ('queued', 'running', 'input_required') LIMIT 1",
                    (new_run.job_id,),
                ).fetchone()
                active = _run(found) if found is not None else None
                archived = bool(
                    conn.execute(
                        "SELECT archived FROM jobs WHERE id = ?", (new_run.job_id,)
                    ).fetchone()[0]
                )
            plan, run = rules.create_run(
                new_run, input_hash=input_hash, active_root=active, job_archived=archived, now=now
            )
            _apply(conn, plan)
            return run

        return await self._write(tx)

    async def claim_run(self, run_id: str, *, owner_id: str) -> Run:
        now = self._now()

        def tx(conn: Conn) -> Run:
            run, position, has_drafts = _fetch_run_for_message(conn, run_id)
            plan = rules.claim_run(
                run,
                owner_id=owner_id,
                token=rules.new_id(),
                now=now,
                next_position=position if has_drafts else None,
            )
            _apply(conn, plan)
            return plan.runs[0][0]

        return await self._write(tx)

    async def finish_run(
        self,
        run_id: str,
        *,
        token: str,
        to: RunState,
        outcome: str | None = None,
        failure: Failure | None = None,
    ) -> Run:
        now = self._now()
        target = RunState(to)
        if target not in rules.FINISH_TARGETS:
            raise errors.InvalidInput(f"finish_run goes to completed, failed or queued, not {to}")

        def tx(conn: Conn) -> Run:
            plan = rules.finish_run(
                _fetch_run(conn, run_id),
                token=token,
                to=target,
                outcome=outcome,
                failure=failure,
                now=now,
            )
            _apply(conn, plan)
            return plan.runs[0][0]

        return await self._write(tx)

    async def cancel_run(
        self,
        run_id: str,
        *,
        reason: str | None = None,
        expected_revision: int | None = None,
        cut_short: CutShortUsage | None = None,
    ) -> Run:
        now = self._now()

        def tx(conn: Conn) -> Run:
            run = _fetch_run(conn, run_id)
            open_calls = [
                _tool_call(r)
                for r in conn.execute(
                    f"{_TOOL_SELECT} WHERE t.run_id = ?"
                    " AND t.state IN ('pending', 'running') ORDER BY t.n",
                    (run_id,),
                )
            ]
            pending = [
                _input_request(r)
                for r in conn.execute(
                    "SELECT * FROM input_requests WHERE run_id = ? AND state = 'pending'"
                    " ORDER BY n",
                    (run_id,),
                )
            ]
            plan = rules.cancel_run(
                run,
                open_calls=open_calls,
                pending_requests=pending,
                reason=reason,
                expected_revision=expected_revision,
                now=now,
                cut_short=cut_short,
                cut_short_committed=cut_short is not None
                and _message_exists(conn, cut_short.message_id),
            )
            _apply(conn, plan)
            return plan.runs[0][0]

        return await self._write(tx)

    async def note_cut_short(
        self, run_id: str, *, token: str, owner_id: str | None = None, cut_short: CutShortUsage
    ) -> Run:
        now = self._now()

        def tx(conn: Conn) -> Run:
            run = _fetch_run(conn, run_id)
            plan = rules.note_cut_short(
                run,
                token=token,
                owner_id=owner_id,
                cut_short=cut_short,
                committed=_message_exists(conn, cut_short.message_id),
                now=now,
            )
            if not plan.runs:
                return run
            _apply(conn, plan)
            return plan.runs[0][0]

        return await self._write(tx)

    async def set_run_step(self, run_id: str, *, token: str, step: int) -> Run:
        now = self._now()

        def tx(conn: Conn) -> Run:
            plan = rules.set_run_step(_fetch_run(conn, run_id), token=token, step=step, now=now)
            _apply(conn, plan)
            return plan.runs[0][0]

        return await self._write(tx)

    # --- messages --------------------------------------------------------------------------------

    async def commit_message(
        self,
        run_id: str,
        *,
        token: str,
        message: NewMessage,
        tool_calls: list[NewToolCall] | None = None,
        step: int | None = None,
    ) -> tuple[Message, list[ToolCall]]:
        now = self._now()

        def tx(conn: Conn) -> tuple[Message, list[ToolCall]]:
            run, position, has_drafts = _fetch_run_for_message(conn, run_id)
            plan, committed, calls = rules.commit_message(
                run,
                token=token,
                position=position,
                message=message,
                tool_calls=tool_calls or (),
                step=step,
                now=now,
            )
            _apply(conn, _skip_empty_draft_delete(plan, has_drafts))
            return committed, calls

        return await self._write(tx)

    async def save_draft(
        self,
        run_id: str,
        *,
        token: str,
        message_id: str,
        text: str,
        start: int = 0,
        kind: DraftKind = DraftKind.TEXT,
        owner_id: str | None = None,
    ) -> None:
        now = self._now()
        kind = DraftKind(kind)

        def tx(conn: Conn) -> None:
            rules.check_draft_writer(_fetch_run(conn, run_id), token, owner_id)
            if _message_exists(conn, message_id):
                return  # committed meanwhile (a last save racing the commit): no draft of it
            conn.execute(
                "DELETE FROM draft_parts"
                " WHERE run_id = ? AND message_id = ? AND kind = ? AND start >= ?",
                (run_id, message_id, kind.value, start),
            )
            conn.execute(
                "INSERT INTO draft_parts (run_id, message_id, kind, start, text, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (run_id, message_id, kind.value, start, text, now),
            )

        await self._write(tx)

    async def get_drafts(self, run_id: str) -> list[Draft]:
        def read(conn: Conn) -> list[Draft]:
            rows = conn.execute("SELECT * FROM draft_parts WHERE run_id = ?", (run_id,))
            return rules.drafts_from_parts(rows.fetchall())

        return await self._read(read)

    # --- tool calls ------------------------------------------------------------------------------

    async def set_tool_state(
        self,
        tool_call_id: str,
        *,
        token: str,
        to: ToolCallState,
        result: str | None = None,
        error: str | None = None,
        child_run_id: str | None = None,
    ) -> ToolCall:
        change = ToolStateChange(
            tool_call_id=tool_call_id, to=to, result=result, error=error, child_run_id=child_run_id
        )
        now = self._now()

        def tx(conn: Conn) -> ToolCall:
            row = conn.execute(
                "SELECT run_id FROM tool_calls WHERE id = ?", (tool_call_id,)
            ).fetchone()
            if row is None:
                raise errors.ToolCallNotFound(f"tool call {tool_call_id} not found")
            run = _fetch_run(conn, row["run_id"])
            return _tool_states(conn, run, token, [change], now)[0]

        return await self._write(tx)

    async def set_tool_states(
        self, run_id: str, *, token: str, changes: list[ToolStateChange]
    ) -> list[ToolCall]:
        now = self._now()

        def tx(conn: Conn) -> list[ToolCall]:
            return _tool_states(conn, _fetch_run(conn, run_id), token, changes, now)

        return await self._write(tx)

    async def finish_step(
        self,
        run_id: str,
        *,
        token: str,
        tool_changes: list[ToolStateChange],
        message: NewMessage | None,
        checkpoint_step: int,
    ) -> tuple[list[ToolCall], Message | None, Checkpoint]:
        now = self._now()

        def tx(conn: Conn) -> tuple[list[ToolCall], Message | None, Checkpoint]:
            done = _step_results_tx(
                conn, now, run_id, token, tool_changes, message, checkpoint_step
            )
            assert done.checkpoint is not None
            return done.tool_calls, done.message, done.checkpoint

        return await self._write(tx)

    # --- one step in two transactions ------------------------------------------------------------

    async def commit_assistant_message_with_calls(
        self,
        run_id: str,
        *,
        token: str,
        message: NewMessage,
        tool_calls: list[NewToolCall],
        step: int,
    ) -> StepCommit:
        now = self._now()

        def tx(conn: Conn) -> StepCommit:
            run, position, has_drafts = _fetch_run_for_message(conn, run_id)
            plan, committed, calls = rules.commit_message(
                run,
                token=token,
                position=position,
                message=message,
                tool_calls=tool_calls,
                step=step,
                now=now,
            )
            events = _apply(conn, _skip_empty_draft_delete(plan, has_drafts))
            return StepCommit(plan.runs[0][0], committed, calls, None, events)

        return await self._write(tx)

    async def commit_final_message(
        self,
        run_id: str,
        *,
        token: str,
        message: NewMessage,
        step: int,
        outcome: str | None,
    ) -> StepCommit:
        now = self._now()

        def tx(conn: Conn) -> StepCommit:
            run, position, has_drafts = _fetch_run_for_message(conn, run_id)
            plan, committed, created = rules.complete_with_message(
                run,
                token=token,
                position=position,
                message=message,
                step=step,
                outcome=outcome,
                pending_tool_call_ids=_pending_call_ids(conn, run_id),
                now=now,
            )
            events = _apply(conn, _skip_empty_draft_delete(plan, has_drafts))
            return StepCommit(plan.runs[0][0], committed, [], created, events)

        return await self._write(tx)

    async def commit_tool_states(
        self, run_id: str, *, token: str, changes: list[ToolStateChange]
    ) -> StepCommit:
        now = self._now()

        def tx(conn: Conn) -> StepCommit:
            run = _fetch_run(conn, run_id)
            plan, changed = _tool_states_plan(conn, run, token, changes, now)
            events = _apply(conn, plan)
            _file_history_tx(conn, changes, now)
            return StepCommit(run, None, changed, None, events)

        return await self._write(tx)

    async def commit_step_results(
        self,
        run_id: str,
        *,
        token: str,
        tool_changes: list[ToolStateChange],
        message: NewMessage | None,
        checkpoint_step: int,
    ) -> StepCommit:
        now = self._now()
        return await self._write(
            lambda conn: _step_results_tx(
                conn, now, run_id, token, tool_changes, message, checkpoint_step
            )
        )

    # --- input requests --------------------------------------------------------------------------

    async def open_input_request(
        self, run_id: str, *, token: str, request: NewInputRequest
    ) -> tuple[Run, InputRequest]:
        now = self._now()

        def tx(conn: Conn) -> tuple[Run, InputRequest]:
            run = _fetch_run(conn, run_id)
            call = None
            if request.tool_call_id is not None:
                found = conn.execute(
                    f"{_TOOL_SELECT} WHERE t.id = ?", (request.tool_call_id,)
                ).fetchone()
                call = _tool_call(found) if found is not None else None
            plan, after, created = rules.open_input_request(
                run, token=token, request=request, tool_call=call, now=now
            )
            _apply(conn, plan)
            return after, created

        return await self._write(tx)

    async def answer_input_request(
        self,
        request_id: str,
        *,
        answer: Any,
        idempotency_key: str | None = None,
        expected_revision: int | None = None,
        owner_id: str | None = None,
    ) -> tuple[Run, InputRequest]:
        now = self._now()
        input_hash = canonical_hash({"request_id": request_id, "answer": answer})

        def tx(conn: Conn) -> tuple[Run, InputRequest]:
            if idempotency_key is not None:
                found = conn.execute(
                    "SELECT * FROM receipts WHERE operation = ? AND key = ?",
                    (rules.ANSWER_OPERATION, idempotency_key),
                ).fetchone()
                receipt = (
                    rules.Receipt(
                        found["operation"],
                        found["key"],
                        found["input_hash"],
                        found["result"],
                        found["created_at"],
                    )
                    if found is not None
                    else None
                )
                replay = rules.answer_replay(receipt, input_hash)
                if replay is not None:
                    return replay
            request = _fetch_request(conn, request_id)
            run = _fetch_run(conn, request.run_id)
            call = None
            if request.tool_call_id is not None:
                found = conn.execute(
                    f"{_TOOL_SELECT} WHERE t.id = ?", (request.tool_call_id,)
                ).fetchone()
                call = _tool_call(found) if found is not None else None
            plan, after, answered = rules.answer_input_request(
                request,
                run,
                tool_call=call,
                answer=answer,
                expected_revision=expected_revision,
                idempotency_key=idempotency_key,
                input_hash=input_hash,
                now=now,
                owner_id=owner_id,
            )
            _apply(conn, plan)
            # What was being typed to it is sent now: the draft goes with the answer.
            conn.execute("DELETE FROM answer_drafts WHERE request_id = ?", (request_id,))
            return after, answered

        return await self._write(tx)

    async def cancel_input_request(
        self, request_id: str, *, token: str | None = None, reason: str
    ) -> InputRequest:
        now = self._now()

        def tx(conn: Conn) -> InputRequest:
            request = _fetch_request(conn, request_id)
            run = _fetch_run(conn, request.run_id)
            others = conn.execute(
                "SELECT 1 FROM input_requests WHERE run_id = ? AND state = 'pending'"
                " AND id != ? LIMIT 1",
                (request.run_id, request_id),
            ).fetchone()
            plan, cancelled = rules.cancel_input_request(
                request,
                run,
                token=token,
                others_pending=others is not None,
                reason=reason,
                now=now,
            )
            _apply(conn, plan)
            return cancelled

        return await self._write(tx)

    async def fail_unanswerable_request(self, request_id: str, *, reason: str) -> Run:
        now = self._now()

        def tx(conn: Conn) -> Run:
            request = _fetch_request(conn, request_id)
            run = _fetch_run(conn, request.run_id)
            if run.state is not RunState.INPUT_REQUIRED:
                raise errors.RunStateConflict(f"run {run.id} is {run.state}, not input_required")
            call = None
            if request.tool_call_id is not None:
                row = conn.execute(
                    f"{_TOOL_SELECT} WHERE t.id = ?", (request.tool_call_id,)
                ).fetchone()
                call = _tool_call(row) if row is not None else None
            pending = [
                _input_request(r)
                for r in conn.execute(
                    "SELECT * FROM input_requests WHERE run_id = ? AND state = 'pending'"
                    " ORDER BY n",
                    (run.id,),
                )
            ]
            plan = rules.fail_unanswerable_request(
                run, request, call=call, pending=pending, reason=reason, now=now
            )
            _apply(conn, plan)
            return plan.runs[0][0]

        return await self._write(tx)

    # --- checkpoints -----------------------------------------------------------------------------

    async def record_history_repair(
        self, run_id: str, *, token: str, repairs: list[RepairNote]
    ) -> HistoryRepaired:
        now = self._now()

        def tx(conn: Conn) -> HistoryRepaired:
            plan = rules.history_repaired(
                _fetch_run(conn, run_id), token=token, repairs=repairs, now=now
            )
            [event] = _apply(conn, plan)
            return cast(HistoryRepaired, event)

        return await self._write(tx)

    async def create_checkpoint(self, run_id: str, *, token: str, step: int) -> Checkpoint:
        now = self._now()
        return await self._write(
            lambda conn: _checkpoint_tx(conn, _fetch_run(conn, run_id), token, step, now)
        )

    # --- events ----------------------------------------------------------------------------------

    async def read_events(
        self,
        *,
        after: int = 0,
        limit: int = 500,
        run_id: str | None = None,
        job_id: str | None = None,
    ) -> list[DurableEvent]:
        def read(conn: Conn) -> list[DurableEvent]:
            last = _last_seq(conn)
            if after < 0 or after > last:
                raise errors.CursorOutOfRange(
                    f"event cursor {after} is outside the log (last event is {last})"
                )
            sql = "SELECT * FROM events WHERE seq > ?"
            params: list[Any] = [after]
            if run_id is not None:
                sql += " AND run_n = (SELECT n FROM runs WHERE id = ?)"
                params.append(run_id)
            if job_id is not None:
                sql += " AND run_n IN (SELECT n FROM runs WHERE job_id = ?)"
                params.append(job_id)
            sql += " ORDER BY seq LIMIT ?"
            params.append(max(0, limit))
            return _hydrate_events(conn, conn.execute(sql, params).fetchall())

        if run_id is None and job_id is None:
            # The next events after a cursor (what every process's pump reads, every poll): a
            # range of the primary key, at most ``limit`` rows and the rows they reference, on
            # the caller's thread. On the worker, while a run streamed flat out, this read held
            # the connection for up to 4 s (the worker won the GIL back from the busy event
            # loop only now and then), and every write waited behind it: a draft not saved for
            # 4 s instead of 250 ms.
            return await self._read(read)
        return await self._call(read)  # filtered: it may scan far for few rows

    async def record_note(
        self,
        run_id: str,
        *,
        token: str | None,
        note: RunNoted,
        usage: Usage | None = None,
        cost_usd: float = 0.0,
    ) -> RunNoted:
        def tx(conn: Conn) -> RunNoted:
            run = _fetch_run(conn, run_id)
            if token is not None:
                rules.check_token(run, token)
            elif not run.state.is_terminal:
                raise errors.RunStateConflict(
                    f"run {run_id} is {run.state.value}: only its execution may note it"
                )
            now = self._now()
            if usage is not None:
                _apply(conn, rules.note_usage(run, usage=usage, cost_usd=cost_usd, now=now))
            stamped = note.model_copy(
                update={"run_id": run_id, "created_at": note.created_at or now}
            )
            published = _emit(conn, [stamped])[0]
            assert isinstance(published, RunNoted)
            return published

        return await self._write(tx)

    async def list_notes(
        self, *, run_ids: Sequence[str] = (), job_id: str | None = None
    ) -> list[RunNoted]:
        def read(conn: Conn) -> list[RunNoted]:
            sql = (
                "SELECT * FROM events WHERE kind = 0"
                " AND json_extract(payload, '$.kind') = 'run_noted' AND run_n IN "
            )
            params: list[Any]
            if job_id is not None:
                sql += "(SELECT n FROM runs WHERE job_id = ?)"
                params = [job_id]
            else:
                ids = list(dict.fromkeys(run_ids))
                if not ids:
                    return []
                sql += f"(SELECT n FROM runs WHERE id IN ({', '.join('?' * len(ids))}))"
                params = list(ids)
            rows = conn.execute(sql + " ORDER BY seq", params).fetchall()
            return [e for e in _hydrate_events(conn, rows) if isinstance(e, RunNoted)]

        return await self._call(read)

    async def last_seq(self) -> int:
        return await self._read(_last_seq)

    async def running_since(self, run_id: str) -> float | None:
        def read(conn: Conn) -> float | None:
            # Newest first along events_by_run: it stops at the latest start.
            row = conn.execute(
                "SELECT created_at FROM events WHERE run_n = (SELECT n FROM runs WHERE id = ?)"
                " AND kind = ? AND json_extract(payload, '$.to') = 'running'"
                " ORDER BY seq DESC LIMIT 1",
                (run_id, EVENT_CODES_V5["run_state_changed"]),
            ).fetchone()
            return None if row is None else float(row[0])

        return await self._read(read)

    # --- queries ---------------------------------------------------------------------------------

    async def _get(
        self, sql: str, key: str, convert: Callable[[sqlite3.Row], R], missing: errors.AgentTuiError
    ) -> R:
        def read(conn: Conn) -> R:
            row = conn.execute(sql, (key,)).fetchone()
            if row is None:
                raise missing
            return convert(row)

        return await self._read(read)

    async def get_job(self, job_id: str) -> Job:
        return await self._get(
            "SELECT * FROM jobs WHERE id = ?",
            job_id,
            _job,
            errors.JobNotFound(f"job {job_id} not found"),
        )

    async def get_run(self, run_id: str) -> Run:
        return await self._get(
            "SELECT * FROM runs WHERE id = ?",
            run_id,
            _run,
            errors.RunNotFound(f"run {run_id} not found"),
        )

    async def get_tool_call(self, tool_call_id: str) -> ToolCall:
        return await self._get(
            f"{_TOOL_SELECT} WHERE t.id = ?",
            tool_call_id,
            _tool_call,
            errors.ToolCallNotFound(f"tool call {tool_call_id} not found"),
        )

    async def get_input_request(self, request_id: str) -> InputRequest:
        return await self._get(
            "SELECT * FROM input_requests WHERE id = ?",
            request_id,
            _input_request,
            errors.RequestNotFound(f"input request {request_id} not found"),
        )

    async def get_checkpoint(self, checkpoint_id: str) -> Checkpoint:
        return await self._get(
            "SELECT * FROM checkpoints WHERE id = ?",
            checkpoint_id,
            _checkpoint,
            errors.CheckpointNotFound(f"checkpoint {checkpoint_id} not found"),
        )

    async def list_jobs(
        self,
        *,
        cursor: str | None = None,
        limit: int = 50,
        state: RunState | None = None,
        archived: bool | None = False,
        interrupted: bool | None = None,
    ) -> Page[Job]:
        limit = max(1, limit)
        sql = "SELECT * FROM jobs"
        where: list[str] = []
        params: list[Any] = []
        if archived is not None:
            where.append("archived = ?")
            params.append(int(archived))
        if state is not None:
            where.append("latest_run_state = ?")
            params.append(RunState(state).value)
        if interrupted is not None:
            where.append(
                ("" if interrupted else "NOT ")
                + "EXISTS (SELECT 1 FROM runs r WHERE r.id = jobs.latest_root_run_id"
                " AND r.interrupted = 1)"
            )
        if cursor is not None:
            updated_at, job_id = _decode_cursor(cursor, ((float, int), str))
            where.append("(updated_at, id) < (?, ?)")
            params.extend([updated_at, job_id])
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY updated_at DESC, id DESC LIMIT ?"
        params.append(limit + 1)

        def read(conn: Conn) -> Page[Job]:
            rows = conn.execute(sql, params).fetchall()
            jobs = [_job(r) for r in rows[:limit]]
            next_cursor = None
            if len(rows) > limit:
                next_cursor = _encode_cursor(jobs[-1].updated_at, jobs[-1].id)
            return Page[Job](items=jobs, next_cursor=next_cursor)

        return await self._call(read)

    async def list_runs(
        self,
        *,
        cursor: str | None = None,
        limit: int = 50,
        state: RunState | None = None,
        archived: bool | None = False,
    ) -> Page[Run]:
        limit = max(1, limit)
        sql, params = runs_page_query(cursor=cursor, limit=limit, state=state, archived=archived)

        def read(conn: Conn) -> Page[Run]:
            rows = conn.execute(sql, params).fetchall()
            runs = [_run(r) for r in rows[:limit]]
            next_cursor = None
            if len(rows) > limit:
                last = rows[limit - 1]
                next_cursor = _encode_cursor(last["created_at"], last["n"])
            return Page[Run](items=runs, next_cursor=next_cursor)

        return await self._call(read)

    async def job_runs(self, job_id: str) -> list[Run]:
        def read(conn: Conn) -> list[Run]:
            if conn.execute("SELECT 1 FROM jobs WHERE id = ?", (job_id,)).fetchone() is None:
                raise errors.JobNotFound(f"job {job_id} not found")
            rows = conn.execute("SELECT * FROM runs WHERE job_id = ? ORDER BY n", (job_id,))
            return [_run(r) for r in rows]

        return await self._read(read)

    async def list_messages(
        self,
        run_id: str,
        *,
        after_position: int = -1,
        before_position: int | None = None,
        limit: int = 200,
    ) -> list[Message]:
        limit = max(0, limit)

        def read(conn: Conn) -> list[Message]:
            if before_position is not None:
                rows = conn.execute(
                    "SELECT * FROM messages WHERE run_id = ? AND position > ? AND position < ?"
                    " ORDER BY position DESC LIMIT ?",
                    (run_id, after_position, before_position, limit),
                ).fetchall()
                rows.reverse()
            else:
                rows = conn.execute(
                    "SELECT * FROM messages WHERE run_id = ? AND position > ?"
                    " ORDER BY position LIMIT ?",
                    (run_id, after_position, limit),
                ).fetchall()
            return [_message(r) for r in rows]

        return await self._read(read)

    async def list_tool_calls(
        self, run_id: str, *, message_id: str | None = None
    ) -> list[ToolCall]:
        def read(conn: Conn) -> list[ToolCall]:
            if message_id is not None:
                rows = conn.execute(
                    f"{_TOOL_SELECT} WHERE t.message_id = ? AND t.run_id = ? ORDER BY t.idx",
                    (message_id, run_id),
                )
            else:
                # Through the run's messages (no index of calls by run, see migration 10).
                rows = conn.execute(
                    f"{_TOOL_SELECT} WHERE t.message_id IN"
                    " (SELECT id FROM messages WHERE run_id = ?) AND t.run_id = ? ORDER BY t.n",
                    (run_id, run_id),
                )
            return [_tool_call(r) for r in rows]

        return await self._read(read)

    async def list_checkpoints(self, run_id: str) -> list[Checkpoint]:
        def read(conn: Conn) -> list[Checkpoint]:
            rows = conn.execute("SELECT * FROM checkpoints WHERE run_id = ? ORDER BY n", (run_id,))
            return [_checkpoint(r) for r in rows]

        return await self._read(read)

    async def pending_input_requests(
        self, *, run_id: str | None = None, limit: int = 100
    ) -> list[InputRequest]:
        def read(conn: Conn) -> list[InputRequest]:
            if run_id is None:
                rows = conn.execute(
                    "SELECT * FROM input_requests WHERE state = 'pending'"
                    " ORDER BY created_at, n LIMIT ?",
                    (limit,),
                )
            else:
                rows = conn.execute(
                    "SELECT * FROM input_requests WHERE run_id = ? AND state = 'pending'"
                    " ORDER BY created_at, n LIMIT ?",
                    (run_id, limit),
                )
            return [_input_request(r) for r in rows]

        return await self._read(read)

    async def list_input_requests(self, run_id: str) -> list[InputRequest]:
        def read(conn: Conn) -> list[InputRequest]:
            rows = conn.execute(
                "SELECT * FROM input_requests WHERE run_id = ? ORDER BY n", (run_id,)
            )
            return [_input_request(r) for r in rows]

        return await self._read(read)

    async def count_runs_by_state(self) -> dict[RunState, int]:
        def read(conn: Conn) -> dict[RunState, int]:
            counts = dict.fromkeys(RunState, 0)
            for state, count in conn.execute("SELECT state, count(*) FROM runs GROUP BY state"):
                counts[RunState(state)] = count
            return counts

        return await self._call(read)

    async def search_messages(self, query: str, *, limit: int = 50) -> list[SearchHit]:
        match = fts_query(query)
        if match is None:
            return []

        if not self.read_only:
            await self._write(lambda conn: conn.execute(INDEX_PENDING_MESSAGES))

        def read(conn: Conn) -> list[SearchHit]:
            # Rank (bm25) only the most recent SEARCH_WINDOW matches: FTS5 walks rowids newest
            # first and stops early, so a word found in every third message stays fast.
            oldest = conn.execute(
                "SELECT coalesce(min(rowid), 0) FROM (SELECT rowid FROM messages_fts"
                " WHERE messages_fts MATCH ? ORDER BY rowid DESC LIMIT ?)",
                (match, SEARCH_WINDOW),
            ).fetchone()[0]
            # Archived jobs are hidden from search as from the browser: the best 2 x limit
            # hits are ranked, those of archived jobs dropped. Equal ranks (the same file read
            # in several jobs) go newest first, as on PostgreSQL.
            rows = conn.execute(
                "WITH hits AS (SELECT rowid, rank,"
                "   snippet(messages_fts, 0, ?, ?, '…', 12) AS snippet"
                "   FROM messages_fts WHERE messages_fts MATCH ? AND rowid >= ?"
                "   ORDER BY rank, rowid DESC LIMIT ?)"
                " SELECT m.id, m.run_id, m.job_id, j.title, m.created_at, m.position, m.role,"
                "   hits.snippet"
                " FROM hits JOIN messages AS m ON m.n = hits.rowid"
                " JOIN jobs AS j ON j.id = m.job_id WHERE j.archived = 0"
                " ORDER BY hits.rank, hits.rowid DESC LIMIT ?",
                (SNIPPET_OPEN, SNIPPET_CLOSE, match, oldest, 2 * limit, limit),
            ).fetchall()
            return [
                SearchHit(
                    message_id=r["id"],
                    run_id=r["run_id"],
                    job_id=r["job_id"],
                    job_title=r["title"],
                    snippet=r["snippet"] or "",
                    created_at=r["created_at"],
                    position=r["position"],
                    role=Role(r["role"]),
                )
                for r in rows
            ]

        return await self._call(read)

    async def child_run_for_tool_call(self, tool_call_id: str) -> Run | None:
        def read(conn: Conn) -> Run | None:
            row = conn.execute(
                "SELECT * FROM runs WHERE parent_tool_call_id = ? ORDER BY n LIMIT 1",
                (tool_call_id,),
            ).fetchone()
            if row is None:
                row = conn.execute(
                    "SELECT r.* FROM tool_calls AS t JOIN runs AS r ON r.id = t.child_run_id"
                    " WHERE t.id = ?",
                    (tool_call_id,),
                ).fetchone()
            return _run(row) if row is not None else None

        return await self._read(read)

    # --- archive and delete (DESIGN §5: deletion is explicit, archive first) -------------------

    async def set_job_archived(self, job_id: str, archived: bool) -> Job:
        """Archive (hide) or unarchive a job. A job with a run still queued, running or
        waiting for input cannot be archived (cancel it first)."""

        now = self._now()

        def tx(conn: Conn) -> Job:
            row = conn.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
            if row is None:
                raise errors.JobNotFound(f"job {job_id} not found")
            open_run = conn.execute(
                "SELECT id FROM runs WHERE job_id = ? AND state IN (?, ?, ?) ORDER BY n LIMIT 1",
                (job_id, *(state.value for state in _OPEN_RUN_STATES)),
            ).fetchone()
            latest = conn.execute(
                "SELECT id FROM runs WHERE job_id = ? AND parent_run_id IS NULL"
                " ORDER BY n DESC LIMIT 1",
                (job_id,),
            ).fetchone()
            events = rules.archive_job(
                _job(row),
                archived=archived,
                open_run=_fetch_run(conn, open_run["id"]) if open_run is not None else None,
                latest_root_run_id=latest["id"] if latest is not None else None,
                now=now,
            )
            if bool(row["archived"]) != archived:
                conn.execute("UPDATE jobs SET archived = ? WHERE id = ?", (int(archived), job_id))
            _emit(conn, events)
            return _job(conn.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone())

        return await self._write(tx)

    async def delete_job(self, job_id: str) -> dict[str, int]:
        """Delete an ARCHIVED job and every row of it (runs, messages and their search index,
        tool calls, requests, checkpoints, drafts (the runs', the composer's and the answers'),
        events, file snapshots and the blobs only they used) in one transaction. Returns the
        number of rows removed per kind. Refused for a job that is not archived, or whose runs
        another job's fork reads as history."""

        def tx(conn: Conn) -> dict[str, int]:
            row = conn.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
            if row is None:
                raise errors.JobNotFound(f"job {job_id} not found")
            if not row["archived"]:
                raise errors.ConflictError(
                    f"job {job_id} is not archived; archive it first"
                    f" ({hints.command('archive', job_id)})"
                )
            forks = conn.execute(
                "SELECT DISTINCT r.job_id FROM runs AS r JOIN runs AS h ON h.id = r.history_run_id"
                " WHERE h.job_id = ? AND r.job_id != ? ORDER BY r.job_id",
                (job_id, job_id),
            ).fetchall()
            if forks:
                names = ", ".join(f["job_id"] for f in forks)
                raise errors.ConflictError(
                    f"job {job_id} is the history of the forked job(s) {names}; delete those first"
                )
            removed: dict[str, int] = {}
            run_ids = "SELECT id FROM runs WHERE job_id = ?"
            blob_candidates = [
                r[0]
                for r in conn.execute(
                    "SELECT before_sha256 FROM file_snapshots WHERE job_id = ?"
                    " AND before_sha256 IS NOT NULL UNION"
                    " SELECT after_sha256 FROM file_snapshots WHERE job_id = ?"
                    " AND after_sha256 IS NOT NULL",
                    (job_id, job_id),
                )
            ]
            # A draft is saved in parts: count the drafts (one per message), delete the parts.
            removed["drafts"] = conn.execute(
                f"SELECT count(DISTINCT message_id) FROM draft_parts WHERE run_id IN ({run_ids})",
                (job_id,),
            ).fetchone()[0]
            conn.execute(f"DELETE FROM draft_parts WHERE run_id IN ({run_ids})", (job_id,))
            for table, where in (
                ("composer_drafts", "job_id = ?"),
                ("answer_drafts", "job_id = ?"),
                ("file_snapshots", "job_id = ?"),
                ("events", "run_n IN (SELECT n FROM runs WHERE job_id = ?)"),
                ("input_requests", "job_id = ?"),
                ("checkpoints", "job_id = ?"),
                ("tool_calls", "job_id = ?"),
                ("messages", "job_id = ?"),
            ):
                removed[table] = conn.execute(
                    f"DELETE FROM {table} WHERE {where}", (job_id,)
                ).rowcount
            # Runs reference each other (parent, history, retry): clear those links first.
            conn.execute(
                "UPDATE runs SET parent_run_id = NULL, history_run_id = NULL,"
                " retry_of_run_id = NULL WHERE job_id = ?",
                (job_id,),
            )
            removed["runs"] = conn.execute("DELETE FROM runs WHERE job_id = ?", (job_id,)).rowcount
            removed["jobs"] = conn.execute("DELETE FROM jobs WHERE id = ?", (job_id,)).rowcount
            blobs = 0
            for sha in blob_candidates:
                still_used = conn.execute(
                    "SELECT 1 FROM file_snapshots WHERE before_sha256 = ? OR after_sha256 = ?"
                    " UNION ALL SELECT 1 FROM messages WHERE instr(content, ?) > 0 LIMIT 1",
                    (sha, sha, sha),
                ).fetchone()
                if still_used is None:
                    blobs += conn.execute("DELETE FROM blobs WHERE sha256 = ?", (sha,)).rowcount
            removed["blobs"] = blobs
            return removed

        return await self._write(tx)

    # --- blobs (content-addressed, stored once) --------------------------------------------------

    async def put_blob(self, data: bytes, media_type: str) -> str:
        """Store ``data`` once under its SHA-256 (hex); returns the digest."""
        sha = hashlib.sha256(data).hexdigest()
        created = _iso_now(self._now())

        def tx(conn: Conn) -> str:
            _insert_blob(conn, sha, data, media_type, created)
            return sha

        return await self._write(tx)

    async def get_blob(self, sha256: str) -> tuple[str, bytes]:
        """The media type and bytes stored under ``sha256``."""

        def read(conn: Conn) -> tuple[str, bytes]:
            row = conn.execute(
                "SELECT media_type, data FROM blobs WHERE sha256 = ?", (sha256,)
            ).fetchone()
            if row is None:
                raise errors.NotFoundError(f"blob {sha256} not found")
            return str(row["media_type"]), bytes(row["data"])

        return await self._call(read)

    # --- file snapshots (rewinding files) ---------------------------------------------------------

    async def record_file_snapshot(
        self, tool_call_id: str, path: str, before: bytes | None
    ) -> FileSnapshot:
        """Record the content of ``path`` (workspace-relative) before the tool call changes it
        (``None``: it did not exist), its blob stored once. Idempotent per (call, path): a
        resumed call keeps the first snapshot."""
        now = self._now()
        created = _iso_now(now)

        def tx(conn: Conn) -> FileSnapshot:
            return _tx_file_snapshot(conn, now, created, tool_call_id, path, before)

        return await self._write(tx)

    async def record_file_after(self, tool_call_id: str, path: str, after: bytes | None) -> None:
        """Record what the tool call left in ``path`` (``None``: no file)."""
        created = _iso_now(self._now())

        def tx(conn: Conn) -> None:
            _tx_file_after(conn, created, tool_call_id, FileContent(path=path, data=after))

        await self._write(tx)

    async def list_file_snapshots(self, job_id: str) -> list[FileSnapshot]:
        """Every file snapshot of a job, oldest first."""

        def read(conn: Conn) -> list[FileSnapshot]:
            rows = conn.execute(
                "SELECT * FROM file_snapshots WHERE job_id = ? ORDER BY n", (job_id,)
            )
            return [_file_snapshot(r) for r in rows]

        return await self._read(read)

    async def checkpoint_order(self, checkpoint_id: str) -> int:
        """The checkpoint's place in the global order of checkpoints (compared with
        ``FileSnapshot.checkpoint_n``)."""

        def read(conn: Conn) -> int:
            row = conn.execute(
                "SELECT n FROM checkpoints WHERE id = ?", (checkpoint_id,)
            ).fetchone()
            if row is None:
                raise errors.CheckpointNotFound(f"checkpoint {checkpoint_id} not found")
            return int(row[0])

        return await self._read(read)

    def on_commit(self, listener: Callable[[int, list[DurableEvent]], None]) -> None:
        """From now on, right after each write transaction of this store object commits, call
        ``listener(before, events)`` with the durable events it committed (in seq order, as
        observers see them) and the last seq before them. They are the events the transaction
        wrote (collected by ``_emit``), so reporting costs no query; a transaction that rolls
        back reports nothing."""
        self._listeners.append(listener)

    def on_damaged(self, listener: Callable[[errors.DatabaseCorrupt], None]) -> None:
        """Call ``listener(error)`` when an operation first finds the file damaged (before the
        operation raises the error), on the thread that awaited it; at once if one did."""
        self._damage_listeners.append(listener)
        if self._damage is not None:
            listener(self._damage)

    # --- owners: read-only recovery checks, targeted recovery, a renewer of its own -----------

    async def stale_owners(self) -> list[StaleOwner]:
        now = self._now()

        def read(conn: Conn) -> list[StaleOwner]:
            rows = conn.execute(
                "SELECT DISTINCT r.owner_id, (o.owner_id IS NULL OR o.released = 1"
                " OR o.recovered_at IS NOT NULL) AS gone FROM runs AS r"
                " LEFT JOIN owners AS o ON o.owner_id = r.owner_id"
                " WHERE r.state IN ('queued', 'running') AND r.owner_id IS NOT NULL"
                " AND (o.owner_id IS NULL OR o.released = 1 OR o.recovered_at IS NOT NULL"
                " OR o.lease_expires_at < ?) ORDER BY r.owner_id",
                (now,),
            )
            return [StaleOwner(owner_id=r[0], released=bool(r[1])) for r in rows]

        # Asked every lease interval by every process: the active runs (a partial index) and
        # their owners' rows, on the caller's thread (on the worker, while the event loop was
        # busy, it held the connection for seconds; see read_events).
        return await self._read(read)

    async def recover_owners(
        self, owner_ids: Sequence[str], *, price: Pricing | None = None
    ) -> RecoveryReport:
        now = self._now()
        owners = list(owner_ids)

        def tx(conn: Conn) -> RecoveryReport:
            report = RecoveryReport()
            marks = ",".join("?" * len(owners))
            rows = conn.execute(
                f"SELECT * FROM runs WHERE state IN ('queued', 'running') AND owner_id IN ({marks})"
                " ORDER BY n",
                owners,
            ).fetchall()
            _recover_rows(conn, rows, now, report, price)
            conn.execute(
                f"UPDATE owners SET released = 1, recovered_at = coalesce(recovered_at, ?),"
                f" lease_expires_at = min(lease_expires_at, ?) WHERE owner_id IN ({marks})",
                (now, now, *owners),
            )
            return report

        if not owners:
            return RecoveryReport()
        return await self._write(tx)

    def lease_renewer(self, owner_id: str) -> LeaseRenewer:
        return SqliteLeaseRenewer(self.path, owner_id, clock=self._clock)

    async def stop_run(self, run_id: str, *, token: str, reason: str) -> Run:
        now = self._now()

        def tx(conn: Conn) -> Run:
            run = _fetch_run(conn, run_id)
            _apply(
                conn,
                rules.stop_running(run, token, _running_calls(conn, run_id), now, reason=reason),
            )
            return _fetch_run(conn, run_id)

        return await self._write(tx)

    # --- workers and durable consumers (DESIGN §15) ----------------------------------------

    async def queued_for_workers(self, *, limit: int = 20) -> list[Run]:
        def read(conn: Conn) -> list[Run]:
            rows = conn.execute(
                "SELECT * FROM runs WHERE state = 'queued' AND detached = 1 ORDER BY n LIMIT ?",
                (limit,),
            )
            return [_run(row) for row in rows]

        return await self._read(read)

    async def acquire_consumer(
        self,
        consumer_id: str,
        *,
        holder: str,
        lease_seconds: float,
        after: int | None = None,
        replace: str | None = None,
    ) -> int:
        now = self._now()

        def tx(conn: Conn) -> int:
            taken = rules.acquire_consumer(
                _fetch_consumer(conn, consumer_id),
                consumer_id=consumer_id,
                holder=holder,
                lease_seconds=lease_seconds,
                after=after,
                replace=replace,
                now=now,
            )
            _write_consumer(conn, taken)
            return taken.cursor

        return await self._write(tx)

    async def ack_consumer(self, consumer_id: str, *, holder: str, seq: int) -> int:
        now = self._now()

        def tx(conn: Conn) -> int:
            acked = rules.ack_consumer(
                _fetch_consumer(conn, consumer_id), holder=holder, seq=seq, now=now
            )
            _write_consumer(conn, acked)
            return acked.cursor

        return await self._write(tx)

    async def release_consumer(self, consumer_id: str, *, holder: str) -> None:
        now = self._now()

        def tx(conn: Conn) -> None:
            released = rules.release_consumer(
                _fetch_consumer(conn, consumer_id), holder=holder, now=now
            )
            if released is not None:
                _write_consumer(conn, released)

        await self._write(tx)

    # --- composer drafts, id prefixes and prompt history (clients' conveniences) -------------

    def _written_drafts(
        self, table: str, key_column: str, key: str
    ) -> Callable[[Conn], list[WrittenDraft]]:
        now = self._now()
        queued = "d.queued" if table == "composer_drafts" else "'[]'"

        def read(conn: Conn) -> list[WrittenDraft]:
            rows = conn.execute(
                f"SELECT d.writer, d.text, {queued} AS queued, d.updated_at,"
                " coalesce(o.released = 1 OR o.recovered_at IS NOT NULL, 0) AS released,"
                " coalesce(o.released = 0 AND o.recovered_at IS NULL"
                " AND o.lease_expires_at >= ?, 0) AS lease_live"
                f" FROM {table} AS d LEFT JOIN owners AS o ON o.owner_id = d.writer"
                f" WHERE d.{key_column} = ? ORDER BY d.updated_at, d.writer",
                (now, key),
            )
            return [written_draft(row) for row in rows]

        return read

    async def get_composer_drafts(self, job_id: str | None) -> list[WrittenDraft]:
        return await self._read(self._written_drafts("composer_drafts", "job_id", job_id or ""))

    async def save_composer_draft(
        self,
        job_id: str | None,
        text: str,
        *,
        writer: str,
        replacing: Sequence[str] = (),
        revision: int | None = None,
    ) -> None:
        revision = draft_revision() if revision is None else revision
        now, key = self._now(), job_id or ""

        def write(conn: Conn, fresh: bool) -> None:
            if fresh:
                conn.execute(
                    "INSERT INTO composer_drafts (job_id, writer, text, updated_at)"
                    " VALUES (?, ?, ?, ?) ON CONFLICT (job_id, writer) DO UPDATE"
                    " SET text = excluded.text, updated_at = excluded.updated_at",
                    (key, writer, text if text.strip() else "", now),
                )
                conn.execute(_DELETE_EMPTY_DRAFT, (key, writer))
            conn.executemany(
                "DELETE FROM composer_drafts WHERE job_id = ? AND writer = ?",
                [(key, gone) for gone in replacing if gone != writer],
            )

        async with self._draft_revisions.turn(("composer", key, writer), revision) as fresh:
            if fresh or replacing:  # else nothing to write: a newer text is kept
                await self._write(partial(write, fresh=fresh))

    async def save_queued_messages(
        self, job_id: str, texts: Sequence[str], *, writer: str, revision: int | None = None
    ) -> None:
        revision = draft_revision() if revision is None else revision
        now, queued = self._now(), json.dumps(list(texts), ensure_ascii=False)

        def write(conn: Conn) -> None:
            conn.execute(
                "INSERT INTO composer_drafts (job_id, writer, text, queued, updated_at)"
                " VALUES (?, ?, '', ?, ?) ON CONFLICT (job_id, writer) DO UPDATE"
                " SET queued = excluded.queued, updated_at = excluded.updated_at",
                (job_id, writer, queued, now),
            )
            conn.execute(_DELETE_EMPTY_DRAFT, (job_id, writer))

        async with self._draft_revisions.turn(("queue", job_id, writer), revision) as fresh:
            if fresh:  # else a newer queue is kept
                await self._write(write)

    async def get_answer_drafts(self, request_id: str) -> list[WrittenDraft]:
        return await self._read(self._written_drafts("answer_drafts", "request_id", request_id))

    async def save_answer_draft(
        self,
        request_id: str,
        text: str,
        *,
        job_id: str,
        writer: str,
        replacing: Sequence[str] = (),
        revision: int | None = None,
    ) -> None:
        revision = draft_revision() if revision is None else revision
        now = self._now()

        def write(conn: Conn, fresh: bool) -> None:
            if fresh and text.strip():
                conn.execute(
                    "INSERT INTO answer_drafts (request_id, writer, job_id, text, updated_at)"
                    " VALUES (?, ?, ?, ?, ?) ON CONFLICT (request_id, writer) DO UPDATE SET"
                    " text = excluded.text, updated_at = excluded.updated_at",
                    (request_id, writer, job_id, text, now),
                )
            elif fresh:
                conn.execute(
                    "DELETE FROM answer_drafts WHERE request_id = ? AND writer = ?",
                    (request_id, writer),
                )
            conn.executemany(
                "DELETE FROM answer_drafts WHERE request_id = ? AND writer = ?",
                [(request_id, gone) for gone in replacing if gone != writer],
            )

        async with self._draft_revisions.turn(("answer", request_id, writer), revision) as fresh:
            if fresh or replacing:  # else nothing to write: a newer text is kept
                await self._write(partial(write, fresh=fresh))

    async def ids_with_prefix(self, kind: str, prefix: str, *, limit: int = 2) -> list[str]:
        table = {"job": "jobs", "run": "runs", "checkpoint": "checkpoints"}.get(kind)
        if table is None:
            raise errors.InvalidInput(f"unknown kind of id {kind!r}")

        def read(conn: Conn) -> list[str]:
            # A range over the unique index: exact (case-sensitive) and no table scan.
            rows = conn.execute(
                f"SELECT id FROM {table} WHERE id >= ? AND id < ? ORDER BY id LIMIT ?",
                (prefix, prefix + "\U0010ffff", limit),
            ).fetchall()
            return [str(row["id"]) for row in rows]

        return await self._read(read)

    async def recent_prompts(self, *, workspace: str | None = None, limit: int = 100) -> list[str]:
        def read(conn: Conn) -> list[str]:
            rows = conn.execute(
                "SELECT r.input FROM runs AS r JOIN jobs AS j ON j.id = r.job_id"
                " WHERE r.parent_run_id IS NULL AND r.input IS NOT NULL"
                " AND (? IS NULL OR j.workspace = ?) ORDER BY r.n DESC LIMIT ?",
                (workspace, workspace, limit),
            ).fetchall()
            return [str(row["input"]) for row in rows]

        return await self._call(read)


class SqliteLeaseRenewer:
    """Renews one owner's lease on a connection of its own, in short transactions, from any
    thread: never queued behind the store's other work, and a busy database is "busy" (retry),
    not a lost lease."""

    def __init__(self, path: Path, owner_id: str, *, clock: Clock) -> None:
        self._path = path
        self._owner_id = owner_id
        self._clock = clock
        self._conn: sqlite3.Connection | None = None

    def renew(self, lease_seconds: float) -> Literal["renewed", "lost", "busy"]:
        try:
            if self._conn is None:
                self._conn = sqlite3.connect(
                    str(self._path), timeout=1.0, isolation_level=None, check_same_thread=False
                )
            return _renew_lease(self._conn, self._owner_id, self._clock.now(), lease_seconds)
        except sqlite3.Error:
            return "busy"

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()


def _renew_lease(
    conn: sqlite3.Connection, owner_id: str, now: float, lease_seconds: float
) -> Literal["renewed", "lost", "busy"]:
    conn.execute("BEGIN IMMEDIATE")
    try:
        row = conn.execute(
            "SELECT released, recovered_at FROM owners WHERE owner_id = ?", (owner_id,)
        ).fetchone()
        if row is None or row[0] or row[1] is not None:
            conn.execute("ROLLBACK")
            return "lost"
        conn.execute(
            "UPDATE owners SET lease_expires_at = ?, heartbeat_at = ? WHERE owner_id = ?",
            (now + lease_seconds, now, owner_id),
        )
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return "renewed"


async def open_sqlite_store(path: str | Path, *, clock: Clock | None = None) -> SqliteStore:
    """Open (creating and migrating if needed) the store at ``path``."""
    store = SqliteStore(path, clock=clock)
    await store.open()
    return store


# --- helpers run on the connection thread, inside a transaction ---------------------------------


def _iso_now(now: float) -> str:
    import datetime

    return datetime.datetime.fromtimestamp(now, tz=datetime.UTC).isoformat()


def _insert_blob(conn: Conn, sha: str, data: bytes, media_type: str, created: str) -> None:
    conn.execute(
        "INSERT OR IGNORE INTO blobs (sha256, media_type, size, data, created_at)"
        " VALUES (?, ?, ?, ?, ?)",
        (sha, media_type, len(data), data, created),
    )


def _file_snapshot(row: sqlite3.Row) -> FileSnapshot:
    return FileSnapshot(
        n=row["n"],
        job_id=row["job_id"],
        run_id=row["run_id"],
        tool_call_id=row["tool_call_id"],
        path=row["path"],
        before_sha256=row["before_sha256"],
        after_sha256=row["after_sha256"],
        after_recorded=bool(row["after_recorded"]),
        checkpoint_n=row["checkpoint_n"],
        created_at=row["created_at"],
    )


def _tx_file_snapshot(
    conn: Conn, now: float, created: str, tool_call_id: str, path: str, before: bytes | None
) -> FileSnapshot:
    existing = conn.execute(
        "SELECT * FROM file_snapshots WHERE tool_call_id = ? AND path = ?", (tool_call_id, path)
    ).fetchone()
    if existing is not None:
        return _file_snapshot(existing)
    call = conn.execute(
        "SELECT run_id, job_id FROM tool_calls WHERE id = ?", (tool_call_id,)
    ).fetchone()
    if call is None:
        raise errors.ToolCallNotFound(f"tool call {tool_call_id} not found")
    sha = None
    if before is not None:
        sha = hashlib.sha256(before).hexdigest()
        _insert_blob(conn, sha, before, "application/octet-stream", created)
    newest = conn.execute("SELECT coalesce(max(n), 0) FROM checkpoints").fetchone()[0]
    cursor = conn.execute(
        "INSERT INTO file_snapshots (job_id, run_id, tool_call_id, path, before_sha256,"
        " checkpoint_n, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (call["job_id"], call["run_id"], tool_call_id, path, sha, newest, now),
    )
    row = conn.execute("SELECT * FROM file_snapshots WHERE n = ?", (cursor.lastrowid,)).fetchone()
    return _file_snapshot(row)


def _in_transaction(fn: Callable[[Conn], R], conn: Conn) -> tuple[R, list[DurableEvent]]:
    conn.execute("BEGIN IMMEDIATE")
    return _transaction_body(fn, conn)


def _transaction_body(fn: Callable[[Conn], R], conn: Conn) -> tuple[R, list[DurableEvent]]:
    """``fn`` inside the transaction just begun: all of it is committed, or none. Returns its
    result and the events it wrote (collected by ``_emit``)."""
    events: list[DurableEvent] = []
    _committed.events = events
    _committed.refs = {}
    try:
        result = fn(conn)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    finally:
        _committed.events = None
        _committed.refs = None
    return result, events


def _nothing() -> None:
    """Run on the worker to wait for what it was doing."""


def _checkpoint_wal(conn: Conn) -> None:
    with contextlib.suppress(sqlite3.Error):  # busy readers: the next one will do it
        conn.execute("PRAGMA wal_checkpoint(PASSIVE)")


def _restart_wal(conn: Conn) -> None:
    """After ``_checkpoint_wal``: copy back what came during the copy, then start the WAL over
    (see ``SqliteStore._checkpoint``)."""
    with contextlib.suppress(sqlite3.Error):  # a writer or a reader held on: the next round
        copied = None
        for _ in range(CATCH_UP_PASSES):
            _, frames, _ = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            if copied is not None and frames - copied <= CATCH_UP_FRAMES:
                break
            copied = frames
        conn.execute("PRAGMA wal_checkpoint(RESTART)").fetchone()


def _index_pending(conn: Conn) -> None:
    """Index for search, in one transaction, the messages committed since the last time (in
    one batch FTS5 writes one segment instead of a few pages per commit)."""
    _in_transaction(lambda c: c.execute(INDEX_PENDING_MESSAGES), conn)


def _maintain(conn: Conn) -> None:
    with contextlib.suppress(sqlite3.Error):  # busy: the next round or the next search does it
        _index_pending(conn)
    _checkpoint_wal(conn)


def _close_connection(conn: Conn) -> None:
    _maintain(conn)
    conn.close()


def _fetch_consumer(conn: Conn, consumer_id: str) -> rules.Consumer | None:
    row = conn.execute("SELECT * FROM consumers WHERE consumer_id = ?", (consumer_id,)).fetchone()
    if row is None:
        return None
    return rules.Consumer(
        consumer_id=row["consumer_id"],
        cursor=row["cursor"],
        holder=row["holder"],
        lease_seconds=row["lease_seconds"],
        lease_expires_at=row["lease_expires_at"],
        updated_at=row["updated_at"],
    )


def runs_page_query(
    *, cursor: str | None, limit: int, state: RunState | None, archived: bool | None
) -> tuple[str, list[Any]]:
    """``list_runs``'s page: newest first, one more row than ``limit`` (is there a next page).
    Runs of jobs not archived are those with no archived job: SQLite walks the runs in order
    and looks each one's job up, stopping at the page's end. Asked as "job in the jobs not
    archived", it listed every such job (100,000 of them) and sorted the runs it found: 110-150
    ms for a page (browser_bench; budget 100 ms). Archived ones are few: those come from the
    partial index on archived jobs."""
    sql = "SELECT * FROM runs"
    where: list[str] = []
    params: list[Any] = []
    if archived is True:
        where.append("job_id IN (SELECT id FROM jobs WHERE archived = 1)")
    elif archived is False:
        where.append("NOT EXISTS (SELECT 1 FROM jobs WHERE jobs.id = runs.job_id AND archived = 1)")
    if state is not None:
        where.append("state = ?")
        params.append(RunState(state).value)
    if cursor is not None:
        created_at, n = _decode_cursor(cursor, ((float, int), int))
        where.append("(created_at, n) < (?, ?)")
        params.extend([created_at, n])
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY created_at DESC, n DESC LIMIT ?"
    params.append(limit + 1)
    return sql, params


def _write_consumer(conn: Conn, consumer: rules.Consumer) -> None:
    conn.execute(
        "INSERT INTO consumers (consumer_id, cursor, holder, lease_seconds, lease_expires_at,"
        " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (consumer_id) DO UPDATE SET cursor = excluded.cursor,"
        " holder = excluded.holder, lease_seconds = excluded.lease_seconds,"
        " lease_expires_at = excluded.lease_expires_at, updated_at = excluded.updated_at",
        (
            consumer.consumer_id,
            consumer.cursor,
            consumer.holder,
            consumer.lease_seconds,
            consumer.lease_expires_at,
            consumer.updated_at,
            consumer.updated_at,
        ),
    )


def _refs() -> dict[tuple[str, str], int]:
    """The row numbers known to the running write transaction (a throwaway dict outside one)."""
    refs: dict[tuple[str, str], int] | None = getattr(_committed, "refs", None)
    return {} if refs is None else refs


def _run_row(conn: Conn, run_id: str) -> sqlite3.Row:
    row: sqlite3.Row | None = conn.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
    if row is None:
        raise errors.RunNotFound(f"run {run_id} not found")
    _refs()[("runs", run_id)] = row["n"]
    return row


def _recover_rows(
    conn: Conn,
    rows: Sequence[sqlite3.Row],
    now: float,
    report: RecoveryReport,
    price: Pricing | None,
) -> None:
    """Recover the queued and running runs of owners that are gone (the rules decide), with
    the answers they were streaming counted."""
    for row in rows:
        run = _run(row)
        partials = rules.recovered_partials(
            run,
            rules.drafts_from_parts(
                conn.execute("SELECT * FROM draft_parts WHERE run_id = ?", (run.id,))
            ),
            counted=_counted_cut_short(conn, row["n"]),
            price=price,
        )
        if run.state is RunState.QUEUED:
            _apply(conn, rules.interrupt_queued(run, now, partials=partials))
            report.interrupted_queued.append(run.id)
            continue
        running = _running_calls(conn, run.id)
        plan, failed = rules.recover_running(run, running, now, partials=partials)
        _apply(conn, plan)
        (report.failed if failed else report.requeued).append(run.id)


def _counted_cut_short(conn: Conn, run_n: int) -> list[str]:
    """The message ids whose usage a ``cut_short`` note of the run counted (its notes are
    stored whole, kind 0)."""
    rows = conn.execute(
        "SELECT json_extract(payload, '$.data.message_id') FROM events"
        " WHERE run_n = ? AND kind = 0 AND json_extract(payload, '$.kind') = 'run_noted'"
        " AND json_extract(payload, '$.note') = 'cut_short'",
        (run_n,),
    )
    return [str(r[0]) for r in rows if r[0] is not None]


def _running_calls(conn: Conn, run_id: str) -> list[ToolCall]:
    return [
        _tool_call(r)
        for r in conn.execute(
            # The first state term names the partial index tool_calls_open.
            f"{_TOOL_SELECT} WHERE t.run_id = ? AND t.state IN ('pending', 'running')"
            " AND t.state = 'running' ORDER BY t.n",
            (run_id,),
        )
    ]


def _fetch_run(conn: Conn, run_id: str) -> Run:
    return _run(_run_row(conn, run_id))


def _fetch_request(conn: Conn, request_id: str) -> InputRequest:
    row = conn.execute("SELECT * FROM input_requests WHERE id = ?", (request_id,)).fetchone()
    if row is None:
        raise errors.RequestNotFound(f"input request {request_id} not found")
    return _input_request(row)


_RUN_FOR_MESSAGE = (
    "SELECT *, (SELECT coalesce(max(position) + 1, 0) FROM messages WHERE run_id = ?1)"
    " AS next_position, EXISTS (SELECT 1 FROM draft_parts WHERE run_id = ?1"
    " AND before_position IS NULL) AS has_drafts FROM runs WHERE id = ?1"
)


def _fetch_run_for_message(conn: Conn, run_id: str) -> tuple[Run, int, bool]:
    """The run about to commit a message, the position of that message, and whether the run
    has drafts of its latest attempt (which the commit deletes; a claim keeps them): one
    statement where there were three, twice a step."""
    row: sqlite3.Row | None = conn.execute(_RUN_FOR_MESSAGE, (run_id,)).fetchone()
    if row is None:
        raise errors.RunNotFound(f"run {run_id} not found")
    columns = _columns(row)
    _refs()[("runs", run_id)] = columns["n"]
    return _run_of(columns), int(columns["next_position"]), bool(columns["has_drafts"])


def _skip_empty_draft_delete(plan: Plan, has_drafts: bool) -> Plan:
    """``plan`` without its deletion of the run's drafts when the run has none (read in this
    transaction): a statement that would delete no row."""
    if not has_drafts:
        plan.delete_drafts_of = None
    return plan


def _check_references(conn: Conn, new_run: NewRun) -> None:
    checks: list[tuple[str | None, str, errors.AgentTuiError]] = [
        (new_run.job_id, "jobs", errors.JobNotFound(f"job {new_run.job_id} not found")),
        (
            new_run.parent_run_id,
            "runs",
            errors.RunNotFound(f"parent run {new_run.parent_run_id} not found"),
        ),
        (
            new_run.history_run_id,
            "runs",
            errors.RunNotFound(f"history run {new_run.history_run_id} not found"),
        ),
        (
            new_run.retry_of_run_id,
            "runs",
            errors.RunNotFound(f"retried run {new_run.retry_of_run_id} not found"),
        ),
        (
            new_run.forked_from_checkpoint_id,
            "checkpoints",
            errors.CheckpointNotFound(f"checkpoint {new_run.forked_from_checkpoint_id} not found"),
        ),
        (
            new_run.parent_tool_call_id,
            "tool_calls",
            errors.ToolCallNotFound(f"tool call {new_run.parent_tool_call_id} not found"),
        ),
    ]
    for key, table, missing in checks:
        if key is not None and (
            conn.execute(f"SELECT 1 FROM {table} WHERE id = ?", (key,)).fetchone() is None
        ):
            raise missing


def _tool_states_plan(
    conn: Conn, run: Run, token: str, changes: Sequence[ToolStateChange], now: float
) -> tuple[Plan, list[ToolCall]]:
    """Several transitions of one run's tool calls: the calls read by primary key in one
    statement, then the rule (which checks the token and the run of each call)."""
    rules.check_token(run, token)
    if not changes:
        return Plan(), []
    ids = list(dict.fromkeys(change.tool_call_id for change in changes))
    marks = ", ".join("?" * len(ids))
    rows = conn.execute(f"{_TOOL_SELECT} WHERE t.id IN ({marks})", ids).fetchall()
    refs = _refs()
    for r in rows:
        refs[("tool_calls", r["id"])] = r["n"]
    return rules.tool_states(
        run, token=token, calls={r["id"]: _tool_call(r) for r in rows}, changes=changes, now=now
    )


def _tool_states(
    conn: Conn, run: Run, token: str, changes: Sequence[ToolStateChange], now: float
) -> list[ToolCall]:
    plan, changed = _tool_states_plan(conn, run, token, changes, now)
    _apply(conn, plan)
    _file_history_tx(conn, changes, now)
    return changed


def _file_history_tx(conn: Conn, changes: Sequence[ToolStateChange], now: float) -> None:
    """The file snapshots the changes carry, in the transaction that records the changes."""
    if all(c.file_before is None and c.file_after is None for c in changes):
        return
    created = _iso_now(now)
    for change in changes:
        if change.file_before is not None:
            before = change.file_before
            _tx_file_snapshot(conn, now, created, change.tool_call_id, before.path, before.data)
        if change.file_after is not None:
            _tx_file_after(conn, created, change.tool_call_id, change.file_after)


def _tx_file_after(conn: Conn, created: str, tool_call_id: str, after: FileContent) -> None:
    sha = None
    if after.data is not None:
        sha = hashlib.sha256(after.data).hexdigest()
        _insert_blob(conn, sha, after.data, "application/octet-stream", created)
    conn.execute(
        "UPDATE file_snapshots SET after_sha256 = ?, after_recorded = 1"
        " WHERE tool_call_id = ? AND path = ?",
        (sha, tool_call_id, after.path),
    )


def _step_results_tx(
    conn: Conn,
    now: float,
    run_id: str,
    token: str,
    tool_changes: Sequence[ToolStateChange],
    message: NewMessage | None,
    checkpoint_step: int,
) -> StepCommit:
    run, position, has_drafts = _fetch_run_for_message(conn, run_id)
    plan, calls = _tool_states_plan(conn, run, token, tool_changes, now)
    _file_history_tx(conn, tool_changes, now)
    committed = None
    if message is not None:
        # One plan: the results are written straight into the tool message that carries
        # them, never first into the calls (no row grows, then shrinks).
        message_plan, committed, _ = rules.commit_message(
            run,
            token=token,
            position=position,
            message=message,
            tool_calls=(),
            step=None,
            now=now,
        )
        plan.extend(_skip_empty_draft_delete(message_plan, has_drafts))
        run = message_plan.runs[0][0]
        position += 1
    _write_rows(conn, plan)
    checkpoint_plan, checkpoint = _checkpoint_plan(
        conn, run, token, checkpoint_step, now, position - 1
    )
    _write_rows(conn, checkpoint_plan)
    # Both plans' events in one statement, in the order the rules made them.
    events = _emit(conn, plan.events + checkpoint_plan.events, _plan_calls(plan))
    return StepCommit(run, committed, calls, checkpoint, events)


def _checkpoint_tx(conn: Conn, run: Run, token: str, step: int, now: float) -> Checkpoint:
    plan, created = _checkpoint_plan(conn, run, token, step, now, None)
    _apply(conn, plan)
    return created


def _checkpoint_plan(
    conn: Conn, run: Run, token: str, step: int, now: float, last_position: int | None
) -> tuple[Plan, Checkpoint]:
    rules.check_token(run, token)
    if last_position is None:
        last_position = conn.execute(
            "SELECT coalesce(max(position), -1) FROM messages WHERE run_id = ?", (run.id,)
        ).fetchone()[0]
    return rules.checkpoint(
        run,
        token=token,
        step=step,
        last_position=last_position,
        pending_tool_call_ids=_pending_call_ids(conn, run.id),
        now=now,
    )


def _pending_call_ids(conn: Conn, run_id: str) -> list[str]:
    """The run's tool calls still pending, in order (what a checkpoint records)."""
    return [
        r[0]
        for r in conn.execute(
            "SELECT id FROM tool_calls WHERE run_id = ? AND state IN ('pending', 'running')"
            " AND state = 'pending' ORDER BY n",
            (run_id,),
        )
    ]


_RUN_COUNTERS = (
    "revision = ?, step = ?, input_tokens = ?, output_tokens = ?, cache_read_tokens = ?,"
    " cache_write_tokens = ?, cost_usd = ?, context_tokens = ?, updated_at = ?"
    " WHERE id = ? AND revision = ?"
)
_RUN_COUNTERS_UPDATE = (
    f"UPDATE runs SET {_RUN_COUNTERS} AND state = ? AND owner_id IS ? AND execution_token IS ?"
    " AND interrupted = ? AND outcome IS ? AND failure IS ? AND cancel_reason IS ?"
)
_RUN_UPDATE = (
    "UPDATE runs SET state = ?, owner_id = ?, execution_token = ?, interrupted = ?,"
    f" outcome = ?, failure = ?, cancel_reason = ?, {_RUN_COUNTERS}"
)
_JOB_TOTALS = (
    "input_tokens = input_tokens + ?, output_tokens = output_tokens + ?,"
    " cache_read_tokens = cache_read_tokens + ?, cache_write_tokens = cache_write_tokens + ?,"
    " cost_usd = cost_usd + ?"
)
_JOB_TOTALS_UPDATE = f"UPDATE jobs SET {_JOB_TOTALS} WHERE id = ?"
_JOB_TOTALS_STAMPED_UPDATE = f"UPDATE jobs SET {_JOB_TOTALS}, updated_at = ? WHERE id = ?"
"""A step's change of its job: the totals, and the activity at most once a second
(``rules.activity_stamp``). Columns of ``jobs_by_activity`` and ``jobs_by_state`` are assigned
only when they change: SQLite rewrites an index entry whenever a column of it is assigned."""
_JOB_UPDATE = (
    "UPDATE jobs SET updated_at = coalesce(?, updated_at), input_tokens = input_tokens + ?,"
    " output_tokens = output_tokens + ?, cache_read_tokens = cache_read_tokens + ?,"
    " cache_write_tokens = cache_write_tokens + ?, cost_usd = cost_usd + ?,"
    " latest_run_state = CASE WHEN ? OR latest_root_run_id = ? THEN ? ELSE latest_run_state END,"
    " latest_root_run_id = CASE WHEN ? THEN ? ELSE latest_root_run_id END WHERE id = ?"
)


def _message_exists(conn: Conn, message_id: str) -> bool:
    return conn.execute("SELECT 1 FROM messages WHERE id = ?", (message_id,)).fetchone() is not None


def _update_run(conn: Conn, run: Run, read_revision: int) -> None:
    """Compare-and-set of a run row on the revision read. A step changes only its counters:
    then only they are written, so the indexes on state and owner are left alone (SQLite
    rewrites an index whenever a column of it is assigned, even to the same value)."""
    usage = run.usage
    counters = (
        run.revision,
        run.step,
        usage.input_tokens,
        usage.output_tokens,
        usage.cache_read_tokens,
        usage.cache_write_tokens,
        run.cost_usd,
        run.context_tokens,
        run.updated_at,
        run.id,
        read_revision,
    )
    rest = (
        run.state.value,
        run.owner_id,
        run.execution_token,
        int(run.interrupted),
        run.outcome,
        run.failure.model_dump_json() if run.failure else None,
        run.cancel_reason,
    )
    if (
        conn.execute(_RUN_COUNTERS_UPDATE, counters + rest).rowcount != 1
        and conn.execute(_RUN_UPDATE, rest + counters).rowcount != 1
    ):
        raise errors.RevisionConflict(f"run {run.id} changed while it was being written")
    # The next read of the row (the step's next commit) takes ``run`` instead of validating
    # the row again: but only if the row then holds these values (``_run_of``).
    _remember_run(_written_run_key(run), run)


def _apply(conn: Conn, plan: Plan) -> list[DurableEvent]:
    """Write a rule's plan, in the order ``Plan`` documents; returns its events with their
    ``seq``."""
    _write_rows(conn, plan)
    return _emit(conn, plan.events, _plan_calls(plan))


def _plan_calls(plan: Plan) -> dict[str, ToolCall]:
    """The tool calls a plan creates or changes, by id, in their final form (what its events
    are encoded against)."""
    calls = {c.id: c for c in plan.new_tool_calls}
    calls.update((c.id, c) for c in plan.tool_calls)
    return calls


def _write_rows(conn: Conn, plan: Plan) -> None:
    """The row changes of a plan (all but its events), in the order ``Plan`` documents."""
    _insert_jobs(conn, plan)
    _insert_runs(conn, plan)
    for run, read_revision in plan.runs:
        _update_run(conn, run, read_revision)
    _update_jobs(conn, plan)
    refs = _refs()
    _insert_messages(conn, plan, refs)
    _insert_tool_calls(conn, plan, refs)
    _update_tool_calls(conn, plan, refs)
    _write_requests(conn, plan)
    _insert_checkpoints(conn, plan, refs)
    if plan.delete_drafts_of is not None:
        conn.execute(
            "DELETE FROM draft_parts WHERE run_id = ? AND before_position IS NULL",
            (plan.delete_drafts_of,),
        )
    if plan.keep_drafts is not None:
        run_id, position = plan.keep_drafts
        conn.execute(
            "UPDATE draft_parts SET before_position = ?"
            " WHERE run_id = ? AND before_position IS NULL",
            (position, run_id),
        )
    _insert_receipts(conn, plan)


def _insert_jobs(conn: Conn, plan: Plan) -> None:
    """New jobs."""
    for new_job in plan.new_jobs:
        job = new_job.job
        conn.execute(
            "INSERT INTO jobs (id, title, workspace, agent, created_at, updated_at,"
            " latest_root_run_id, latest_run_state) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                job.id,
                job.title,
                job.workspace,
                job.agent,
                job.created_at,
                job.updated_at,
                new_job.latest_root_run_id,
                job.latest_run_state.value if job.latest_run_state else None,
            ),
        )


def _insert_runs(conn: Conn, plan: Plan) -> None:
    """New runs, each with its idempotency hash (its row number noted for the events)."""
    for run, input_hash in plan.new_runs:
        _refs()[("runs", run.id)] = _inserted(
            conn,
            "INSERT INTO runs (id, job_id, agent, model, state, revision, input,"
            " parent_run_id, parent_tool_call_id, history_run_id, history_position,"
            " forked_from_checkpoint_id, retry_of_run_id, idempotency_key, idempotency_hash,"
            " owner_id, max_steps, created_at, updated_at, detached)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                run.id,
                run.job_id,
                run.agent,
                run.model,
                run.state.value,
                run.revision,
                run.input,
                run.parent_run_id,
                run.parent_tool_call_id,
                run.history_run_id,
                run.history_position,
                run.forked_from_checkpoint_id,
                run.retry_of_run_id,
                run.idempotency_key,
                input_hash,
                run.owner_id,
                run.max_steps,
                run.created_at,
                run.updated_at,
                int(run.detached),
            ),
        )


def _update_jobs(conn: Conn, plan: Plan) -> None:
    """Job changes: totals, activity, the state of the latest root run."""
    for change in plan.jobs:
        usage = change.usage or _NO_USAGE
        if change.run_state is None and not change.becomes_latest:
            totals = (
                usage.input_tokens,
                usage.output_tokens,
                usage.cache_read_tokens,
                usage.cache_write_tokens,
                change.cost_usd,
            )
            if change.updated_at is None:
                conn.execute(_JOB_TOTALS_UPDATE, (*totals, change.job_id))
            else:
                conn.execute(
                    _JOB_TOTALS_STAMPED_UPDATE, (*totals, change.updated_at, change.job_id)
                )
            continue
        conn.execute(
            _JOB_UPDATE,
            (
                change.updated_at,
                usage.input_tokens,
                usage.output_tokens,
                usage.cache_read_tokens,
                usage.cache_write_tokens,
                change.cost_usd,
                change.becomes_latest and change.run_state is not None,
                change.run_id if change.run_state is not None else None,
                change.run_state.value if change.run_state is not None else None,
                change.becomes_latest,
                change.run_id,
                change.job_id,
            ),
        )


def _insert_messages(conn: Conn, plan: Plan, refs: dict[tuple[str, str], int]) -> None:
    """New messages (their row numbers noted for the events)."""
    for m in plan.messages:
        refs[("messages", m.id)] = _inserted(
            conn,
            "INSERT INTO messages (id, run_id, job_id, position, role, content, model, usage,"
            " cost_usd, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                m.id,
                m.run_id,
                m.job_id,
                m.position,
                m.role.value,
                _stored_content(m.content),
                m.model,
                m.usage.model_dump_json() if m.usage else None,
                m.cost_usd,
                m.created_at,
            ),
        )


_TOOL_CALL_INSERT = (
    "INSERT INTO tool_calls (id, run_id, job_id, message_id, idx, provider_id,"
    " name, arguments, state, idempotent, step, created_at, started_at)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def _insert_tool_calls(conn: Conn, plan: Plan, refs: dict[tuple[str, str], int]) -> None:
    """New tool calls, in one statement (their row numbers noted for the events)."""
    calls = plan.new_tool_calls
    for start in range(0, len(calls), _ROWS_PER_INSERT):
        chunk = calls[start : start + _ROWS_PER_INSERT]
        values = [
            (
                c.id,
                c.run_id,
                c.job_id,
                c.message_id,
                c.index,
                c.provider_id,
                c.name,
                _dumps(c.arguments),
                c.state.value,
                int(c.idempotent),
                c.step,
                c.created_at,
                c.started_at,
            )
            for c in chunk
        ]
        last = _inserted(conn, _rows_insert(_TOOL_CALL_INSERT, len(chunk)), _flat(values))
        for n, c in enumerate(chunk, start=last - len(chunk) + 1):
            refs[("tool_calls", c.id)] = n


def _update_tool_calls(conn: Conn, plan: Plan, refs: dict[tuple[str, str], int]) -> None:
    """Changed tool calls. A result that a tool message of the plan carries lives in that
    message only."""
    carried = _carried_results(plan)
    if plan.tool_calls:
        rows = []
        for c in plan.tool_calls:
            carrier = carried.pop(c.id, None)
            in_message = carrier is not None and c.result is not None and carrier[1] == c.result
            rows.append(
                (
                    c.state.value,
                    None if in_message else c.result,
                    c.error,
                    c.child_run_id,
                    c.started_at,
                    c.finished_at,
                    # The carrier was inserted by this plan: its number is known.
                    refs[("messages", carrier[0])] if in_message and carrier is not None else None,
                    c.id,
                    refs.get(("tool_calls", c.id)),
                )
            )
        # By row number when the transaction read the call (a rowid lookup), else by its id.
        conn.executemany(
            "UPDATE tool_calls SET state = ?1, result = ?2, error = ?3, child_run_id = ?4,"
            " started_at = ?5, finished_at = ?6, result_in = coalesce(?7, result_in)"
            " WHERE n = coalesce(?9, (SELECT n FROM tool_calls WHERE id = ?8)) AND id = ?8",
            rows,
        )
    if carried:
        # Results committed before the tool message that now carries them.
        conn.executemany(
            "UPDATE tool_calls SET result = NULL,"
            " result_in = (SELECT n FROM messages WHERE id = ?2)"
            " WHERE id = ?1 AND result IS NOT NULL AND result = ?3",
            [(call_id, message_id, text) for call_id, (message_id, text) in carried.items()],
        )


def _write_requests(conn: Conn, plan: Plan) -> None:
    """New input requests, then changed ones."""
    for request in plan.new_requests:
        conn.execute(
            "INSERT INTO input_requests (id, run_id, job_id, kind, prompt, options, schema,"
            " tool_call_id, arguments_digest, detail, state, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                request.id,
                request.run_id,
                request.job_id,
                request.kind.value,
                request.prompt,
                _dumps(request.options),
                _dumps(request.answer_schema),
                request.tool_call_id,
                request.arguments_digest,
                _dumps(request.detail),
                request.state.value,
                request.created_at,
            ),
        )
    for request in plan.requests:
        conn.execute(
            "UPDATE input_requests SET state = ?, answer = ?, answered_at = ?, detail = ?"
            " WHERE id = ?",
            (
                request.state.value,
                _dumps(request.answer) if request.answer is not None else None,
                request.answered_at,
                _dumps(request.detail),
                request.id,
            ),
        )


def _insert_checkpoints(conn: Conn, plan: Plan, refs: dict[tuple[str, str], int]) -> None:
    """New checkpoints (their row numbers noted for the events)."""
    for created in plan.checkpoints:
        refs[("checkpoints", created.id)] = _inserted(
            conn,
            "INSERT INTO checkpoints (id, run_id, job_id, step, last_position, usage,"
            " pending_tool_call_ids, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                created.id,
                created.run_id,
                created.job_id,
                created.step,
                created.last_position,
                created.usage.model_dump_json(),
                _dumps(created.pending_tool_call_ids),
                created.created_at,
            ),
        )


def _insert_receipts(conn: Conn, plan: Plan) -> None:
    """Receipts of operations that may be retried."""
    for receipt in plan.receipts:
        conn.execute(
            "INSERT INTO receipts (operation, key, input_hash, result, created_at)"
            " VALUES (?, ?, ?, ?, ?)",
            (
                receipt.operation,
                receipt.key,
                receipt.input_hash,
                receipt.result,
                receipt.created_at,
            ),
        )


def _inserted(conn: Conn, sql: str, values: Sequence[Any]) -> int:
    """Run one INSERT; the new row's number (its INTEGER PRIMARY KEY), the last one's when it
    inserts several."""
    n = conn.execute(sql, values).lastrowid
    assert n is not None
    return n


_ROWS_PER_INSERT = 64
"""Rows one INSERT of ``_rows_insert`` writes at most (5-13 values a row: far below SQLite's
limit on a statement's parameters); more go through ``executemany``."""


@cache
def _rows_insert(single: str, count: int) -> str:
    """``single`` (an INSERT of one row, ending with its VALUES list) inserting ``count`` rows
    in one statement: one call into SQLite instead of ``count``, and the last row's number
    from the cursor (the rows before it have the numbers just below it: the transaction holds
    the write lock, and SQLite numbers a statement's rows in the order of its VALUES)."""
    head, values = single.rsplit(" VALUES ", 1)
    return f"{head} VALUES {', '.join([values] * count)}"


def _flat(rows: Sequence[Sequence[Any]]) -> list[Any]:
    return [value for row in rows for value in row]


def _carried_results(plan: Plan) -> dict[str, tuple[str, str]]:
    """tool call id → (tool message id, result text) for each result a tool message of the plan
    carries to the model: there the result lives, and only there (``_tool_call`` reads it)."""
    return {
        block.tool_call_id: (message.id, block.content)
        for message in plan.messages
        if message.role is Role.TOOL
        for block in message.content
        if isinstance(block, ToolResultBlock) and block.tool_call_id
    }


_NO_USAGE = Usage()


_EVENT_INSERT_BY_N = (
    "INSERT INTO events (run_n, kind, ref, created_at, payload) VALUES (?, ?, ?, ?, ?)"
)
"""An event whose run and row are known by number (the common case: the transaction read or
wrote them)."""
_EVENT_TABLES: Mapping[int, str] = {2: "messages", 3: "tool_calls", 4: "checkpoints"}
_EVENT_INSERT = (
    "INSERT INTO events (run_n, kind, ref, created_at, payload) VALUES"
    " ((SELECT n FROM runs WHERE id = ?1), ?2, CASE ?2"
    " WHEN 2 THEN (SELECT n FROM messages WHERE id = ?3)"
    " WHEN 3 THEN (SELECT n FROM tool_calls WHERE id = ?3)"
    " WHEN 4 THEN (SELECT n FROM checkpoints WHERE id = ?3) END, ?4, ?5)"
)


def _encoded(
    event: DurableEvent, calls: dict[str, ToolCall]
) -> tuple[str, int, str | None, float, str | None]:
    """One event as the events table keeps it (the v5 form, ``encode_event_v5``): the row it
    describes by reference, only what that row does not say in ``payload``. The kinds every
    step writes are encoded here directly (the same form, without a full dump first)."""
    if isinstance(event, ToolStateChanged):  # most of a step's events: tested first
        call = calls.get(event.tool_call_id)
        if call is not None:
            return event.run_id, 3, event.tool_call_id, event.created_at, _tool_payload(event, call)
    elif isinstance(event, MessageCommitted):
        return event.run_id, 2, event.message.id, event.created_at, None
    elif isinstance(event, CheckpointCreated):
        return event.run_id, 4, event.checkpoint_id, event.created_at, None
    data = EVENT_ADAPTER.dump_python(event, mode="json", by_alias=True, exclude={"seq"})
    ref: str | None = None
    facts: dict[str, Any] | None = None
    if isinstance(event, ToolStateChanged):
        ref, facts = event.tool_call_id, {}
    code, payload = encode_event_v5(data, run_known=True, ref_found=True, tool_call=facts)
    if code == 3 and payload is not None:
        payload = compact_tool_payload(json.loads(payload)) or payload
    return event.run_id, code, ref, event.created_at, payload


def _tool_payload(event: ToolStateChanged, call: ToolCall) -> str:
    """``encode_event_v5``'s payload of a tool event whose call is ``call`` (its final form)."""
    result_ref = event.result is not None and event.result == call.result
    arguments_ref = event.arguments is not None and event.arguments == call.arguments
    plain = (
        event.error is None
        and event.name == call.name
        and (event.result is None or result_ref)
        and (event.arguments is None or arguments_ref)
    )
    if plain:
        return _plain_tool_payload(event.from_state, event.to_state, result_ref, arguments_ref)
    kept: dict[str, Any] = {
        "from": event.from_state.value if event.from_state is not None else None,
        "to": event.to_state.value,
    }
    if event.error is not None:
        kept["error"] = event.error
    if event.name != call.name:
        kept["name"] = event.name
    if event.result is not None:
        if result_ref:
            kept["result_ref"] = True
        else:
            kept["result"] = event.result
    if event.arguments is not None:
        if arguments_ref:
            kept["arguments_ref"] = True
        else:
            kept["arguments"] = event.arguments
    return _dumps(kept)


@cache
def _plain_tool_payload(
    from_state: ToolCallState | None, to_state: ToolCallState, result_ref: bool, arguments_ref: bool
) -> str:
    """The payload of a transition that says nothing its call does not (a few dozen strings):
    its short form (``compact_tool_payload``)."""
    kept: dict[str, Any] = {"from": from_state.value if from_state else None, "to": to_state.value}
    if result_ref:
        kept["result_ref"] = True
    if arguments_ref:
        kept["arguments_ref"] = True
    return compact_tool_payload(kept) or _dumps(kept)


def _emit(
    conn: Conn, events: Sequence[DurableEvent], calls: dict[str, ToolCall] | None = None
) -> list[DurableEvent]:
    """Append ``events`` to the log; returns them with the ``seq`` each got."""
    if not events:
        return []
    rows = [_encoded(e, calls or {}) for e in events]
    refs = _refs()
    numbered: list[tuple[int, int, int | None, float, str | None]] = []
    for run_id, code, ref, created_at, payload in rows:
        run_n = refs.get(("runs", run_id))
        table = _EVENT_TABLES.get(code)
        ref_n = refs.get((table, ref)) if table is not None and ref is not None else None
        if run_n is None or (table is not None and ref_n is None):
            break
        numbered.append((run_n, code, ref_n, created_at, payload))
    # One writer holds the database (BEGIN IMMEDIATE): the rows just inserted have the last
    # len(events) sequence numbers.
    if len(numbered) == len(rows) and len(rows) <= _ROWS_PER_INSERT:
        last = _inserted(conn, _rows_insert(_EVENT_INSERT_BY_N, len(rows)), _flat(numbered))
    else:
        if len(numbered) == len(rows):
            conn.executemany(_EVENT_INSERT_BY_N, numbered)
        else:  # some row is known only by its text id: looked up by the statement
            conn.executemany(_EVENT_INSERT, rows)
        last = int(conn.execute("SELECT last_insert_rowid()").fetchone()[0])
    first = last - len(events) + 1
    published = list(events)
    for offset, event in enumerate(published):
        # The rule made these events for this transaction and nobody has seen them yet: their
        # seq is filled in place (a frozen model's copy per event costs more than the insert).
        event.__dict__["seq"] = first + offset
    sink = getattr(_committed, "events", None)
    if sink is not None:
        sink.extend(published)
    return published


def _last_seq(conn: Conn) -> int:
    """The newest event's number ever given, not the newest left: deleting a job deletes its
    events, which may be the newest, and a reader's cursor past what is left must stay inside
    the log (``seq`` is AUTOINCREMENT, so no number is given twice; ``sqlite_sequence`` keeps
    the highest)."""
    row = conn.execute(
        "SELECT max(coalesce((SELECT max(seq) FROM events), 0),"
        " coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0))"
    ).fetchone()
    return int(row[0])


def _hydrate_events(conn: Conn, rows: Sequence[sqlite3.Row]) -> list[DurableEvent]:
    """Events as they were published: each joined back to the row it references."""

    def by_n(sql: str, numbers: set[int]) -> dict[int, sqlite3.Row]:
        if not numbers:
            return {}
        marks = ", ".join("?" * len(numbers))
        return {r["n"]: r for r in conn.execute(sql.format(marks=marks), sorted(numbers))}

    runs = by_n(
        "SELECT n, id, job_id FROM runs WHERE n IN ({marks})",
        {r["run_n"] for r in rows if r["run_n"] is not None},
    )
    messages = by_n(
        "SELECT * FROM messages WHERE n IN ({marks})", {r["ref"] for r in rows if r["kind"] == 2}
    )
    calls = by_n(
        _TOOL_SELECT + " WHERE t.n IN ({marks})",
        {r["ref"] for r in rows if r["kind"] == 3},
    )
    checkpoints = by_n(
        "SELECT n, id, step FROM checkpoints WHERE n IN ({marks})",
        {r["ref"] for r in rows if r["kind"] == 4},
    )
    hydrated_calls: dict[int, ToolCall] = {}
    result: list[DurableEvent] = []
    for row in rows:
        kind, seq, created_at = row["kind"], row["seq"], row["created_at"]
        payload = event_payload(row["payload"])
        if kind == 0:
            payload["seq"] = seq
            result.append(DURABLE_EVENT_ADAPTER.validate_python(payload))
            continue
        run = runs[row["run_n"]]
        envelope = {"seq": seq, "job_id": run["job_id"], "run_id": run["id"]}
        if kind == 2:
            result.append(
                MessageCommitted.model_construct(
                    **envelope, created_at=created_at, message=_message(messages[row["ref"]])
                )
            )
        elif kind == 3:
            call = hydrated_calls.get(row["ref"])
            if call is None:
                call = hydrated_calls[row["ref"]] = _tool_call(calls[row["ref"]])
            result.append(
                ToolStateChanged.model_construct(
                    **envelope,
                    created_at=created_at,
                    tool_call_id=call.id,
                    name=payload.get("name", call.name),
                    from_state=ToolCallState(payload["from"]) if payload.get("from") else None,
                    to_state=ToolCallState(payload["to"]),
                    arguments=call.arguments
                    if payload.get("arguments_ref")
                    else payload.get("arguments"),
                    result=call.result if payload.get("result_ref") else payload.get("result"),
                    error=payload.get("error"),
                )
            )
        elif kind == 4:
            checkpoint = checkpoints[row["ref"]]
            result.append(
                CheckpointCreated.model_construct(
                    **envelope,
                    created_at=created_at,
                    checkpoint_id=checkpoint["id"],
                    step=payload.get("step", checkpoint["step"]),
                )
            )
        else:
            payload.update(envelope, kind="run_state_changed", created_at=created_at)
            result.append(DURABLE_EVENT_ADAPTER.validate_python(payload))
    return result
