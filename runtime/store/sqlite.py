"""The SQLite implementation of the ``Store`` protocol (DESIGN §3-§6).

One long-lived aiosqlite connection per store (WAL, ``synchronous=NORMAL``, foreign keys on).
Every operation is ONE synchronous function run on aiosqlite's connection thread: a write is a
whole ``BEGIN IMMEDIATE`` … ``COMMIT`` transaction (state check, change and event together), so a
transaction never stays open across an ``await``, two stores on one file never deadlock, and a
stream of commits costs one thread hop each.

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

import base64
import hashlib
import json
import os
import sqlite3
import uuid
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, TypeVar, cast

import aiosqlite
from pydantic import TypeAdapter

from runtime import errors
from runtime.clock import Clock, SystemClock
from runtime.events import (
    DURABLE_EVENT_ADAPTER,
    EVENT_ADAPTER,
    CheckpointCreated,
    DurableEvent,
    MessageCommitted,
    RunStateChanged,
    ToolStateChanged,
)
from runtime.models import (
    Checkpoint,
    ContentBlock,
    Draft,
    Failure,
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
    Usage,
)
from runtime.states import check_input, check_run, check_tool
from runtime.store.base import (
    FileSnapshot,
    NewInputRequest,
    NewMessage,
    NewRun,
    NewToolCall,
    Page,
    RecoveryReport,
    ToolStateChange,
)
from runtime.store.migrations import LATEST_VERSION, migrate, too_new_message

__all__ = ["SNIPPET_CLOSE", "SNIPPET_OPEN", "SqliteStore", "open_sqlite_store"]

R = TypeVar("R")
Conn = sqlite3.Connection

SQLITE_HEADER = b"SQLite format 3\x00"
BUSY_TIMEOUT_MS = 10_000
TITLE_LENGTH = 80
SNIPPET_OPEN = "«"
SNIPPET_CLOSE = "»"
SEARCH_WINDOW = 2_000
"""Search ranks the best matches among this many most recent ones."""

_CONTENT: TypeAdapter[list[ContentBlock]] = TypeAdapter(list[ContentBlock])
_OPEN_RUN_STATES = (RunState.QUEUED, RunState.RUNNING, RunState.INPUT_REQUIRED)


def _new_id() -> str:
    return uuid.uuid4().hex


def canonical_hash(value: Any) -> str:
    """SHA-256 of the canonical JSON of ``value`` (sorted keys, no spaces)."""
    try:
        text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise errors.InvalidInput(f"not JSON data: {exc}") from exc
    return hashlib.sha256(text.encode()).hexdigest()


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _usage_of(row: sqlite3.Row) -> dict[str, int]:
    return {
        "input_tokens": row["input_tokens"],
        "output_tokens": row["output_tokens"],
        "cache_read_tokens": row["cache_read_tokens"],
        "cache_write_tokens": row["cache_write_tokens"],
    }


def _job(row: sqlite3.Row) -> Job:
    return Job.model_validate(
        {
            "id": row["id"],
            "title": row["title"],
            "workspace": row["workspace"],
            "agent": row["agent"],
            "created_at": row["created_at"],
            "updated_at": row["updated_at"],
            "usage": _usage_of(row),
            "cost_usd": row["cost_usd"],
            "archived": bool(row["archived"]),
            "latest_run_state": row["latest_run_state"],
        }
    )


_RUN_PLAIN = (
    "id",
    "job_id",
    "agent",
    "model",
    "state",
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
)


def _run(row: sqlite3.Row) -> Run:
    data: dict[str, Any] = {key: row[key] for key in _RUN_PLAIN}
    data["interrupted"] = bool(row["interrupted"])
    data["failure"] = json.loads(row["failure"]) if row["failure"] else None
    data["usage"] = _usage_of(row)
    return Run.model_validate(data)


def _message(row: sqlite3.Row) -> Message:
    return Message.model_validate(
        {
            "id": row["id"],
            "run_id": row["run_id"],
            "job_id": row["job_id"],
            "position": row["position"],
            "role": row["role"],
            "content": json.loads(row["content"]),
            "model": row["model"],
            "usage": json.loads(row["usage"]) if row["usage"] else None,
            "cost_usd": row["cost_usd"],
            "created_at": row["created_at"],
        }
    )


def _tool_call(row: sqlite3.Row) -> ToolCall:
    return ToolCall.model_validate(
        {
            "id": row["id"],
            "run_id": row["run_id"],
            "job_id": row["job_id"],
            "message_id": row["message_id"],
            "index": row["idx"],
            "provider_id": row["provider_id"],
            "name": row["name"],
            "arguments": json.loads(row["arguments"]),
            "state": row["state"],
            "idempotent": bool(row["idempotent"]),
            "step": row["step"],
            "result": row["result"],
            "error": row["error"],
            "child_run_id": row["child_run_id"],
            "created_at": row["created_at"],
            "started_at": row["started_at"],
            "finished_at": row["finished_at"],
        }
    )


def _input_request(row: sqlite3.Row) -> InputRequest:
    return InputRequest.model_validate(
        {
            "id": row["id"],
            "run_id": row["run_id"],
            "job_id": row["job_id"],
            "kind": row["kind"],
            "prompt": row["prompt"],
            "options": json.loads(row["options"]),
            "schema": json.loads(row["schema"]),
            "tool_call_id": row["tool_call_id"],
            "arguments_digest": row["arguments_digest"],
            "detail": json.loads(row["detail"]),
            "state": row["state"],
            "answer": json.loads(row["answer"]) if row["answer"] is not None else None,
            "created_at": row["created_at"],
            "answered_at": row["answered_at"],
        }
    )


def _checkpoint(row: sqlite3.Row) -> Checkpoint:
    return Checkpoint.model_validate(
        {
            "id": row["id"],
            "run_id": row["run_id"],
            "job_id": row["job_id"],
            "step": row["step"],
            "last_position": row["last_position"],
            "usage": json.loads(row["usage"]),
            "pending_tool_call_ids": json.loads(row["pending_tool_call_ids"]),
            "created_at": row["created_at"],
        }
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


def _title_from(input_text: str | None) -> str:
    for line in (input_text or "").splitlines():
        line = line.strip()
        if line:
            if len(line) > TITLE_LENGTH:
                return line[: TITLE_LENGTH - 1].rstrip() + "…"
            return line
    return "Untitled"


def check_database_file(path: Path) -> None:
    """Refuse a file that is not an SQLite database, an SQLite database that is not ours, or a
    schema newer than this code knows, without changing a byte of it."""
    if not path.exists():
        return
    if path.is_dir():
        raise errors.NotADatabase(f"{path}: is a directory, not an agent-tui database")
    if path.stat().st_size == 0:
        return
    with path.open("rb") as fh:
        header = fh.read(len(SQLITE_HEADER))
    if header != SQLITE_HEADER:
        raise errors.NotADatabase(
            f"{path}: not an SQLite database, so not an agent-tui database; refusing to open it"
        )
    try:
        ro = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)
        try:
            version = int(ro.execute("PRAGMA user_version").fetchone()[0])
            tables = int(
                ro.execute(
                    "SELECT count(*) FROM sqlite_master WHERE type = 'table'"
                    " AND name NOT LIKE 'sqlite_%'"
                ).fetchone()[0]
            )
        finally:
            ro.close()
    except sqlite3.DatabaseError as exc:
        raise errors.NotADatabase(f"{path}: unreadable SQLite database ({exc})") from exc
    if version > LATEST_VERSION:
        raise errors.SchemaTooNew(too_new_message(str(path), version))
    if version == 0 and tables:
        raise errors.NotADatabase(
            f"{path}: an SQLite database of another program, not an agent-tui database"
        )


class SqliteStore:
    """A ``Store`` on one SQLite file. ``await open()`` before use, ``await close()`` after."""

    def __init__(self, path: str | Path, *, clock: Clock | None = None) -> None:
        self.path = Path(path)
        self._clock: Clock = clock or SystemClock()
        self._db: aiosqlite.Connection | None = None

    # --- plumbing ------------------------------------------------------------------------------

    async def __aenter__(self) -> SqliteStore:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _now(self) -> float:
        return self._clock.now()

    async def _call(self, fn: Callable[[Conn], R]) -> R:
        """Run ``fn(connection)`` on the connection's thread (one hop per operation)."""
        db = self._db
        if db is None:
            raise errors.DatabaseError(f"{self.path}: the store is not open")
        try:
            # aiosqlite's queue runs callables on its connection thread; one hop per operation.
            return cast(R, await cast(Any, db)._execute(fn, db._conn))
        except sqlite3.IntegrityError as exc:
            raise errors.ConflictError(f"{self.path}: {exc}") from exc
        except sqlite3.Error as exc:
            raise errors.DatabaseError(f"{self.path}: {exc}") from exc

    async def _write(self, fn: Callable[[Conn], R]) -> R:
        return await self._call(partial(_in_transaction, fn))

    async def open(self) -> None:
        if self._db is not None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        check_database_file(self.path)
        db = await aiosqlite.connect(str(self.path), isolation_level=None)
        try:
            await cast(Any, db)._execute(self._setup, db._conn)
        except sqlite3.Error as exc:
            await db.close()
            raise errors.DatabaseError(f"{self.path}: {exc}") from exc
        except BaseException:
            await db.close()
            raise
        self._db = db

    def _setup(self, conn: Conn) -> None:
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA cache_size = -32000")
        conn.execute("PRAGMA wal_autocheckpoint = 4000")
        migrate(conn, path=str(self.path))

    async def close(self) -> None:
        db, self._db = self._db, None
        if db is not None:
            await db.close()

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
            if row is None:
                raise errors.OwnershipLost(f"owner {owner_id} is not registered")
            if row["released"] or row["recovered_at"] is not None:
                raise errors.OwnershipLost(f"owner {owner_id} was released or recovered")
            if row["lease_expires_at"] < now:
                raise errors.OwnershipLost(f"the lease of owner {owner_id} expired")
            conn.execute(
                "UPDATE owners SET lease_expires_at = ?, heartbeat_at = ? WHERE owner_id = ?",
                (now + row["lease_seconds"], now, owner_id),
            )

        await self._write(tx)

    async def release_owner(self, owner_id: str) -> None:
        now = self._now()

        def tx(conn: Conn) -> None:
            conn.execute(
                "UPDATE owners SET released = 1, lease_expires_at = min(lease_expires_at, ?)"
                " WHERE owner_id = ?",
                (now, owner_id),
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

        return await self._call(read)

    async def recover_expired(self) -> RecoveryReport:
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
            for row in rows:
                if row["state"] == RunState.QUEUED:
                    conn.execute(
                        "UPDATE runs SET interrupted = 1, owner_id = NULL,"
                        " revision = revision + 1, updated_at = ? WHERE n = ?",
                        (now, row["n"]),
                    )
                    report.interrupted_queued.append(row["id"])
                    continue
                _recover_running(conn, row, now, report)
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
                    if existing["idempotency_hash"] != input_hash:
                        raise errors.IdempotencyConflict(
                            f"idempotency key {key!r} was used for a different run"
                        )
                    return _run(existing)
            _check_references(conn, new_run)
            job_id = new_run.job_id
            is_root = new_run.parent_run_id is None
            run_id = _new_id()
            if job_id is None:
                job_id = _new_id()
                conn.execute(
                    "INSERT INTO jobs (id, title, workspace, agent, created_at, updated_at,"
                    " latest_root_run_id, latest_run_state) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        job_id,
                        new_run.title or _title_from(new_run.input),
                        new_run.workspace,
                        new_run.agent,
                        now,
                        now,
                        run_id,
                        RunState.QUEUED.value,
                    ),
                )
            elif is_root:
                # One conversation at a time: a second root run while one is still active (a
                # double submit, two processes) would interleave two histories.
                active = conn.execute(
                    "SELECT id, state FROM runs WHERE job_id = ? AND parent_run_id IS NULL"
                    " AND state IN ('queued', 'running', 'input_required') LIMIT 1",
                    (job_id,),
                ).fetchone()
                if active is not None:
                    raise errors.RunStateConflict(
                        f"run {active['id']} of job {job_id} is {active['state']}; wait for it,"
                        " answer it or cancel it first"
                    )
                conn.execute(
                    "UPDATE jobs SET updated_at = ?, latest_root_run_id = ?,"
                    " latest_run_state = ? WHERE id = ?",
                    (now, run_id, RunState.QUEUED.value, job_id),
                )
            else:
                conn.execute("UPDATE jobs SET updated_at = ? WHERE id = ?", (now, job_id))
            check_run(None, RunState.QUEUED)
            row = conn.execute(
                "INSERT INTO runs (id, job_id, agent, model, state, revision, input,"
                " parent_run_id, parent_tool_call_id, history_run_id, history_position,"
                " forked_from_checkpoint_id, retry_of_run_id, idempotency_key, idempotency_hash,"
                " owner_id, max_steps, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING *",
                (
                    run_id,
                    job_id,
                    new_run.agent,
                    new_run.model,
                    RunState.QUEUED.value,
                    new_run.input,
                    new_run.parent_run_id,
                    new_run.parent_tool_call_id,
                    new_run.history_run_id,
                    new_run.history_position,
                    new_run.forked_from_checkpoint_id,
                    new_run.retry_of_run_id,
                    key,
                    input_hash if key is not None else None,
                    new_run.owner_id,
                    new_run.max_steps,
                    now,
                    now,
                ),
            ).fetchone()
            run = _run(row)
            events: list[DurableEvent] = [
                RunStateChanged(
                    job_id=job_id,
                    run_id=run_id,
                    created_at=now,
                    from_state=None,
                    to_state=RunState.QUEUED,
                )
            ]
            if new_run.input is not None:
                message = Message(
                    id=_new_id(),
                    run_id=run_id,
                    job_id=job_id,
                    position=0,
                    role=Role.USER,
                    content=[TextBlock(text=new_run.input)],
                    created_at=now,
                )
                _insert_message(conn, message)
                events.append(
                    MessageCommitted(job_id=job_id, run_id=run_id, created_at=now, message=message)
                )
            _emit(conn, events)
            return run

        return await self._write(tx)

    async def claim_run(self, run_id: str, *, owner_id: str) -> Run:
        now = self._now()

        def tx(conn: Conn) -> Run:
            row = _run_row(conn, run_id)
            if row["state"] != RunState.QUEUED:
                raise errors.RunStateConflict(
                    f"run {run_id} is {row['state']}, not queued; it cannot be claimed"
                )
            check_run(RunState.QUEUED, RunState.RUNNING)
            run = _update_run(
                conn,
                row,
                now,
                state=RunState.RUNNING.value,
                execution_token=_new_id(),
                owner_id=owner_id,
                interrupted=0,
            )
            _emit_run_change(conn, row, RunState.RUNNING, now)
            return run

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
        if target not in (RunState.COMPLETED, RunState.FAILED, RunState.QUEUED):
            raise errors.InvalidInput(f"finish_run goes to completed, failed or queued, not {to}")

        def tx(conn: Conn) -> Run:
            row = _run_row_for_token(conn, run_id, token)
            if row["state"] != RunState.RUNNING:
                raise errors.IllegalTransition("run", row["state"], target)
            check_run(RunState(row["state"]), target)
            fields: dict[str, Any] = {"state": target.value, "execution_token": None}
            if target is RunState.COMPLETED:
                fields["outcome"] = outcome
            if target is RunState.FAILED:
                fields["failure"] = failure.model_dump_json() if failure else None
            if target is RunState.QUEUED:
                # Stopped early with nobody to go on: it waits for a person, like a recovered run.
                fields["interrupted"] = 1
            run = _update_run(conn, row, now, **fields)
            _emit_run_change(
                conn,
                row,
                target,
                now,
                outcome=outcome if target is RunState.COMPLETED else None,
                failure=failure if target is RunState.FAILED else None,
                interrupted=target is RunState.QUEUED,
            )
            return run

        return await self._write(tx)

    async def cancel_run(
        self, run_id: str, *, reason: str | None = None, expected_revision: int | None = None
    ) -> Run:
        now = self._now()

        def tx(conn: Conn) -> Run:
            row = _run_row(conn, run_id)
            _check_revision(row, expected_revision)
            state = RunState(row["state"])
            if state.is_terminal:
                raise errors.RunStateConflict(f"run {run_id} is already {state}")
            check_run(state, RunState.CANCELLED)
            open_calls = conn.execute(
                "SELECT n, id, name, state FROM tool_calls WHERE run_id = ?"
                " AND state IN ('pending', 'running') ORDER BY n",
                (run_id,),
            ).fetchall()
            for call in open_calls:
                check_tool(ToolCallState(call["state"]), ToolCallState.CANCELLED)
            conn.executemany(
                "UPDATE tool_calls SET state = 'cancelled', finished_at = ?,"
                " error = coalesce(error, ?) WHERE n = ?",
                [(now, "cancelled", call["n"]) for call in open_calls],
            )
            check_input(InputRequestState.PENDING, InputRequestState.CANCELLED)
            conn.execute(
                "UPDATE input_requests SET state = 'cancelled', answered_at = ?"
                " WHERE run_id = ? AND state = 'pending'",
                (now, run_id),
            )
            run = _update_run(
                conn,
                row,
                now,
                state=RunState.CANCELLED.value,
                execution_token=None,
                cancel_reason=reason,
            )
            events: list[DurableEvent] = [
                ToolStateChanged(
                    job_id=row["job_id"],
                    run_id=run_id,
                    created_at=now,
                    tool_call_id=call["id"],
                    name=call["name"],
                    from_state=ToolCallState(call["state"]),
                    to_state=ToolCallState.CANCELLED,
                    error="cancelled",
                )
                for call in open_calls
            ]
            _emit(conn, events)
            _emit_run_change(conn, row, RunState.CANCELLED, now, reason=reason)
            return run

        return await self._write(tx)

    async def set_run_step(self, run_id: str, *, token: str, step: int) -> Run:
        now = self._now()

        def tx(conn: Conn) -> Run:
            row = _run_row_for_token(conn, run_id, token)
            return _update_run(conn, row, now, touch_job=False, step=step)

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
        message_id = message.id or _new_id()
        return await self._write(
            lambda conn: _tx_commit_message(
                conn, now, run_id, token, message, message_id, tool_calls, step
            )
        )

    async def save_draft(self, run_id: str, *, token: str, message_id: str, text: str) -> None:
        now = self._now()

        def tx(conn: Conn) -> None:
            _run_row_for_token(conn, run_id, token)
            conn.execute(
                "INSERT INTO drafts (run_id, message_id, text, updated_at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (run_id, message_id) DO UPDATE SET text = excluded.text,"
                " updated_at = excluded.updated_at",
                (run_id, message_id, text, now),
            )

        await self._write(tx)

    async def get_drafts(self, run_id: str) -> list[Draft]:
        def read(conn: Conn) -> list[Draft]:
            rows = conn.execute(
                "SELECT * FROM drafts WHERE run_id = ? ORDER BY updated_at, message_id",
                (run_id,),
            ).fetchall()
            return [Draft.model_validate(dict(r)) for r in rows]

        return await self._call(read)

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
            _run_row_for_token(conn, row["run_id"], token)
            return _tx_tool_states(conn, now, row["run_id"], [change])[0]

        return await self._write(tx)

    async def set_tool_states(
        self, run_id: str, *, token: str, changes: list[ToolStateChange]
    ) -> list[ToolCall]:
        now = self._now()

        def tx(conn: Conn) -> list[ToolCall]:
            _run_row_for_token(conn, run_id, token)
            return _tx_tool_states(conn, now, run_id, changes)

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
            _run_row_for_token(conn, run_id, token)
            calls = _tx_tool_states(conn, now, run_id, tool_changes)
            committed = None
            if message is not None:
                committed, _ = _tx_commit_message(
                    conn, now, run_id, token, message, message.id or _new_id(), None, None
                )
            checkpoint = _tx_checkpoint(conn, now, run_id, token, checkpoint_step)
            return calls, committed, checkpoint

        return await self._write(tx)

    # --- input requests --------------------------------------------------------------------------

    async def open_input_request(
        self, run_id: str, *, token: str, request: NewInputRequest
    ) -> tuple[Run, InputRequest]:
        now = self._now()

        def tx(conn: Conn) -> tuple[Run, InputRequest]:
            row = _run_row_for_token(conn, run_id, token)
            check_run(RunState(row["state"]), RunState.INPUT_REQUIRED)
            check_input(None, InputRequestState.PENDING)
            if request.tool_call_id is not None:
                found = conn.execute(
                    "SELECT 1 FROM tool_calls WHERE id = ?", (request.tool_call_id,)
                ).fetchone()
                if found is None:
                    raise errors.ToolCallNotFound(f"tool call {request.tool_call_id} not found")
            created = InputRequest(
                id=_new_id(),
                run_id=run_id,
                job_id=row["job_id"],
                kind=request.kind,
                prompt=request.prompt,
                options=request.options,
                answer_schema=request.answer_schema,
                tool_call_id=request.tool_call_id,
                arguments_digest=request.arguments_digest,
                detail=request.detail,
                created_at=now,
            )
            conn.execute(
                "INSERT INTO input_requests (id, run_id, job_id, kind, prompt, options, schema,"
                " tool_call_id, arguments_digest, detail, state, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?)",
                (
                    created.id,
                    run_id,
                    row["job_id"],
                    created.kind.value,
                    created.prompt,
                    _dumps(created.options),
                    _dumps(created.answer_schema),
                    created.tool_call_id,
                    created.arguments_digest,
                    _dumps(created.detail),
                    now,
                ),
            )
            run = _update_run(conn, row, now, state=RunState.INPUT_REQUIRED.value)
            _emit_run_change(conn, row, RunState.INPUT_REQUIRED, now, request=created)
            return run, created

        return await self._write(tx)

    async def answer_input_request(
        self,
        request_id: str,
        *,
        answer: Any,
        idempotency_key: str | None = None,
        expected_revision: int | None = None,
    ) -> tuple[Run, InputRequest]:
        now = self._now()
        input_hash = canonical_hash({"request_id": request_id, "answer": answer})
        answer_json = _dumps(answer)
        operation = "answer_input_request"

        def tx(conn: Conn) -> tuple[Run, InputRequest]:
            if idempotency_key is not None:
                receipt = conn.execute(
                    "SELECT input_hash, result FROM receipts WHERE operation = ? AND key = ?",
                    (operation, idempotency_key),
                ).fetchone()
                if receipt is not None:
                    if receipt["input_hash"] != input_hash:
                        raise errors.IdempotencyConflict(
                            f"idempotency key {idempotency_key!r} was used for another answer"
                        )
                    stored = json.loads(receipt["result"])
                    return (
                        Run.model_validate(stored["run"]),
                        InputRequest.model_validate(stored["request"]),
                    )
            req = conn.execute(
                "SELECT * FROM input_requests WHERE id = ?", (request_id,)
            ).fetchone()
            if req is None:
                raise errors.RequestNotFound(f"input request {request_id} not found")
            if req["state"] == InputRequestState.ANSWERED:
                raise errors.AlreadyAnswered(f"input request {request_id} is already answered")
            if req["state"] == InputRequestState.CANCELLED:
                raise errors.RunStateConflict(f"input request {request_id} was cancelled")
            row = _run_row(conn, req["run_id"])
            _check_revision(row, expected_revision)
            if row["state"] != RunState.INPUT_REQUIRED:
                raise errors.RunStateConflict(
                    f"run {row['id']} is {row['state']}, not waiting for input"
                )
            if req["tool_call_id"] is not None:
                call = conn.execute(
                    "SELECT state FROM tool_calls WHERE id = ?", (req["tool_call_id"],)
                ).fetchone()
                if call is None or call["state"] not in ("pending", "running"):
                    state = call["state"] if call is not None else "missing"
                    raise errors.RunStateConflict(
                        f"the tool call of input request {request_id} is {state}"
                    )
            check_input(InputRequestState(req["state"]), InputRequestState.ANSWERED)
            check_run(RunState.INPUT_REQUIRED, RunState.QUEUED)
            answered = _input_request(
                conn.execute(
                    "UPDATE input_requests SET state = 'answered', answer = ?, answered_at = ?"
                    " WHERE n = ? AND state = 'pending' RETURNING *",
                    (answer_json, now, req["n"]),
                ).fetchone()
            )
            run = _update_run(conn, row, now, state=RunState.QUEUED.value, execution_token=None)
            _emit_run_change(conn, row, RunState.QUEUED, now)
            if idempotency_key is not None:
                result = _dumps(
                    {
                        "run": run.model_dump(mode="json", by_alias=True),
                        "request": answered.model_dump(mode="json", by_alias=True),
                    }
                )
                conn.execute(
                    "INSERT INTO receipts (operation, key, input_hash, result, created_at)"
                    " VALUES (?, ?, ?, ?, ?)",
                    (operation, idempotency_key, input_hash, result, now),
                )
            return run, answered

        return await self._write(tx)

    async def cancel_input_request(
        self, request_id: str, *, token: str | None = None, reason: str
    ) -> InputRequest:
        now = self._now()

        def tx(conn: Conn) -> InputRequest:
            req = conn.execute(
                "SELECT * FROM input_requests WHERE id = ?", (request_id,)
            ).fetchone()
            if req is None:
                raise errors.RequestNotFound(f"input request {request_id} not found")
            row = (
                _run_row_for_token(conn, req["run_id"], token)
                if token is not None
                else _run_row(conn, req["run_id"])
            )
            check_input(InputRequestState(req["state"]), InputRequestState.CANCELLED)
            cancelled = _input_request(
                conn.execute(
                    "UPDATE input_requests SET state = 'cancelled', answered_at = ?,"
                    " detail = json_set(detail, '$.cancel_reason', ?) WHERE n = ? RETURNING *",
                    (now, reason, req["n"]),
                ).fetchone()
            )
            still_pending = conn.execute(
                "SELECT 1 FROM input_requests WHERE run_id = ? AND state = 'pending' LIMIT 1",
                (req["run_id"],),
            ).fetchone()
            if row["state"] == RunState.INPUT_REQUIRED and still_pending is None:
                # Nothing left to wait for: the run goes back to the queue (no token).
                check_run(RunState.INPUT_REQUIRED, RunState.QUEUED)
                _update_run(conn, row, now, state=RunState.QUEUED.value, execution_token=None)
                _emit_run_change(conn, row, RunState.QUEUED, now, reason=reason)
            return cancelled

        return await self._write(tx)

    # --- checkpoints -----------------------------------------------------------------------------

    async def create_checkpoint(self, run_id: str, *, token: str, step: int) -> Checkpoint:
        now = self._now()
        return await self._write(lambda conn: _tx_checkpoint(conn, now, run_id, token, step))

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
            last = conn.execute("SELECT coalesce(max(seq), 0) FROM events").fetchone()[0]
            if after < 0 or after > last:
                raise errors.CursorOutOfRange(
                    f"event cursor {after} is outside the log (last event is {last})"
                )
            sql = "SELECT seq, payload FROM events WHERE seq > ?"
            params: list[Any] = [after]
            if run_id is not None:
                sql += " AND run_id = ?"
                params.append(run_id)
            if job_id is not None:
                sql += " AND job_id = ?"
                params.append(job_id)
            sql += " ORDER BY seq LIMIT ?"
            params.append(max(0, limit))
            result: list[DurableEvent] = []
            for seq, payload in conn.execute(sql, params):
                data = json.loads(payload)
                data["seq"] = seq
                result.append(DURABLE_EVENT_ADAPTER.validate_python(data))
            return result

        return await self._call(read)

    async def last_seq(self) -> int:
        return await self._call(
            lambda conn: int(conn.execute("SELECT coalesce(max(seq), 0) FROM events").fetchone()[0])
        )

    # --- queries ---------------------------------------------------------------------------------

    async def _get(
        self, sql: str, key: str, convert: Callable[[sqlite3.Row], R], missing: errors.AgentTuiError
    ) -> R:
        def read(conn: Conn) -> R:
            row = conn.execute(sql, (key,)).fetchone()
            if row is None:
                raise missing
            return convert(row)

        return await self._call(read)

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
            "SELECT * FROM tool_calls WHERE id = ?",
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
        sql = "SELECT * FROM runs"
        where: list[str] = []
        params: list[Any] = []
        if archived is not None:
            where.append("job_id IN (SELECT id FROM jobs WHERE archived = ?)")
            params.append(int(archived))
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

        return await self._call(read)

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

        return await self._call(read)

    async def list_tool_calls(
        self, run_id: str, *, message_id: str | None = None
    ) -> list[ToolCall]:
        def read(conn: Conn) -> list[ToolCall]:
            if message_id is not None:
                rows = conn.execute(
                    "SELECT * FROM tool_calls WHERE message_id = ? AND run_id = ? ORDER BY idx",
                    (message_id, run_id),
                )
            else:
                rows = conn.execute(
                    "SELECT * FROM tool_calls WHERE run_id = ? ORDER BY n", (run_id,)
                )
            return [_tool_call(r) for r in rows]

        return await self._call(read)

    async def list_checkpoints(self, run_id: str) -> list[Checkpoint]:
        def read(conn: Conn) -> list[Checkpoint]:
            rows = conn.execute("SELECT * FROM checkpoints WHERE run_id = ? ORDER BY n", (run_id,))
            return [_checkpoint(r) for r in rows]

        return await self._call(read)

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

        return await self._call(read)

    async def list_input_requests(self, run_id: str) -> list[InputRequest]:
        def read(conn: Conn) -> list[InputRequest]:
            rows = conn.execute(
                "SELECT * FROM input_requests WHERE run_id = ? ORDER BY n", (run_id,)
            )
            return [_input_request(r) for r in rows]

        return await self._call(read)

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

        def read(conn: Conn) -> list[SearchHit]:
            # Rank (bm25) only the most recent SEARCH_WINDOW matches: FTS5 walks rowids newest
            # first and stops early, so a word found in every third message stays fast.
            oldest = conn.execute(
                "SELECT coalesce(min(rowid), 0) FROM (SELECT rowid FROM messages_fts"
                " WHERE messages_fts MATCH ? ORDER BY rowid DESC LIMIT ?)",
                (match, SEARCH_WINDOW),
            ).fetchone()[0]
            rows = conn.execute(
                "WITH hits AS (SELECT rowid, rank,"
                "   snippet(messages_fts, 0, ?, ?, '…', 12) AS snippet"
                "   FROM messages_fts WHERE messages_fts MATCH ? AND rowid >= ?"
                "   ORDER BY rank LIMIT ?)"
                " SELECT m.id, m.run_id, m.job_id, j.title, m.created_at, hits.snippet"
                " FROM hits JOIN messages AS m ON m.n = hits.rowid"
                " JOIN jobs AS j ON j.id = m.job_id ORDER BY hits.rank",
                (SNIPPET_OPEN, SNIPPET_CLOSE, match, oldest, limit),
            ).fetchall()
            return [
                SearchHit(
                    message_id=r["id"],
                    run_id=r["run_id"],
                    job_id=r["job_id"],
                    job_title=r["title"],
                    snippet=r["snippet"] or "",
                    created_at=r["created_at"],
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

        return await self._call(read)

    # --- archive and delete (DESIGN §5: deletion is explicit, archive first) -------------------

    async def set_job_archived(self, job_id: str, archived: bool) -> Job:
        """Archive (hide) or unarchive a job. A job with a run still queued, running or
        waiting for input cannot be archived (cancel it first)."""

        def tx(conn: Conn) -> Job:
            row = conn.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
            if row is None:
                raise errors.JobNotFound(f"job {job_id} not found")
            if archived:
                busy = conn.execute(
                    "SELECT id, state FROM runs WHERE job_id = ? AND state IN (?, ?, ?)"
                    " ORDER BY n LIMIT 1",
                    (job_id, *(state.value for state in _OPEN_RUN_STATES)),
                ).fetchone()
                if busy is not None:
                    raise errors.ConflictError(
                        f"job {job_id} has a run that is {busy['state']} ({busy['id']}); "
                        "cancel it or let it finish before archiving"
                    )
            if bool(row["archived"]) != archived:
                conn.execute("UPDATE jobs SET archived = ? WHERE id = ?", (int(archived), job_id))
            return _job(conn.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone())

        return await self._write(tx)

    async def delete_job(self, job_id: str) -> dict[str, int]:
        """Delete an ARCHIVED job and every row of it (runs, messages and their search index,
        tool calls, requests, checkpoints, drafts, events, file snapshots and the blobs only
        they used) in one transaction. Returns the number of rows removed per kind. Refused
        for a job that is not archived, or whose runs another job's fork reads as history."""

        def tx(conn: Conn) -> dict[str, int]:
            row = conn.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
            if row is None:
                raise errors.JobNotFound(f"job {job_id} not found")
            if not row["archived"]:
                raise errors.ConflictError(
                    f"job {job_id} is not archived; archive it first (agent-tui archive {job_id})"
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
            for table, where in (
                ("file_snapshots", "job_id = ?"),
                ("drafts", f"run_id IN ({run_ids})"),
                ("events", "job_id = ?"),
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
            sha = None
            if after is not None:
                sha = hashlib.sha256(after).hexdigest()
                _insert_blob(conn, sha, after, "application/octet-stream", created)
            conn.execute(
                "UPDATE file_snapshots SET after_sha256 = ?, after_recorded = 1"
                " WHERE tool_call_id = ? AND path = ?",
                (sha, tool_call_id, path),
            )

        await self._write(tx)

    async def list_file_snapshots(self, job_id: str) -> list[FileSnapshot]:
        """Every file snapshot of a job, oldest first."""

        def read(conn: Conn) -> list[FileSnapshot]:
            rows = conn.execute(
                "SELECT * FROM file_snapshots WHERE job_id = ? ORDER BY n", (job_id,)
            )
            return [_file_snapshot(r) for r in rows]

        return await self._call(read)

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

        return await self._call(read)

    # --- composer drafts, id prefixes and prompt history (clients' conveniences) -------------

    async def get_composer_draft(self, job_id: str | None) -> str:
        def read(conn: Conn) -> str:
            row = conn.execute(
                "SELECT text FROM composer_drafts WHERE job_id = ?", (job_id or "",)
            ).fetchone()
            return str(row["text"]) if row is not None else ""

        return await self._call(read)

    async def save_composer_draft(self, job_id: str | None, text: str) -> None:
        now = self._now()

        def write(conn: Conn) -> None:
            if text.strip():
                conn.execute(
                    "INSERT INTO composer_drafts (job_id, text, updated_at) VALUES (?, ?, ?)"
                    " ON CONFLICT (job_id) DO UPDATE SET text = excluded.text,"
                    " updated_at = excluded.updated_at",
                    (job_id or "", text, now),
                )
            else:
                conn.execute("DELETE FROM composer_drafts WHERE job_id = ?", (job_id or "",))

        await self._write(write)

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

        return await self._call(read)

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


def _in_transaction(fn: Callable[[Conn], R], conn: Conn) -> R:
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = fn(conn)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return result


def _run_row(conn: Conn, run_id: str) -> sqlite3.Row:
    row: sqlite3.Row | None = conn.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
    if row is None:
        raise errors.RunNotFound(f"run {run_id} not found")
    return row


def _check_revision(row: sqlite3.Row, expected: int | None) -> None:
    """Compare-and-set: a writer that states the revision it read loses to any change since."""
    if expected is not None and row["revision"] != expected:
        raise errors.RevisionConflict(
            f"run {row['id']} changed since it was read (revision {row['revision']}, "
            f"expected {expected}); read it again"
        )


def _run_row_for_token(conn: Conn, run_id: str, token: str) -> sqlite3.Row:
    row = _run_row(conn, run_id)
    if row["execution_token"] is None or row["execution_token"] != token:
        raise errors.OwnershipLost(f"run {run_id}: this execution no longer owns it")
    return row


def _update_run(
    conn: Conn, row: sqlite3.Row, now: float, *, touch_job: bool = True, **fields: Any
) -> Run:
    """Change a run row (revision + 1) and, with a new state, its job's activity and state."""
    assignments = "".join(f", {name} = ?" for name in fields)
    updated = conn.execute(
        f"UPDATE runs SET revision = revision + 1, updated_at = ?{assignments}"
        " WHERE n = ? RETURNING *",
        (now, *fields.values(), row["n"]),
    ).fetchone()
    if touch_job:
        conn.execute(
            "UPDATE jobs SET updated_at = ?, latest_run_state = CASE"
            " WHEN latest_root_run_id = ? THEN ? ELSE latest_run_state END WHERE id = ?",
            (now, row["id"], updated["state"], row["job_id"]),
        )
    return _run(updated)


def _insert_message(conn: Conn, message: Message) -> None:
    conn.execute(
        "INSERT INTO messages (id, run_id, job_id, position, role, content, model, usage,"
        " cost_usd, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            message.id,
            message.run_id,
            message.job_id,
            message.position,
            message.role.value,
            _CONTENT.dump_json(message.content).decode(),
            message.model,
            message.usage.model_dump_json() if message.usage else None,
            message.cost_usd,
            message.created_at,
        ),
    )


def _emit(conn: Conn, events: Iterable[DurableEvent]) -> None:
    conn.executemany(
        "INSERT INTO events (job_id, run_id, kind, created_at, payload) VALUES (?, ?, ?, ?, ?)",
        [
            (
                e.job_id,
                e.run_id,
                e.kind,
                e.created_at,
                EVENT_ADAPTER.dump_json(e, by_alias=True, exclude={"seq"}).decode(),
            )
            for e in events
        ],
    )


def _emit_run_change(
    conn: Conn,
    row: sqlite3.Row,
    to_state: RunState,
    now: float,
    *,
    request: InputRequest | None = None,
    outcome: str | None = None,
    failure: Failure | None = None,
    reason: str | None = None,
    interrupted: bool = False,
) -> None:
    _emit(
        conn,
        [
            RunStateChanged(
                job_id=row["job_id"],
                run_id=row["id"],
                created_at=now,
                from_state=RunState(row["state"]),
                to_state=to_state,
                request=request,
                outcome=outcome,
                failure=failure,
                reason=reason,
                interrupted=interrupted,
            )
        ],
    )


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


def _recover_running(conn: Conn, row: sqlite3.Row, now: float, report: RecoveryReport) -> None:
    """A running run whose owner died: re-queue it, or fail it when a tool's outcome is unknown."""
    running_calls = conn.execute(
        "SELECT n, id, name, idempotent FROM tool_calls WHERE run_id = ? AND state = 'running'"
        " ORDER BY n",
        (row["id"],),
    ).fetchall()
    in_doubt = [c for c in running_calls if not c["idempotent"]]
    events: list[DurableEvent] = []
    for call in running_calls:
        target = ToolCallState.PENDING if call["idempotent"] else ToolCallState.INDETERMINATE
        check_tool(ToolCallState.RUNNING, target)
        message = None
        if target is ToolCallState.INDETERMINATE:
            message = f"the process running tool {call['name']!r} stopped; its outcome is unknown"
        conn.execute(
            "UPDATE tool_calls SET state = ?, error = ?, finished_at = ?,"
            " started_at = CASE WHEN ? THEN NULL ELSE started_at END WHERE n = ?",
            (
                target.value,
                message,
                now if message else None,
                target is ToolCallState.PENDING,
                call["n"],
            ),
        )
        events.append(
            ToolStateChanged(
                job_id=row["job_id"],
                run_id=row["id"],
                created_at=now,
                tool_call_id=call["id"],
                name=call["name"],
                from_state=ToolCallState.RUNNING,
                to_state=target,
                error=message,
            )
        )
    _emit(conn, events)
    if in_doubt:
        names = ", ".join(repr(c["name"]) for c in in_doubt)
        failure = Failure(
            code="tool_indeterminate",
            message=f"the process stopped while tool {names} ran; its outcome is unknown, "
            "so the run was not retried automatically",
        )
        check_run(RunState.RUNNING, RunState.FAILED)
        _update_run(
            conn,
            row,
            now,
            state=RunState.FAILED.value,
            execution_token=None,
            failure=failure.model_dump_json(),
        )
        _emit_run_change(conn, row, RunState.FAILED, now, failure=failure)
        report.failed.append(row["id"])
        return
    check_run(RunState.RUNNING, RunState.QUEUED)
    _update_run(
        conn,
        row,
        now,
        state=RunState.QUEUED.value,
        execution_token=None,
        owner_id=None,
        interrupted=1,
    )
    _emit_run_change(conn, row, RunState.QUEUED, now, interrupted=True)
    report.requeued.append(row["id"])


def _tx_commit_message(
    conn: Conn,
    now: float,
    run_id: str,
    token: str,
    message: NewMessage,
    message_id: str,
    tool_calls: list[NewToolCall] | None,
    step: int | None,
) -> tuple[Message, list[ToolCall]]:
    row = _run_row_for_token(conn, run_id, token)
    job_id = row["job_id"]
    if step is not None:
        conn.execute("UPDATE runs SET step = ? WHERE n = ?", (step, row["n"]))
    call_step = row["step"] if step is None else step
    position = conn.execute(
        "SELECT coalesce(max(position) + 1, 0) FROM messages WHERE run_id = ?",
        (run_id,),
    ).fetchone()[0]
    committed = Message(
        id=message_id,
        run_id=run_id,
        job_id=job_id,
        position=position,
        role=message.role,
        content=message.content,
        model=message.model,
        usage=message.usage,
        cost_usd=message.cost_usd,
        created_at=now,
    )
    _insert_message(conn, committed)
    calls = [
        ToolCall(
            id=new_call.id or _new_id(),
            run_id=run_id,
            job_id=job_id,
            message_id=message_id,
            index=index,
            provider_id=new_call.provider_id,
            name=new_call.name,
            arguments=new_call.arguments,
            # A call started with its message goes pending → running in this transaction: it
            # is written once, in its final state, and both transitions are in the log.
            state=ToolCallState.RUNNING if new_call.start else ToolCallState.PENDING,
            idempotent=new_call.idempotent,
            step=call_step,
            created_at=now,
            started_at=now if new_call.start else None,
        )
        for index, new_call in enumerate(tool_calls or ())
    ]
    if calls:
        check_tool(None, ToolCallState.PENDING)
        if any(c.state is ToolCallState.RUNNING for c in calls):
            check_tool(ToolCallState.PENDING, ToolCallState.RUNNING)
        conn.executemany(
            "INSERT INTO tool_calls (id, run_id, job_id, message_id, idx, provider_id,"
            " name, arguments, state, idempotent, step, created_at, started_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    c.id,
                    run_id,
                    job_id,
                    message_id,
                    c.index,
                    c.provider_id,
                    c.name,
                    _dumps(c.arguments),
                    c.state.value,
                    int(c.idempotent),
                    c.step,
                    now,
                    c.started_at,
                )
                for c in calls
            ],
        )
    usage = message.usage or Usage()
    totals = (
        usage.input_tokens,
        usage.output_tokens,
        usage.cache_read_tokens,
        usage.cache_write_tokens,
        message.cost_usd,
    )
    conn.execute(
        "UPDATE runs SET input_tokens = input_tokens + ?,"
        " output_tokens = output_tokens + ?, cache_read_tokens = cache_read_tokens + ?,"
        " cache_write_tokens = cache_write_tokens + ?, cost_usd = cost_usd + ?,"
        " context_tokens = coalesce(?, context_tokens), revision = revision + 1,"
        " updated_at = ? WHERE n = ?",
        (
            *totals,
            message.usage.context_tokens if message.usage else None,
            now,
            row["n"],
        ),
    )
    conn.execute(
        "UPDATE jobs SET input_tokens = input_tokens + ?,"
        " output_tokens = output_tokens + ?, cache_read_tokens = cache_read_tokens + ?,"
        " cache_write_tokens = cache_write_tokens + ?, cost_usd = cost_usd + ?,"
        " updated_at = ? WHERE id = ?",
        (*totals, now, job_id),
    )
    # The committed message replaces the draft it streamed under, and those of attempts that
    # were dropped and retried (one message streams per run at a time).
    conn.execute("DELETE FROM drafts WHERE run_id = ?", (run_id,))
    events: list[DurableEvent] = [
        MessageCommitted(job_id=job_id, run_id=run_id, created_at=now, message=committed)
    ]
    for c in calls:
        events.append(
            ToolStateChanged(
                job_id=job_id,
                run_id=run_id,
                created_at=now,
                tool_call_id=c.id,
                name=c.name,
                from_state=None,
                to_state=ToolCallState.PENDING,
                arguments=c.arguments,
            )
        )
        if c.state is ToolCallState.RUNNING:
            events.append(
                ToolStateChanged(
                    job_id=job_id,
                    run_id=run_id,
                    created_at=now,
                    tool_call_id=c.id,
                    name=c.name,
                    from_state=ToolCallState.PENDING,
                    to_state=ToolCallState.RUNNING,
                )
            )
    _emit(conn, events)
    return committed, calls


def _tx_checkpoint(conn: Conn, now: float, run_id: str, token: str, step: int) -> Checkpoint:
    row = _run_row_for_token(conn, run_id, token)
    last_position = conn.execute(
        "SELECT coalesce(max(position), -1) FROM messages WHERE run_id = ?", (run_id,)
    ).fetchone()[0]
    pending = [
        r[0]
        for r in conn.execute(
            "SELECT id FROM tool_calls WHERE run_id = ? AND state IN ('pending', 'running')"
            " AND state = 'pending' ORDER BY n",
            (run_id,),
        )
    ]
    checkpoint = Checkpoint(
        id=_new_id(),
        run_id=run_id,
        job_id=row["job_id"],
        step=step,
        last_position=last_position,
        usage=Usage.model_validate(_usage_of(row)),
        pending_tool_call_ids=pending,
        created_at=now,
    )
    conn.execute(
        "INSERT INTO checkpoints (id, run_id, job_id, step, last_position, usage,"
        " pending_tool_call_ids, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            checkpoint.id,
            run_id,
            row["job_id"],
            step,
            last_position,
            checkpoint.usage.model_dump_json(),
            _dumps(pending),
            now,
        ),
    )
    _emit(
        conn,
        [
            CheckpointCreated(
                job_id=row["job_id"],
                run_id=run_id,
                created_at=now,
                checkpoint_id=checkpoint.id,
                step=step,
            )
        ],
    )
    return checkpoint


def _tx_tool_states(
    conn: Conn, now: float, run_id: str, changes: Sequence[ToolStateChange]
) -> list[ToolCall]:
    """Several transitions of one run's tool calls, in order, with one statement each for
    reading, updating and logging them. The caller has checked the execution token."""
    if not changes:
        return []
    ids = list(dict.fromkeys(change.tool_call_id for change in changes))
    marks = ", ".join("?" * len(ids))
    # By primary key; the run is checked on the rows (an index on run_id would scan the run).
    rows = conn.execute(f"SELECT * FROM tool_calls WHERE id IN ({marks})", ids).fetchall()
    current = {row["id"]: _tool_call(row) for row in rows if row["run_id"] == run_id}
    events: list[DurableEvent] = []
    changed: list[ToolCall] = []
    for change in changes:
        before = current.get(change.tool_call_id)
        if before is None:
            raise errors.ToolCallNotFound(f"tool call {change.tool_call_id} not found")
        target = ToolCallState(change.to)
        check_tool(before.state, target)
        after = before.model_copy(
            update={
                "state": target,
                "result": change.result if change.result is not None else before.result,
                "error": change.error if change.error is not None else before.error,
                "child_run_id": change.child_run_id or before.child_run_id,
                "started_at": before.started_at
                or (now if target is ToolCallState.RUNNING else None),
                "finished_at": now if target.is_terminal else None,
            }
        )
        current[after.id] = after
        changed.append(after)
        events.append(
            ToolStateChanged(
                job_id=after.job_id,
                run_id=run_id,
                created_at=now,
                tool_call_id=after.id,
                name=after.name,
                from_state=before.state,
                to_state=target,
                result=change.result,
                error=change.error,
            )
        )
    final = {call.id: call for call in changed}
    conn.executemany(
        "UPDATE tool_calls SET state = ?, result = ?, error = ?, child_run_id = ?,"
        " started_at = ?, finished_at = ? WHERE id = ?",
        [
            (
                c.state.value,
                c.result,
                c.error,
                c.child_run_id,
                c.started_at,
                c.finished_at,
                c.id,
            )
            for c in final.values()
        ],
    )
    _emit(conn, events)
    return changed
