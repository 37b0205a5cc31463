"""The PostgreSQL implementation of the ``Store`` protocol (DESIGN §15), on asyncpg.

Chosen by a database URL (``--db postgresql://user@host/dbname`` or ``AGENT_TUI_DB``); install
the extra: ``pip install 'agent-tui[postgres]'``. Every operation does what the SQLite store
does — fetch the records, ask ``runtime.store.rules`` for a ``Plan``, write it (``_apply``) — in
ONE transaction on a pooled connection, so both backends share one set of rules.

Transactions: READ COMMITTED plus explicit row locks, not SERIALIZABLE. Every write of an
execution is keyed on one run row: ``_fetch_run(..., lock=True)`` takes ``SELECT … FOR UPDATE``
on it first, so the rule reads the run (and, under that lock, its calls, requests and next
message position) as they are, and writers of one run queue behind each other while writers of
other runs go on. SERIALIZABLE would give the same answers but abort one of any two overlapping
transactions — and every transaction that emits events touches the one event counter, so on a
busy database most of them would be retried from the start. Rows a person changes without a run
lock (a job, an owner, a durable consumer) are single-row upserts or locked the same way.
Workers take queued runs with the usual ``claim_run`` (under the run's row lock: of two workers
reaching for one run, the second sees it running and gets ``RunStateConflict``). Deadlock and
serialization failures (which row locks make rare) are retried.

Event order: ``event_seq`` is a one-row counter that each event-writing transaction increments
(``UPDATE … RETURNING``) when it writes its events, at the end of its work. The row lock that
takes is held until commit, so transactions take their seq numbers one after another in commit
order: a reader that
sees seq N sees every seq below it, the counter never runs ahead of visible events, and there are
no gaps (a rolled-back transaction gives its numbers back). That is the visibility watermark: a
cursor (``read_events(after=…)``) never goes backwards and never skips an event committed out of
order, because out of order cannot happen. (A sequence plus an xid/snapshot-xmin filter would let
commits overlap, but seq order would still differ from commit order and a reader could pass a
seq whose transaction commits later.) The cost: event-writing commits are serial at their very
end (the counter lock is held only from the event write to the commit).

Live events: the committing transaction sends ``NOTIFY`` (delivered at commit, dropped on
rollback); ``on_remote_commit`` callbacks run when another process's notice arrives. Observers
keep polling as the fallback (a notice can be lost with its connection).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import re
import threading
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal, TypeVar, cast
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from runtime import errors, hints
from runtime.canonical import canonical_hash
from runtime.clock import Clock, SystemClock
from runtime.drafts import DraftRevisions, draft_revision
from runtime.events import (
    DURABLE_EVENT_ADAPTER,
    EVENT_ADAPTER,
    DurableEvent,
    HistoryRepaired,
    RepairNote,
    RunNoted,
)
from runtime.locations import is_postgres_url
from runtime.models import (
    Checkpoint,
    Draft,
    DraftKind,
    Failure,
    InputRequest,
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
)
from runtime.store import pg_schema, rules
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
from runtime.store.pg_passwords import missing_password_hint
from runtime.store.rules import Plan
from runtime.store.sqlite import (
    _CONTENT,
    SNIPPET_CLOSE,
    SNIPPET_OPEN,
    _checkpoint,
    _decode_cursor,
    _dumps,
    _encode_cursor,
    _file_snapshot,
    _input_request,
    _iso_now,
    _job,
    _message,
    _run,
    written_draft,
)

__all__ = ["PostgresStore", "check_url", "is_postgres_url", "redacted"]

R = TypeVar("R")
Conn = Any  # asyncpg.Connection (asyncpg ships no type hints)
SEARCH_WINDOW = 2_000
RETRIES = 8
POOL_SIZE = 4
RELISTEN_MIN = 0.2
RELISTEN_MAX = 5.0
"""Seconds between tries at listening again after the server ended the listening connection."""
_OPEN_RUN_STATES = ("queued", "running", "input_required")


_PASSWORD_PARAMETER = re.compile(r"([?&]password=)[^&#]*")


def _split_authority(url: str) -> tuple[str, str, str]:
    """``scheme://``, the host part as ``urlsplit`` reads it (up to the first ``/``, ``?`` or
    ``#``), and what follows it; by text alone, so a URL that does not parse splits too."""
    scheme, slashes, rest = url.partition("://")
    end = min((i for i in map(rest.find, "/?#") if i >= 0), default=len(rest))
    return scheme + slashes, rest[:end], rest[end:]


def _password_cut_short(netloc: str, after: str) -> bool:
    """Whether a password whose ``/``, ``?`` or ``#`` was not percent-encoded ended the host part
    early: ``me:pa#ss@db`` reads as host ``me``, port ``pa``, and ``ss@db`` beyond it."""
    if "@" in netloc or "@" not in after or ":" not in netloc or netloc.startswith("["):
        return False
    port = netloc.partition(":")[2]
    path = re.split(r"[?#]", after, maxsplit=1)[0]
    return not (port.isascii() and port.isdigit()) or "@" in path


def redacted(url: str) -> str:
    """The URL without its password (for messages and logs): the one in ``USER:PASSWORD@``,
    and a ``password=`` parameter (asyncpg takes both). Only text is looked at, so a URL that
    does not parse (a port that is not a number) is redacted too; a password cut short (see
    ``_password_cut_short``) is hidden from the user's ``:`` up to the last ``@``."""
    head, netloc, after = _split_authority(url)
    user, at, host = netloc.rpartition("@")
    if at and ":" in user:
        name = user.partition(":")[0]
        url = head + (f"{name}:***@" if name else "") + host + after
    elif head and _password_cut_short(netloc, after):
        name = netloc.partition(":")[0]
        url = f"{head}{name}:***@{after.rpartition('@')[2]}"
    return _PASSWORD_PARAMETER.sub(r"\1***", url)


def check_url(url: str) -> None:
    """Refuse, in one line naming the URL without its password, what asyncpg could not parse
    (it raises a bare ``ValueError`` on connecting): a port that is not a number (each host of
    a list, ``h1:5432,h2``, may have its own), an IPv6 address without its closing bracket."""
    try:
        urlsplit(url)
    except ValueError as exc:  # "Invalid IPv6 URL"
        raise errors.ConfigError(
            f"{redacted(url)}: {exc} (postgresql://USER@[ADDRESS]:PORT/DATABASE)"
        ) from None
    _, netloc, after = _split_authority(url)
    for host in netloc.rpartition("@")[2].split(","):
        port = host.rpartition("]")[2] if host.startswith("[") else host
        port = port.rpartition(":")[2] if ":" in port else ""
        if not port or (port.isascii() and port.isdigit() and int(port) <= 65535):
            continue
        if _password_cut_short(netloc, after):
            # Its first characters read as the port: quoting them would show them.
            raise errors.ConfigError(
                f"{redacted(url)}: a password with /, ? or # in it is written percent-encoded "
                "(%2F, %3F, %23); as written, its start reads as the port"
            )
        raise errors.ConfigError(
            f"{redacted(url)}: the port {port!r} is not a port number "
            "(postgresql://USER@HOST:PORT/DATABASE)"
        )


def _split_schema(url: str) -> tuple[str, str]:
    """``?schema=NAME`` chooses the schema (default ``agent_tui``); asyncpg gets the rest."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    schema = "agent_tui"
    kept = []
    for key, value in query:
        if key == "schema":
            schema = value
        else:
            kept.append((key, value))
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,62}", schema):
        raise errors.InvalidInput(f"invalid schema name {schema!r} in the database URL")
    dsn = urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(kept), parts.fragment))
    return dsn, schema


def _asyncpg() -> Any:
    try:
        import asyncpg
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise errors.DatabaseError(
            "PostgreSQL needs the asyncpg package: pip install 'agent-tui[postgres]'"
        ) from exc
    return asyncpg


def _failures(asyncpg: Any) -> tuple[type[BaseException], ...]:
    """What asyncpg raises when the server refuses or goes away: its errors, the network's,
    and those of a connection the server ended (a restart ends every session) that the client
    has not seen close yet: ``InterfaceError`` ("connection is closed"), ``InternalClientError``
    ("cannot switch to state 12; another operation (2) is in progress", on the next query over
    it, or on the pool's reset of it when it is given back)."""
    return (asyncpg.PostgresError, asyncpg.InterfaceError, asyncpg.InternalClientError, OSError)


def _unreachable(asyncpg: Any) -> tuple[type[BaseException], ...]:
    """Of ``_failures``, those of a server that cannot be reached or ended the session: the
    network's (a refused or timed-out connection included), a closed connection's, class 08
    (connection exception), a server starting up, shutting down or ended by its administrator
    (57P01-57P03), and one with no connection free for this client (53300: every slot taken,
    as when all its clients reconnect after a restart, or the role's connection limit).
    Waiting helps with these only."""
    return (
        OSError,
        asyncpg.InterfaceError,
        asyncpg.InternalClientError,
        asyncpg.PostgresConnectionError,
        asyncpg.CannotConnectNowError,
        asyncpg.AdminShutdownError,
        asyncpg.CrashShutdownError,
        asyncpg.TooManyConnectionsError,
    )


# --- rows → records -------------------------------------------------------------------------------


def _tool_call(row: Any) -> ToolCall:
    return ToolCall.model_construct(
        id=row["id"],
        run_id=row["run_id"],
        job_id=row["job_id"],
        message_id=row["message_id"],
        index=row["idx"],
        provider_id=row["provider_id"],
        name=row["name"],
        arguments=json.loads(row["arguments"]),
        state=ToolCallState(row["state"]),
        idempotent=bool(row["idempotent"]),
        step=row["step"],
        result=row["result"],
        error=row["error"],
        child_run_id=row["child_run_id"],
        created_at=row["created_at"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
    )


def _search_text(message: Message) -> str:
    parts: list[str] = []
    for block in message.content:
        if isinstance(block, TextBlock):
            parts.append(block.text)
        elif isinstance(block, ToolResultBlock):
            parts.append(block.content)
    return "\n".join(parts)


def ts_query(text: str) -> str | None:
    """The user's words as a safe tsquery: every word's letters and digits as quoted lexemes,
    all required, the last one matched as a prefix (punctuation and operators are plain text)."""
    tokens = re.findall(r"\w+", text)
    if not tokens:
        return None
    lexemes = ["'" + t.replace("'", "''").replace("\\", "\\\\") + "'" for t in tokens]
    lexemes[-1] += ":*"
    return " & ".join(lexemes)


# --- one transaction ------------------------------------------------------------------------------


_DELETE_EMPTY_DRAFT = (
    "DELETE FROM composer_drafts WHERE job_id = $1 AND writer = $2 AND text = '' AND queued = '[]'"
)
"""A writer's composer row of a job goes once it holds neither a draft nor a queued message."""


@dataclass
class _Tx:
    conn: Conn
    channel: str
    origin: str
    events: list[DurableEvent] = field(default_factory=list)


class PostgresStore:
    """A ``Store`` on one PostgreSQL schema. ``await open()`` before use, ``await close()``."""

    def __init__(
        self,
        url: str,
        *,
        clock: Clock | None = None,
        pool_size: int = POOL_SIZE,
        create: bool = True,
    ):
        self.url = url
        self._create = create
        """False: ``open`` refuses (``DatabaseNotCreated``) a schema agent-tui never set up,
        instead of creating it (a command that only looks creates nothing)."""
        check_url(url)
        self._dsn, self.schema = _split_schema(url)
        self._where = redacted(self._dsn)
        self._clock: Clock = clock or SystemClock()
        self._draft_revisions = DraftRevisions()
        self._pool_size = pool_size
        self._pool: Any = None
        self._listeners: list[Callable[[int, list[DurableEvent]], None]] = []
        self._damage: errors.DatabaseCorrupt | None = None
        """Set once PostgreSQL reported damaged data (XX001, XX002): writes are refused."""
        self._damage_listeners: list[Callable[[errors.DatabaseCorrupt], None]] = []
        self._remote: list[Callable[[int], None]] = []
        self._listen_conn: Any = None
        self._listen_task: asyncio.Task[None] | None = None
        self._relisten_task: asyncio.Task[None] | None = None
        self._origin = uuid.uuid4().hex
        self._channel = f"agent_tui_events_{hashlib.sha1(self.schema.encode()).hexdigest()[:12]}"
        self.applied_migrations: list[int] = []
        """The migration versions this store's ``open`` applied (empty: already there)."""

    async def __aenter__(self) -> PostgresStore:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _now(self) -> float:
        return self._clock.now()

    # --- plumbing -------------------------------------------------------------------------------

    def _translated(self, exc: BaseException) -> errors.AgentTuiError:
        asyncpg = _asyncpg()
        if isinstance(exc, asyncpg.IntegrityConstraintViolationError):
            return errors.ConflictError(f"{self._where}: {exc}")
        if isinstance(exc, asyncpg.DataCorruptedError | asyncpg.IndexCorruptedError):
            damage = errors.DatabaseCorrupt(f"{self._where}: the database is damaged ({exc})")
            if self._damage is None:
                self._damage = damage
                for listener in list(self._damage_listeners):
                    listener(damage)
            return damage
        if isinstance(exc, _unreachable(asyncpg)):
            return errors.DatabaseUnreachable(f"{self._where}: {exc}")
        if isinstance(exc, asyncpg.DiskFullError):
            return errors.DatabaseFull(f"{self._where}: {exc}")
        return errors.DatabaseError(f"{self._where}: {exc}")

    def _pool_or_raise(self) -> Any:
        if self._pool is None:
            raise errors.DatabaseError(f"{self._where}: the store is not open")
        return self._pool

    async def _read(self, fn: Callable[[Conn], Awaitable[R]]) -> R:
        asyncpg = _asyncpg()
        pool = self._pool_or_raise()
        try:
            async with pool.acquire() as conn:
                return await fn(conn)
        except _failures(asyncpg) as exc:
            raise self._translated(exc) from exc

    async def _write(self, fn: Callable[[_Tx], Awaitable[R]]) -> R:
        """``fn`` in one READ COMMITTED transaction, retried on deadlock or serialization
        failure; then the commit listeners hear about its events."""
        if self._damage is not None:
            raise self._damage
        asyncpg = _asyncpg()
        pool = self._pool_or_raise()
        retryable = (asyncpg.DeadlockDetectedError, asyncpg.SerializationError)
        for attempt in range(RETRIES):
            tx = _Tx(conn=None, channel=self._channel, origin=self._origin)
            try:
                async with pool.acquire() as conn:
                    tx.conn = conn
                    async with conn.transaction():
                        result = await fn(tx)
            except retryable as exc:
                if attempt + 1 < RETRIES:
                    continue
                raise self._translated(exc) from exc
            except _failures(asyncpg) as exc:
                raise self._translated(exc) from exc
            if tx.events:
                before = (tx.events[0].seq or 1) - 1
                for listener in list(self._listeners):
                    listener(before, tx.events)
            return result
        raise AssertionError("unreachable")  # pragma: no cover

    @property
    def location(self) -> str:
        return self.url

    async def open(self) -> None:
        if self._pool is not None:
            return
        asyncpg = _asyncpg()
        try:
            conn = await asyncpg.connect(self._dsn)
        except (asyncpg.PostgresError, OSError) as exc:
            why = f"{self._where}: cannot connect ({exc})"
            if isinstance(exc, asyncpg.InvalidPasswordError):
                hint = missing_password_hint(self._dsn, os.environ)
                why += f"; {hint}" if hint else ""
            raise errors.DatabaseError(why) from exc
        try:
            if not self._create and await pg_schema.schema_version(conn, self.schema) is None:
                raise errors.DatabaseNotCreated(
                    f"{self._where}: agent-tui has not set up its tables here yet "
                    f"(schema {self.schema})"
                )
            self.applied_migrations = await pg_schema.migrate(
                conn, schema=self.schema, where=self._where
            )
        except asyncpg.PostgresError as exc:
            raise errors.DatabaseError(f"{self._where}: {exc}") from exc
        finally:
            await conn.close()
        try:
            self._pool = await asyncpg.create_pool(
                self._dsn,
                min_size=1,
                max_size=self._pool_size,
                server_settings={"search_path": self.schema},
            )
        except (asyncpg.PostgresError, OSError) as exc:
            raise errors.DatabaseError(f"{self._where}: cannot connect ({exc})") from exc
        if self._remote:
            await self._listen()

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        listen, self._listen_conn = self._listen_conn, None
        for task in (self._listen_task, self._relisten_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
        self._listen_task = self._relisten_task = None
        if listen is not None:
            with contextlib.suppress(Exception):
                await listen.close(timeout=5)
        if pool is not None:
            await pool.close()

    # --- live events across processes -----------------------------------------------------------

    def on_remote_commit(self, callback: Callable[[int], None]) -> None:
        """From now on, call ``callback(last_seq)`` when ANOTHER store object (another process)
        commits events (PostgreSQL ``LISTEN``). A lost notice is what polling is for."""
        self._remote.append(callback)
        if self._pool is not None and self._listen_conn is None and self._listen_task is None:
            self._listen_task = asyncio.get_running_loop().create_task(self._listen(catch_up=True))

    async def _listen(self, *, catch_up: bool = False) -> None:
        """Start listening. With ``catch_up`` (the store was already open, so commits may have
        happened before the LISTEN took effect) the callbacks are called once afterwards: an
        observer reads by cursor whatever it could have missed, and hears of the rest."""
        asyncpg = _asyncpg()
        try:
            if self._listen_conn is None:
                conn = await asyncpg.connect(self._dsn)
                await conn.add_listener(self._channel, self._notified)
                conn.add_termination_listener(self._listen_lost)
                self._listen_conn = conn
        except _failures(asyncpg):
            return  # polling covers it (after a restart, ``_relisten`` tries again)
        finally:
            self._listen_task = None
        if catch_up:
            try:
                last = await self.last_seq()
            except errors.DatabaseError:
                return  # closing, or the server went away again: polling covers it
            for callback in list(self._remote):
                callback(last)

    def _listen_lost(self, conn: Any) -> None:
        """The listening connection ended (the server restarted): listen again once it is
        back, or every notice from then on is lost and only polling is left."""
        if conn is not self._listen_conn or self._pool is None:
            return  # closed on purpose
        self._listen_conn = None
        if self._relisten_task is None or self._relisten_task.done():
            self._relisten_task = asyncio.get_running_loop().create_task(self._relisten())

    async def _relisten(self) -> None:
        delay = RELISTEN_MIN
        while self._pool is not None and self._listen_conn is None:
            await self._listen(catch_up=True)
            if self._listen_conn is None:
                await asyncio.sleep(delay)
                delay = min(RELISTEN_MAX, delay * 2)

    def _notified(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        seq, _, origin = payload.partition(" ")
        if origin == self._origin:
            return
        for callback in list(self._remote):
            callback(int(seq))

    def on_commit(self, listener: Callable[[int, list[DurableEvent]], None]) -> None:
        self._listeners.append(listener)

    def on_damaged(self, listener: Callable[[errors.DatabaseCorrupt], None]) -> None:
        self._damage_listeners.append(listener)
        if self._damage is not None:
            listener(self._damage)

    # --- owners and recovery ------------------------------------------------------------------

    async def register_owner(self, owner_id: str, *, lease_seconds: float) -> None:
        now = self._now()

        async def tx(t: _Tx) -> None:
            await t.conn.execute(
                "INSERT INTO owners (owner_id, pid, lease_seconds, lease_expires_at,"
                " heartbeat_at, released, recovered_at) VALUES ($1, $2, $3, $4, $5, FALSE, NULL)"
                " ON CONFLICT (owner_id) DO UPDATE SET pid = excluded.pid,"
                " lease_seconds = excluded.lease_seconds,"
                " lease_expires_at = excluded.lease_expires_at,"
                " heartbeat_at = excluded.heartbeat_at, released = FALSE, recovered_at = NULL",
                owner_id,
                os.getpid(),
                lease_seconds,
                now + lease_seconds,
                now,
            )

        await self._write(tx)

    async def heartbeat(self, owner_id: str) -> None:
        now = self._now()

        async def tx(t: _Tx) -> None:
            row = await t.conn.fetchrow(
                "SELECT * FROM owners WHERE owner_id = $1 FOR UPDATE", owner_id
            )
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
            await t.conn.execute(
                "UPDATE owners SET lease_expires_at = $1, heartbeat_at = $2 WHERE owner_id = $3",
                expires_at,
                now,
                owner_id,
            )

        await self._write(tx)

    async def release_owner(self, owner_id: str) -> None:
        now = self._now()

        async def tx(t: _Tx) -> None:
            await t.conn.execute(
                "INSERT INTO owners (owner_id, pid, lease_seconds, lease_expires_at,"
                " heartbeat_at, released, recovered_at) SELECT $1, $2, 0, $3, $3, TRUE, NULL"
                " WHERE EXISTS (SELECT 1 FROM owners WHERE owner_id = $1)"
                " OR EXISTS (SELECT 1 FROM composer_drafts WHERE writer = $1)"
                " OR EXISTS (SELECT 1 FROM answer_drafts WHERE writer = $1)"
                " ON CONFLICT (owner_id) DO UPDATE SET released = TRUE,"
                " lease_expires_at = least(owners.lease_expires_at, excluded.lease_expires_at)",
                owner_id,
                os.getpid(),
                now,
            )

        await self._write(tx)

    async def live_owners(self) -> list[str]:
        now = self._now()

        async def read(conn: Conn) -> list[str]:
            rows = await conn.fetch(
                "SELECT owner_id FROM owners WHERE NOT released AND recovered_at IS NULL"
                ' AND lease_expires_at >= $1 ORDER BY owner_id COLLATE "C"',
                now,
            )
            return [r[0] for r in rows]

        return await self._read(read)

    async def recover_expired(self, *, price: Pricing | None = None) -> RecoveryReport:
        now = self._now()

        async def tx(t: _Tx) -> RecoveryReport:
            report = RecoveryReport()
            rows = await t.conn.fetch(
                "SELECT r.* FROM runs AS r LEFT JOIN owners AS o ON o.owner_id = r.owner_id"
                " WHERE r.state IN ('queued', 'running') AND r.owner_id IS NOT NULL"
                " AND (o.owner_id IS NULL OR o.released OR o.lease_expires_at < $1)"
                " ORDER BY r.n FOR UPDATE OF r",
                now,
            )
            await _recover_rows(t, rows, now, report, price)
            await t.conn.execute(
                "UPDATE owners SET recovered_at = $1 WHERE recovered_at IS NULL"
                " AND (released OR lease_expires_at < $1)",
                now,
            )
            return report

        return await self._write(tx)

    async def stale_owners(self) -> list[StaleOwner]:
        now = self._now()

        async def read(conn: Conn) -> list[StaleOwner]:
            rows = await conn.fetch(
                "SELECT DISTINCT r.owner_id, (o.owner_id IS NULL OR o.released"
                " OR o.recovered_at IS NOT NULL) AS gone FROM runs AS r"
                " LEFT JOIN owners AS o ON o.owner_id = r.owner_id"
                " WHERE r.state IN ('queued', 'running') AND r.owner_id IS NOT NULL"
                " AND (o.owner_id IS NULL OR o.released OR o.recovered_at IS NOT NULL"
                " OR o.lease_expires_at < $1) ORDER BY r.owner_id",
                now,
            )
            return [StaleOwner(owner_id=r[0], released=bool(r[1])) for r in rows]

        return await self._read(read)

    async def recover_owners(
        self, owner_ids: Sequence[str], *, price: Pricing | None = None
    ) -> RecoveryReport:
        now = self._now()
        owners = list(owner_ids)
        if not owners:
            return RecoveryReport()

        async def tx(t: _Tx) -> RecoveryReport:
            report = RecoveryReport()
            rows = await t.conn.fetch(
                "SELECT * FROM runs WHERE state IN ('queued', 'running')"
                " AND owner_id = ANY($1::text[]) ORDER BY n FOR UPDATE",
                owners,
            )
            await _recover_rows(t, rows, now, report, price)
            await t.conn.execute(
                "UPDATE owners SET released = TRUE, recovered_at = coalesce(recovered_at, $1),"
                " lease_expires_at = least(lease_expires_at, $1) WHERE owner_id = ANY($2::text[])",
                now,
                owners,
            )
            return report

        return await self._write(tx)

    def lease_renewer(self, owner_id: str) -> LeaseRenewer:
        return PostgresLeaseRenewer(self._dsn, self.schema, owner_id, clock=self._clock)

    # --- runs -----------------------------------------------------------------------------------

    async def create_run(self, new_run: NewRun) -> Run:
        now = self._now()
        input_hash = canonical_hash(new_run.model_dump(mode="json", exclude={"owner_id"}))

        async def tx(t: _Tx) -> Run:
            key = new_run.idempotency_key
            if key is not None:
                existing = await t.conn.fetchrow(
                    "SELECT * FROM runs WHERE idempotency_key = $1", key
                )
                if existing is not None:
                    replay = rules.idempotent_replay(
                        _run(existing), existing["idempotency_hash"], input_hash
                    )
                    if replay is not None:
                        return replay
            await _check_references(t.conn, new_run)
            active, archived = None, False
            if new_run.job_id is not None and new_run.parent_run_id is None:
                # The job row lock makes "one active root run per job" hold across processes.
                archived = await t.conn.fetchval(
                    "SELECT archived FROM jobs WHERE id = $1 FOR UPDATE", new_run.job_id
                )
                found = await t.conn.fetchrow(
                    "SELECT * FROM runs WHERE job_id = $1 AND parent_run_id IS NULL"
                    " AND state IN ('queued', 'running', 'input_required') LIMIT 1",
                    new_run.job_id,
                )
                active = _run(found) if found is not None else None
            plan, run = rules.create_run(
                new_run,
                input_hash=input_hash,
                active_root=active,
                job_archived=bool(archived),
                now=now,
            )
            await _apply(t, plan)
            return run

        return await self._write(tx)

    async def claim_run(self, run_id: str, *, owner_id: str) -> Run:
        now = self._now()

        async def tx(t: _Tx) -> Run:
            run = await _fetch_run(t.conn, run_id, lock=True)
            has_drafts = await t.conn.fetchval(
                "SELECT EXISTS (SELECT 1 FROM draft_parts"
                " WHERE run_id = $1 AND before_position IS NULL)",
                run_id,
            )
            plan = rules.claim_run(
                run,
                owner_id=owner_id,
                token=rules.new_id(),
                now=now,
                next_position=await _next_position(t.conn, run_id) if has_drafts else None,
            )
            await _apply(t, plan)
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

        async def tx(t: _Tx) -> Run:
            plan = rules.finish_run(
                await _fetch_run(t.conn, run_id, lock=True),
                token=token,
                to=target,
                outcome=outcome,
                failure=failure,
                now=now,
            )
            await _apply(t, plan)
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

        async def tx(t: _Tx) -> Run:
            run = await _fetch_run(t.conn, run_id, lock=True)
            open_calls = [
                _tool_call(r)
                for r in await t.conn.fetch(
                    "SELECT * FROM tool_calls WHERE run_id = $1"
                    " AND state IN ('pending', 'running') ORDER BY n",
                    run_id,
                )
            ]
            pending = [
                _input_request(r)
                for r in await t.conn.fetch(
                    "SELECT * FROM input_requests WHERE run_id = $1 AND state = 'pending'"
                    " ORDER BY n",
                    run_id,
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
                and await _message_exists(t.conn, cut_short.message_id),
            )
            await _apply(t, plan)
            return plan.runs[0][0]

        return await self._write(tx)

    async def note_cut_short(
        self, run_id: str, *, token: str, owner_id: str | None = None, cut_short: CutShortUsage
    ) -> Run:
        now = self._now()

        async def tx(t: _Tx) -> Run:
            run = await _fetch_run(t.conn, run_id, lock=True)
            plan = rules.note_cut_short(
                run,
                token=token,
                owner_id=owner_id,
                cut_short=cut_short,
                committed=await _message_exists(t.conn, cut_short.message_id),
                now=now,
            )
            if not plan.runs:
                return run
            await _apply(t, plan)
            return plan.runs[0][0]

        return await self._write(tx)

    async def set_run_step(self, run_id: str, *, token: str, step: int) -> Run:
        now = self._now()

        async def tx(t: _Tx) -> Run:
            run = await _fetch_run(t.conn, run_id, lock=True)
            plan = rules.set_run_step(run, token=token, step=step, now=now)
            await _apply(t, plan)
            return plan.runs[0][0]

        return await self._write(tx)

    async def stop_run(self, run_id: str, *, token: str, reason: str) -> Run:
        now = self._now()

        async def tx(t: _Tx) -> Run:
            run = await _fetch_run(t.conn, run_id, lock=True)
            calls = await _running_calls(t.conn, run_id)
            await _apply(t, rules.stop_running(run, token, calls, now, reason=reason))
            return await _fetch_run(t.conn, run_id)

        return await self._write(tx)

    # --- messages ---------------------------------------------------------------------------------

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

        async def tx(t: _Tx) -> tuple[Message, list[ToolCall]]:
            run = await _fetch_run(t.conn, run_id, lock=True)
            plan, committed, calls = rules.commit_message(
                run,
                token=token,
                position=await _next_position(t.conn, run_id),
                message=message,
                tool_calls=tool_calls or (),
                step=step,
                now=now,
            )
            await _apply(t, plan)
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

        async def tx(t: _Tx) -> None:
            rules.check_draft_writer(await _fetch_run(t.conn, run_id), token, owner_id)
            if await _message_exists(t.conn, message_id):
                return  # committed meanwhile (a last save racing the commit): no draft of it
            await t.conn.execute(
                "DELETE FROM draft_parts"
                " WHERE run_id = $1 AND message_id = $2 AND kind = $3 AND start >= $4",
                run_id,
                message_id,
                kind.value,
                start,
            )
            await t.conn.execute(
                "INSERT INTO draft_parts (run_id, message_id, kind, start, text, updated_at)"
                " VALUES ($1, $2, $3, $4, $5, $6)",
                run_id,
                message_id,
                kind.value,
                start,
                text,
                now,
            )

        await self._write(tx)

    async def get_drafts(self, run_id: str) -> list[Draft]:
        async def read(conn: Conn) -> list[Draft]:
            rows = await conn.fetch("SELECT * FROM draft_parts WHERE run_id = $1", run_id)
            return rules.drafts_from_parts(rows)

        return await self._read(read)

    # --- tool calls -------------------------------------------------------------------------------

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

        async def tx(t: _Tx) -> ToolCall:
            run_id = await t.conn.fetchval(
                "SELECT run_id FROM tool_calls WHERE id = $1", tool_call_id
            )
            if run_id is None:
                raise errors.ToolCallNotFound(f"tool call {tool_call_id} not found")
            run = await _fetch_run(t.conn, run_id, lock=True)
            plan, changed = await _tool_states_plan(t.conn, run, token, [change], now)
            await _apply(t, plan)
            return changed[0]

        return await self._write(tx)

    async def set_tool_states(
        self, run_id: str, *, token: str, changes: list[ToolStateChange]
    ) -> list[ToolCall]:
        return (await self.commit_tool_states(run_id, token=token, changes=changes)).tool_calls

    async def finish_step(
        self,
        run_id: str,
        *,
        token: str,
        tool_changes: list[ToolStateChange],
        message: NewMessage | None,
        checkpoint_step: int,
    ) -> tuple[list[ToolCall], Message | None, Checkpoint]:
        done = await self.commit_step_results(
            run_id,
            token=token,
            tool_changes=tool_changes,
            message=message,
            checkpoint_step=checkpoint_step,
        )
        assert done.checkpoint is not None
        return done.tool_calls, done.message, done.checkpoint

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

        async def tx(t: _Tx) -> StepCommit:
            run = await _fetch_run(t.conn, run_id, lock=True)
            plan, committed, calls = rules.commit_message(
                run,
                token=token,
                position=await _next_position(t.conn, run_id),
                message=message,
                tool_calls=tool_calls,
                step=step,
                now=now,
            )
            events = await _apply(t, plan)
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

        async def tx(t: _Tx) -> StepCommit:
            run = await _fetch_run(t.conn, run_id, lock=True)
            plan, committed, created = rules.complete_with_message(
                run,
                token=token,
                position=await _next_position(t.conn, run_id),
                message=message,
                step=step,
                outcome=outcome,
                pending_tool_call_ids=await _pending_call_ids(t.conn, run_id, None),
                now=now,
            )
            events = await _apply(t, plan)
            return StepCommit(plan.runs[0][0], committed, [], created, events)

        return await self._write(tx)

    async def commit_tool_states(
        self, run_id: str, *, token: str, changes: list[ToolStateChange]
    ) -> StepCommit:
        now = self._now()

        async def tx(t: _Tx) -> StepCommit:
            run = await _fetch_run(t.conn, run_id, lock=True)
            plan, changed = await _tool_states_plan(t.conn, run, token, changes, now)
            events = await _apply(t, plan)
            await _file_history_tx(t.conn, changes, now)
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

        async def tx(t: _Tx) -> StepCommit:
            run = await _fetch_run(t.conn, run_id, lock=True)
            plan, calls = await _tool_states_plan(t.conn, run, token, tool_changes, now)
            await _file_history_tx(t.conn, tool_changes, now)
            committed = None
            position = await _next_position(t.conn, run_id)
            if message is not None:
                message_plan, committed, _ = rules.commit_message(
                    run,
                    token=token,
                    position=position,
                    message=message,
                    tool_calls=(),
                    step=None,
                    now=now,
                )
                plan.extend(message_plan)
                run = message_plan.runs[0][0]
                position += 1
            checkpoint_plan, checkpoint = await _checkpoint_plan(
                t.conn, run, token, checkpoint_step, now, position - 1, plan
            )
            plan.extend(checkpoint_plan)
            events = await _apply(t, plan)
            return StepCommit(run, committed, calls, checkpoint, events)

        return await self._write(tx)

    # --- input requests ---------------------------------------------------------------------------

    async def open_input_request(
        self, run_id: str, *, token: str, request: NewInputRequest
    ) -> tuple[Run, InputRequest]:
        now = self._now()

        async def tx(t: _Tx) -> tuple[Run, InputRequest]:
            run = await _fetch_run(t.conn, run_id, lock=True)
            call = await _optional_call(t.conn, request.tool_call_id)
            plan, after, created = rules.open_input_request(
                run, token=token, request=request, tool_call=call, now=now
            )
            await _apply(t, plan)
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

        async def tx(t: _Tx) -> tuple[Run, InputRequest]:
            request = await _fetch_request(t.conn, request_id)
            run = await _fetch_run(t.conn, request.run_id, lock=True)
            if idempotency_key is not None:
                found = await t.conn.fetchrow(
                    "SELECT * FROM receipts WHERE operation = $1 AND key = $2",
                    rules.ANSWER_OPERATION,
                    idempotency_key,
                )
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
            request = await _fetch_request(t.conn, request_id)  # as it is under the run lock
            call = await _optional_call(t.conn, request.tool_call_id)
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
            await _apply(t, plan)
            # What was being typed to it is sent now: the draft goes with the answer.
            await t.conn.execute("DELETE FROM answer_drafts WHERE request_id = $1", request_id)
            return after, answered

        return await self._write(tx)

    async def cancel_input_request(
        self, request_id: str, *, token: str | None = None, reason: str
    ) -> InputRequest:
        now = self._now()

        async def tx(t: _Tx) -> InputRequest:
            request = await _fetch_request(t.conn, request_id)
            run = await _fetch_run(t.conn, request.run_id, lock=True)
            request = await _fetch_request(t.conn, request_id)
            others = await t.conn.fetchval(
                "SELECT 1 FROM input_requests WHERE run_id = $1 AND state = 'pending'"
                " AND id != $2 LIMIT 1",
                request.run_id,
                request_id,
            )
            plan, cancelled = rules.cancel_input_request(
                request,
                run,
                token=token,
                others_pending=others is not None,
                reason=reason,
                now=now,
            )
            await _apply(t, plan)
            return cancelled

        return await self._write(tx)

    # --- checkpoints ------------------------------------------------------------------------------

    async def fail_unanswerable_request(self, request_id: str, *, reason: str) -> Run:
        now = self._now()

        async def tx(t: _Tx) -> Run:
            request = await _fetch_request(t.conn, request_id)
            run = await _fetch_run(t.conn, request.run_id, lock=True)
            if run.state is not RunState.INPUT_REQUIRED:
                raise errors.RunStateConflict(f"run {run.id} is {run.state}, not input_required")
            call = await _optional_call(t.conn, request.tool_call_id)
            pending = [
                _input_request(r)
                for r in await t.conn.fetch(
                    "SELECT * FROM input_requests WHERE run_id = $1 AND state = 'pending'"
                    " ORDER BY n",
                    run.id,
                )
            ]
            plan = rules.fail_unanswerable_request(
                run, request, call=call, pending=pending, reason=reason, now=now
            )
            await _apply(t, plan)
            return plan.runs[0][0]

        return await self._write(tx)

    async def record_history_repair(
        self, run_id: str, *, token: str, repairs: list[RepairNote]
    ) -> HistoryRepaired:
        now = self._now()

        async def tx(t: _Tx) -> HistoryRepaired:
            plan = rules.history_repaired(
                await _fetch_run(t.conn, run_id, lock=True), token=token, repairs=repairs, now=now
            )
            [event] = await _apply(t, plan)
            return cast(HistoryRepaired, event)

        return await self._write(tx)

    async def create_checkpoint(self, run_id: str, *, token: str, step: int) -> Checkpoint:
        now = self._now()

        async def tx(t: _Tx) -> Checkpoint:
            run = await _fetch_run(t.conn, run_id, lock=True)
            plan, created = await _checkpoint_plan(t.conn, run, token, step, now, None, None)
            await _apply(t, plan)
            return created

        return await self._write(tx)

    # --- events -----------------------------------------------------------------------------------

    async def read_events(
        self,
        *,
        after: int = 0,
        limit: int = 500,
        run_id: str | None = None,
        job_id: str | None = None,
    ) -> list[DurableEvent]:
        async def read(conn: Conn) -> list[DurableEvent]:
            last = int(await conn.fetchval("SELECT last FROM event_seq"))
            if after < 0 or after > last:
                raise errors.CursorOutOfRange(
                    f"event cursor {after} is outside the log (last event is {last})"
                )
            rows = await conn.fetch(
                "SELECT payload FROM events WHERE seq > $1 AND seq <= $2"
                " AND ($3::text IS NULL OR run_id = $3) AND ($4::text IS NULL OR job_id = $4)"
                " ORDER BY seq LIMIT $5",
                after,
                last,
                run_id,
                job_id,
                max(0, limit),
            )
            return [DURABLE_EVENT_ADAPTER.validate_json(r[0]) for r in rows]

        return await self._read(read)

    async def record_note(
        self,
        run_id: str,
        *,
        token: str | None,
        note: RunNoted,
        usage: Usage | None = None,
        cost_usd: float = 0.0,
    ) -> RunNoted:
        now = self._now()

        async def tx(t: _Tx) -> RunNoted:
            run = await _fetch_run(t.conn, run_id, lock=True)
            if token is not None:
                rules.check_token(run, token)
            elif not run.state.is_terminal:
                raise errors.RunStateConflict(
                    f"run {run_id} is {run.state.value}: only its execution may note it"
                )
            if usage is not None:
                await _apply(t, rules.note_usage(run, usage=usage, cost_usd=cost_usd, now=now))
            stamped = note.model_copy(
                update={"run_id": run_id, "created_at": note.created_at or now}
            )
            published = (await _emit(t, [stamped]))[0]
            assert isinstance(published, RunNoted)
            return published

        return await self._write(tx)

    async def list_notes(
        self, *, run_ids: Sequence[str] = (), job_id: str | None = None
    ) -> list[RunNoted]:
        ids = list(dict.fromkeys(run_ids))
        if job_id is None and not ids:
            return []

        async def read(conn: Conn) -> list[RunNoted]:
            key: str | list[str]
            if job_id is not None:
                where, key = "run_id IN (SELECT id FROM runs WHERE job_id = $1)", job_id
            else:
                where, key = "run_id = ANY($1::text[])", ids
            rows = await conn.fetch(
                f"SELECT payload FROM events WHERE {where}"
                " AND (payload::jsonb) ->> 'kind' = 'run_noted' ORDER BY seq",
                key,
            )
            events = [DURABLE_EVENT_ADAPTER.validate_json(r[0]) for r in rows]
            return [e for e in events if isinstance(e, RunNoted)]

        return await self._read(read)

    async def last_seq(self) -> int:
        async def read(conn: Conn) -> int:
            return int(await conn.fetchval("SELECT last FROM event_seq"))

        return await self._read(read)

    async def running_since(self, run_id: str) -> float | None:
        async def read(conn: Conn) -> float | None:
            found = await conn.fetchval(
                "SELECT created_at FROM events WHERE run_id = $1"
                " AND payload::jsonb ->> 'kind' = 'run_state_changed'"
                " AND payload::jsonb ->> 'to' = 'running' ORDER BY seq DESC LIMIT 1",
                run_id,
            )
            return None if found is None else float(found)

        return await self._read(read)

    # --- queries ----------------------------------------------------------------------------------

    async def _get(
        self, sql: str, key: str, convert: Callable[[Any], R], missing: errors.AgentTuiError
    ) -> R:
        async def read(conn: Conn) -> R:
            row = await conn.fetchrow(sql, key)
            if row is None:
                raise missing
            return convert(row)

        return await self._read(read)

    async def get_job(self, job_id: str) -> Job:
        return await self._get(
            "SELECT * FROM jobs WHERE id = $1",
            job_id,
            _job,
            errors.JobNotFound(f"job {job_id} not found"),
        )

    async def get_run(self, run_id: str) -> Run:
        return await self._get(
            "SELECT * FROM runs WHERE id = $1",
            run_id,
            _run,
            errors.RunNotFound(f"run {run_id} not found"),
        )

    async def get_tool_call(self, tool_call_id: str) -> ToolCall:
        return await self._get(
            "SELECT * FROM tool_calls WHERE id = $1",
            tool_call_id,
            _tool_call,
            errors.ToolCallNotFound(f"tool call {tool_call_id} not found"),
        )

    async def get_input_request(self, request_id: str) -> InputRequest:
        return await self._get(
            "SELECT * FROM input_requests WHERE id = $1",
            request_id,
            _input_request,
            errors.RequestNotFound(f"input request {request_id} not found"),
        )

    async def get_checkpoint(self, checkpoint_id: str) -> Checkpoint:
        return await self._get(
            "SELECT * FROM checkpoints WHERE id = $1",
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
        where: list[str] = []
        params: list[Any] = []
        if archived is not None:
            params.append(archived)
            where.append(f"archived = ${len(params)}")
        if state is not None:
            params.append(RunState(state).value)
            where.append(f"latest_run_state = ${len(params)}")
        if interrupted is not None:
            where.append(
                ("" if interrupted else "NOT ")
                + "EXISTS (SELECT 1 FROM runs r WHERE r.id = jobs.latest_root_run_id"
                " AND r.interrupted)"
            )
        if cursor is not None:
            updated_at, job_id = _decode_cursor(cursor, ((float, int), str))
            params.extend([float(updated_at), job_id])
            where.append(f'(updated_at, id COLLATE "C") < (${len(params) - 1}, ${len(params)})')
        sql = "SELECT * FROM jobs"
        if where:
            sql += " WHERE " + " AND ".join(where)
        params.append(limit + 1)
        sql += f' ORDER BY updated_at DESC, id COLLATE "C" DESC LIMIT ${len(params)}'

        async def read(conn: Conn) -> Page[Job]:
            rows = await conn.fetch(sql, *params)
            jobs = [_job(r) for r in rows[:limit]]
            next_cursor = None
            if len(rows) > limit:
                next_cursor = _encode_cursor(jobs[-1].updated_at, jobs[-1].id)
            return Page[Job](items=jobs, next_cursor=next_cursor)

        return await self._read(read)

    async def list_runs(
        self,
        *,
        cursor: str | None = None,
        limit: int = 50,
        state: RunState | None = None,
        archived: bool | None = False,
    ) -> Page[Run]:
        limit = max(1, limit)
        where: list[str] = []
        params: list[Any] = []
        # As SQLite's (``runs_page_query``): the runs of jobs not archived are those with no
        # archived job, looked up run by run along the index in the page's order.
        if archived is True:
            where.append("job_id IN (SELECT id FROM jobs WHERE archived)")
        elif archived is False:
            where.append("NOT EXISTS (SELECT 1 FROM jobs WHERE jobs.id = runs.job_id AND archived)")
        if state is not None:
            params.append(RunState(state).value)
            where.append(f"state = ${len(params)}")
        if cursor is not None:
            created_at, n = _decode_cursor(cursor, ((float, int), int))
            params.extend([float(created_at), n])
            where.append(f"(created_at, n) < (${len(params) - 1}, ${len(params)})")
        sql = "SELECT * FROM runs"
        if where:
            sql += " WHERE " + " AND ".join(where)
        params.append(limit + 1)
        sql += f" ORDER BY created_at DESC, n DESC LIMIT ${len(params)}"

        async def read(conn: Conn) -> Page[Run]:
            rows = await conn.fetch(sql, *params)
            runs = [_run(r) for r in rows[:limit]]
            next_cursor = None
            if len(rows) > limit:
                last = rows[limit - 1]
                next_cursor = _encode_cursor(last["created_at"], last["n"])
            return Page[Run](items=runs, next_cursor=next_cursor)

        return await self._read(read)

    async def job_runs(self, job_id: str) -> list[Run]:
        async def read(conn: Conn) -> list[Run]:
            if await conn.fetchval("SELECT 1 FROM jobs WHERE id = $1", job_id) is None:
                raise errors.JobNotFound(f"job {job_id} not found")
            rows = await conn.fetch("SELECT * FROM runs WHERE job_id = $1 ORDER BY n", job_id)
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

        # The bounds as bigint: callers pass sentinels past any position (``PARTIAL``, 2**62,
        # "from the end"), which the integer column's own type would refuse as out of range.
        async def read(conn: Conn) -> list[Message]:
            if before_position is not None:
                rows = list(
                    await conn.fetch(
                        "SELECT * FROM messages WHERE run_id = $1 AND position > $2::bigint"
                        " AND position < $3::bigint ORDER BY position DESC LIMIT $4",
                        run_id,
                        after_position,
                        before_position,
                        limit,
                    )
                )
                rows.reverse()
            else:
                rows = await conn.fetch(
                    "SELECT * FROM messages WHERE run_id = $1 AND position > $2::bigint"
                    " ORDER BY position LIMIT $3",
                    run_id,
                    after_position,
                    limit,
                )
            return [_message(r) for r in rows]

        return await self._read(read)

    async def list_tool_calls(
        self, run_id: str, *, message_id: str | None = None
    ) -> list[ToolCall]:
        async def read(conn: Conn) -> list[ToolCall]:
            if message_id is not None:
                rows = await conn.fetch(
                    "SELECT * FROM tool_calls WHERE message_id = $1 AND run_id = $2 ORDER BY idx",
                    message_id,
                    run_id,
                )
            else:
                rows = await conn.fetch(
                    "SELECT * FROM tool_calls WHERE run_id = $1 ORDER BY n", run_id
                )
            return [_tool_call(r) for r in rows]

        return await self._read(read)

    async def list_checkpoints(self, run_id: str) -> list[Checkpoint]:
        async def read(conn: Conn) -> list[Checkpoint]:
            rows = await conn.fetch(
                "SELECT * FROM checkpoints WHERE run_id = $1 ORDER BY n", run_id
            )
            return [_checkpoint(r) for r in rows]

        return await self._read(read)

    async def pending_input_requests(
        self, *, run_id: str | None = None, limit: int = 100
    ) -> list[InputRequest]:
        async def read(conn: Conn) -> list[InputRequest]:
            rows = await conn.fetch(
                "SELECT * FROM input_requests WHERE state = 'pending'"
                " AND ($1::text IS NULL OR run_id = $1) ORDER BY created_at, n LIMIT $2",
                run_id,
                limit,
            )
            return [_input_request(r) for r in rows]

        return await self._read(read)

    async def list_input_requests(self, run_id: str) -> list[InputRequest]:
        async def read(conn: Conn) -> list[InputRequest]:
            rows = await conn.fetch(
                "SELECT * FROM input_requests WHERE run_id = $1 ORDER BY n", run_id
            )
            return [_input_request(r) for r in rows]

        return await self._read(read)

    async def count_runs_by_state(self) -> dict[RunState, int]:
        async def read(conn: Conn) -> dict[RunState, int]:
            counts = dict.fromkeys(RunState, 0)
            for state, count in await conn.fetch("SELECT state, count(*) FROM runs GROUP BY state"):
                counts[RunState(state)] = int(count)
            return counts

        return await self._read(read)

    async def search_messages(self, query: str, *, limit: int = 50) -> list[SearchHit]:
        match = ts_query(query)
        if match is None:
            return []
        # One stretch of words around the best match (as SQLite's snippet): in fragment mode
        # (MaxFragments > 0) a fragment ended at the match when few words followed it, so hits
        # of similar messages ("…some «content»") read alike, without what told them apart.
        options = (
            f"StartSel={SNIPPET_OPEN}, StopSel={SNIPPET_CLOSE}, MaxWords=24, MinWords=12,"
            " ShortWord=0, MaxFragments=0"
        )

        async def read(conn: Conn) -> list[SearchHit]:
            # Rank only the most recent SEARCH_WINDOW matches, as the SQLite store does.
            rows = await conn.fetch(
                "WITH q AS (SELECT to_tsquery('simple', $1) AS q),"
                " hits AS (SELECT m.n FROM messages AS m, q WHERE m.search @@ q.q"
                "   ORDER BY m.n DESC LIMIT $2),"
                " ranked AS (SELECT m.*, ts_rank(m.search, q.q) AS rank FROM hits"
                "   JOIN messages AS m ON m.n = hits.n"
                "   JOIN jobs AS aj ON aj.id = m.job_id AND NOT aj.archived, q"
                "   ORDER BY rank DESC, m.n DESC LIMIT $3)"
                " SELECT r.id, r.run_id, r.job_id, j.title, r.created_at, r.position, r.role,"
                "   ts_headline('simple', r.search_text, q.q, $4) AS snippet"
                " FROM ranked AS r JOIN jobs AS j ON j.id = r.job_id, q"
                " ORDER BY r.rank DESC, r.n DESC",
                match,
                SEARCH_WINDOW,
                limit,
                options,
            )
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

        return await self._read(read)

    async def child_run_for_tool_call(self, tool_call_id: str) -> Run | None:
        async def read(conn: Conn) -> Run | None:
            row = await conn.fetchrow(
                "SELECT * FROM runs WHERE parent_tool_call_id = $1 ORDER BY n LIMIT 1",
                tool_call_id,
            )
            if row is None:
                row = await conn.fetchrow(
                    "SELECT r.* FROM tool_calls AS t JOIN runs AS r ON r.id = t.child_run_id"
                    " WHERE t.id = $1",
                    tool_call_id,
                )
            return _run(row) if row is not None else None

        return await self._read(read)

    # --- archive and delete -----------------------------------------------------------------------

    async def set_job_archived(self, job_id: str, archived: bool) -> Job:
        now = self._now()

        async def tx(t: _Tx) -> Job:
            row = await t.conn.fetchrow("SELECT * FROM jobs WHERE id = $1 FOR UPDATE", job_id)
            if row is None:
                raise errors.JobNotFound(f"job {job_id} not found")
            open_run = await t.conn.fetchrow(
                "SELECT * FROM runs WHERE job_id = $1"
                " AND state = ANY($2::text[]) ORDER BY n LIMIT 1",
                job_id,
                list(_OPEN_RUN_STATES),
            )
            latest = await t.conn.fetchval(
                "SELECT id FROM runs WHERE job_id = $1 AND parent_run_id IS NULL"
                " ORDER BY n DESC LIMIT 1",
                job_id,
            )
            events = rules.archive_job(
                _job(row),
                archived=archived,
                open_run=_run(open_run) if open_run is not None else None,
                latest_root_run_id=latest,
                now=now,
            )
            if bool(row["archived"]) != archived:
                await t.conn.execute(
                    "UPDATE jobs SET archived = $1 WHERE id = $2", archived, job_id
                )
            await _emit(t, events)
            return _job(await t.conn.fetchrow("SELECT * FROM jobs WHERE id = $1", job_id))

        return await self._write(tx)

    async def delete_job(self, job_id: str) -> dict[str, int]:
        async def tx(t: _Tx) -> dict[str, int]:
            conn = t.conn
            row = await conn.fetchrow("SELECT * FROM jobs WHERE id = $1 FOR UPDATE", job_id)
            if row is None:
                raise errors.JobNotFound(f"job {job_id} not found")
            if not row["archived"]:
                raise errors.ConflictError(
                    f"job {job_id} is not archived; archive it first"
                    f" ({hints.command('archive', job_id)})"
                )
            forks = await conn.fetch(
                "SELECT DISTINCT r.job_id FROM runs AS r JOIN runs AS h ON h.id = r.history_run_id"
                " WHERE h.job_id = $1 AND r.job_id != $1 ORDER BY r.job_id",
                job_id,
            )
            if forks:
                names = ", ".join(f["job_id"] for f in forks)
                raise errors.ConflictError(
                    f"job {job_id} is the history of the forked job(s) {names}; delete those first"
                )
            blob_candidates = [
                r[0]
                for r in await conn.fetch(
                    "SELECT before_sha256 FROM file_snapshots WHERE job_id = $1"
                    " AND before_sha256 IS NOT NULL UNION"
                    " SELECT after_sha256 FROM file_snapshots WHERE job_id = $1"
                    " AND after_sha256 IS NOT NULL",
                    job_id,
                )
            ]
            removed: dict[str, int] = {}
            # A draft is saved in parts: count the drafts (one per message), delete the parts.
            of_job = "run_id IN (SELECT id FROM runs WHERE job_id = $1)"
            removed["drafts"] = await conn.fetchval(
                f"SELECT count(DISTINCT message_id) FROM draft_parts WHERE {of_job}", job_id
            )
            await conn.execute(f"DELETE FROM draft_parts WHERE {of_job}", job_id)
            for table, where in (
                ("composer_drafts", "job_id = $1"),
                ("answer_drafts", "job_id = $1"),
                ("file_snapshots", "job_id = $1"),
                ("events", "job_id = $1"),
                ("input_requests", "job_id = $1"),
                ("checkpoints", "job_id = $1"),
                ("tool_calls", "job_id = $1"),
                ("messages", "job_id = $1"),
            ):
                removed[table] = _count(
                    await conn.execute(f"DELETE FROM {table} WHERE {where}", job_id)
                )
            await conn.execute(
                "UPDATE runs SET parent_run_id = NULL, history_run_id = NULL,"
                " retry_of_run_id = NULL WHERE job_id = $1",
                job_id,
            )
            removed["runs"] = _count(
                await conn.execute("DELETE FROM runs WHERE job_id = $1", job_id)
            )
            removed["jobs"] = _count(await conn.execute("DELETE FROM jobs WHERE id = $1", job_id))
            blobs = 0
            for sha in blob_candidates:
                still_used = await conn.fetchval(
                    "SELECT 1 FROM file_snapshots WHERE before_sha256 = $1 OR after_sha256 = $1"
                    " UNION ALL SELECT 1 FROM messages WHERE strpos(content, $1) > 0 LIMIT 1",
                    sha,
                )
                if still_used is None:
                    blobs += _count(await conn.execute("DELETE FROM blobs WHERE sha256 = $1", sha))
            removed["blobs"] = blobs
            return removed

        return await self._write(tx)

    # --- blobs and file snapshots -----------------------------------------------------------------

    async def put_blob(self, data: bytes, media_type: str) -> str:
        sha = hashlib.sha256(data).hexdigest()
        created = _iso_now(self._now())

        async def tx(t: _Tx) -> str:
            await _insert_blob(t.conn, sha, data, media_type, created)
            return sha

        return await self._write(tx)

    async def get_blob(self, sha256: str) -> tuple[str, bytes]:
        async def read(conn: Conn) -> tuple[str, bytes]:
            row = await conn.fetchrow(
                "SELECT media_type, data FROM blobs WHERE sha256 = $1", sha256
            )
            if row is None:
                raise errors.NotFoundError(f"blob {sha256} not found")
            return str(row["media_type"]), bytes(row["data"])

        return await self._read(read)

    async def record_file_snapshot(
        self, tool_call_id: str, path: str, before: bytes | None
    ) -> FileSnapshot:
        now = self._now()
        created = _iso_now(now)

        async def tx(t: _Tx) -> FileSnapshot:
            return await _tx_file_snapshot(t.conn, now, created, tool_call_id, path, before)

        return await self._write(tx)

    async def record_file_after(self, tool_call_id: str, path: str, after: bytes | None) -> None:
        created = _iso_now(self._now())

        async def tx(t: _Tx) -> None:
            await _tx_file_after(t.conn, created, tool_call_id, FileContent(path=path, data=after))

        await self._write(tx)

    async def list_file_snapshots(self, job_id: str) -> list[FileSnapshot]:
        async def read(conn: Conn) -> list[FileSnapshot]:
            rows = await conn.fetch(
                "SELECT * FROM file_snapshots WHERE job_id = $1 ORDER BY n", job_id
            )
            return [_file_snapshot(r) for r in rows]

        return await self._read(read)

    async def checkpoint_order(self, checkpoint_id: str) -> int:
        async def read(conn: Conn) -> int:
            n = await conn.fetchval("SELECT n FROM checkpoints WHERE id = $1", checkpoint_id)
            if n is None:
                raise errors.CheckpointNotFound(f"checkpoint {checkpoint_id} not found")
            return int(n)

        return await self._read(read)

    # --- workers and durable consumers (DESIGN §15) ---------------------------------------------

    async def queued_for_workers(self, *, limit: int = 20) -> list[Run]:
        async def read(conn: Conn) -> list[Run]:
            rows = await conn.fetch(
                "SELECT * FROM runs WHERE state = 'queued' AND detached ORDER BY n LIMIT $1",
                limit,
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

        async def tx(t: _Tx) -> int:
            # A new consumer gets a row nobody holds first (the same as no row to the rule),
            # so that two processes acquiring it at once queue on its row lock; a refusal
            # rolls the row back.
            await t.conn.execute(
                "INSERT INTO consumers (consumer_id, cursor, holder, lease_seconds,"
                " lease_expires_at, created_at, updated_at) VALUES ($1, 0, NULL, $2, $3, $3, $3)"
                " ON CONFLICT (consumer_id) DO NOTHING",
                consumer_id,
                float(lease_seconds),
                now,
            )
            taken = rules.acquire_consumer(
                await _fetch_consumer(t.conn, consumer_id),
                consumer_id=consumer_id,
                holder=holder,
                lease_seconds=lease_seconds,
                after=after,
                replace=replace,
                now=now,
            )
            await _write_consumer(t.conn, taken)
            return taken.cursor

        return await self._write(tx)

    async def ack_consumer(self, consumer_id: str, *, holder: str, seq: int) -> int:
        now = self._now()

        async def tx(t: _Tx) -> int:
            acked = rules.ack_consumer(
                await _fetch_consumer(t.conn, consumer_id), holder=holder, seq=seq, now=now
            )
            await _write_consumer(t.conn, acked)
            return acked.cursor

        return await self._write(tx)

    async def release_consumer(self, consumer_id: str, *, holder: str) -> None:
        now = self._now()

        async def tx(t: _Tx) -> None:
            released = rules.release_consumer(
                await _fetch_consumer(t.conn, consumer_id), holder=holder, now=now
            )
            if released is not None:
                await _write_consumer(t.conn, released)

        await self._write(tx)

    # --- composer drafts, id prefixes and prompt history ------------------------------------------

    async def _written_drafts(self, table: str, key_column: str, key: str) -> list[WrittenDraft]:
        now = self._now()
        queued = "d.queued" if table == "composer_drafts" else "'[]'"

        async def read(conn: Conn) -> list[WrittenDraft]:
            rows = await conn.fetch(
                f"SELECT d.writer, d.text, {queued} AS queued, d.updated_at,"
                " coalesce(o.released OR o.recovered_at IS NOT NULL, FALSE) AS released,"
                " coalesce(NOT o.released AND o.recovered_at IS NULL"
                " AND o.lease_expires_at >= $1, FALSE) AS lease_live"
                f" FROM {table} AS d LEFT JOIN owners AS o ON o.owner_id = d.writer"
                f" WHERE d.{key_column} = $2 ORDER BY d.updated_at, d.writer",
                now,
                key,
            )
            return [written_draft(row) for row in rows]

        return await self._read(read)

    async def get_composer_drafts(self, job_id: str | None) -> list[WrittenDraft]:
        return await self._written_drafts("composer_drafts", "job_id", job_id or "")

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

        async def tx(t: _Tx, fresh: bool) -> None:
            if fresh:
                await t.conn.execute(
                    "INSERT INTO composer_drafts (job_id, writer, text, updated_at)"
                    " VALUES ($1, $2, $3, $4) ON CONFLICT (job_id, writer) DO UPDATE"
                    " SET text = excluded.text, updated_at = excluded.updated_at",
                    key,
                    writer,
                    text if text.strip() else "",
                    now,
                )
                await t.conn.execute(_DELETE_EMPTY_DRAFT, key, writer)
            gone = [other for other in replacing if other != writer]
            if gone:
                await t.conn.execute(
                    "DELETE FROM composer_drafts WHERE job_id = $1 AND writer = ANY($2::text[])",
                    key,
                    gone,
                )

        async with self._draft_revisions.turn(("composer", key, writer), revision) as fresh:
            if fresh or replacing:  # else nothing to write: a newer text is kept
                await self._write(partial(tx, fresh=fresh))

    async def save_queued_messages(
        self, job_id: str, texts: Sequence[str], *, writer: str, revision: int | None = None
    ) -> None:
        revision = draft_revision() if revision is None else revision
        now, queued = self._now(), json.dumps(list(texts), ensure_ascii=False)

        async def tx(t: _Tx) -> None:
            await t.conn.execute(
                "INSERT INTO composer_drafts (job_id, writer, text, queued, updated_at)"
                " VALUES ($1, $2, '', $3, $4) ON CONFLICT (job_id, writer) DO UPDATE"
                " SET queued = excluded.queued, updated_at = excluded.updated_at",
                job_id,
                writer,
                queued,
                now,
            )
            await t.conn.execute(_DELETE_EMPTY_DRAFT, job_id, writer)

        async with self._draft_revisions.turn(("queue", job_id, writer), revision) as fresh:
            if fresh:  # else a newer queue is kept
                await self._write(tx)

    async def get_answer_drafts(self, request_id: str) -> list[WrittenDraft]:
        return await self._written_drafts("answer_drafts", "request_id", request_id)

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

        async def tx(t: _Tx, fresh: bool) -> None:
            if fresh and text.strip():
                await t.conn.execute(
                    "INSERT INTO answer_drafts (request_id, writer, job_id, text, updated_at)"
                    " VALUES ($1, $2, $3, $4, $5) ON CONFLICT (request_id, writer) DO UPDATE"
                    " SET text = excluded.text, updated_at = excluded.updated_at",
                    request_id,
                    writer,
                    job_id,
                    text,
                    now,
                )
            elif fresh:
                await t.conn.execute(
                    "DELETE FROM answer_drafts WHERE request_id = $1 AND writer = $2",
                    request_id,
                    writer,
                )
            gone = [other for other in replacing if other != writer]
            if gone:
                await t.conn.execute(
                    "DELETE FROM answer_drafts WHERE request_id = $1 AND writer = ANY($2::text[])",
                    request_id,
                    gone,
                )

        async with self._draft_revisions.turn(("answer", request_id, writer), revision) as fresh:
            if fresh or replacing:  # else nothing to write: a newer text is kept
                await self._write(partial(tx, fresh=fresh))

    async def ids_with_prefix(self, kind: str, prefix: str, *, limit: int = 2) -> list[str]:
        table = {"job": "jobs", "run": "runs", "checkpoint": "checkpoints"}.get(kind)
        if table is None:
            raise errors.InvalidInput(f"unknown kind of id {kind!r}")

        async def read(conn: Conn) -> list[str]:
            rows = await conn.fetch(
                f'SELECT id FROM {table} WHERE id COLLATE "C" >= $1 AND starts_with(id, $1)'
                f' ORDER BY id COLLATE "C" LIMIT $2',
                prefix,
                limit,
            )
            return [str(r["id"]) for r in rows]

        return await self._read(read)

    async def recent_prompts(self, *, workspace: str | None = None, limit: int = 100) -> list[str]:
        async def read(conn: Conn) -> list[str]:
            rows = await conn.fetch(
                "SELECT r.input FROM runs AS r JOIN jobs AS j ON j.id = r.job_id"
                " WHERE r.parent_run_id IS NULL AND r.input IS NOT NULL"
                " AND ($1::text IS NULL OR j.workspace = $1) ORDER BY r.n DESC LIMIT $2",
                workspace,
                limit,
            )
            return [str(r["input"]) for r in rows]

        return await self._read(read)


class PostgresLeaseRenewer:
    """Renews one owner's lease on a connection of its own, from any thread (one at a time),
    on a private event loop: never queued behind the store's pool. A connection problem is
    "busy" (retry), not a lost lease."""

    def __init__(self, dsn: str, schema: str, owner_id: str, *, clock: Clock) -> None:
        self._dsn = dsn
        self._schema = schema
        self._owner_id = owner_id
        self._clock = clock
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._conn: Any = None

    def renew(self, lease_seconds: float) -> Literal["renewed", "lost", "busy"]:
        asyncpg = _asyncpg()
        with self._lock:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
            try:
                return self._loop.run_until_complete(
                    asyncio.wait_for(self._renew(lease_seconds), 10)
                )
            except (
                asyncpg.PostgresError,
                asyncpg.InterfaceError,
                # What asyncpg raises on the next query over a connection the server closed
                # (it stopped, restarted): not an InterfaceError.
                asyncpg.InternalClientError,
                OSError,
                TimeoutError,
            ):
                self._drop()
                return "busy"

    async def _renew(self, lease_seconds: float) -> Literal["renewed", "lost", "busy"]:
        if self._conn is None:
            self._conn = await _asyncpg().connect(
                self._dsn, server_settings={"search_path": self._schema}
            )
        now = self._clock.now()
        updated = await self._conn.fetchval(
            "UPDATE owners SET lease_expires_at = $1, heartbeat_at = $2 WHERE owner_id = $3"
            " AND NOT released AND recovered_at IS NULL RETURNING 1",
            now + lease_seconds,
            now,
            self._owner_id,
        )
        return "renewed" if updated is not None else "lost"

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.terminate()

    def close(self) -> None:
        with self._lock:
            loop, self._loop = self._loop, None
            conn, self._conn = self._conn, None
            if loop is None:
                return
            if conn is not None:
                with contextlib.suppress(Exception):
                    loop.run_until_complete(asyncio.wait_for(conn.close(), 5))
            loop.close()


# --- helpers inside a transaction -----------------------------------------------------------------


def _count(status: str) -> int:
    """The row count of an asyncpg command status ("DELETE 3")."""
    return int(status.rsplit(" ", 1)[-1])


async def _insert_blob(conn: Conn, sha: str, data: bytes, media_type: str, created: str) -> None:
    await conn.execute(
        "INSERT INTO blobs (sha256, media_type, size, data, created_at)"
        " VALUES ($1, $2, $3, $4, $5) ON CONFLICT (sha256) DO NOTHING",
        sha,
        media_type,
        len(data),
        data,
        created,
    )


async def _fetch_consumer(conn: Conn, consumer_id: str) -> rules.Consumer | None:
    """The consumer's row, locked until the transaction ends."""
    row = await conn.fetchrow(
        "SELECT * FROM consumers WHERE consumer_id = $1 FOR UPDATE", consumer_id
    )
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


async def _write_consumer(conn: Conn, consumer: rules.Consumer) -> None:
    await conn.execute(
        "INSERT INTO consumers (consumer_id, cursor, holder, lease_seconds, lease_expires_at,"
        " created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $6)"
        " ON CONFLICT (consumer_id) DO UPDATE SET cursor = excluded.cursor,"
        " holder = excluded.holder, lease_seconds = excluded.lease_seconds,"
        " lease_expires_at = excluded.lease_expires_at, updated_at = excluded.updated_at",
        consumer.consumer_id,
        consumer.cursor,
        consumer.holder,
        float(consumer.lease_seconds),
        consumer.lease_expires_at,
        consumer.updated_at,
    )


async def _tx_file_snapshot(
    conn: Conn, now: float, created: str, tool_call_id: str, path: str, before: bytes | None
) -> FileSnapshot:
    existing = await conn.fetchrow(
        "SELECT * FROM file_snapshots WHERE tool_call_id = $1 AND path = $2", tool_call_id, path
    )
    if existing is not None:
        return _file_snapshot(existing)
    call = await conn.fetchrow("SELECT run_id, job_id FROM tool_calls WHERE id = $1", tool_call_id)
    if call is None:
        raise errors.ToolCallNotFound(f"tool call {tool_call_id} not found")
    sha = None
    if before is not None:
        sha = hashlib.sha256(before).hexdigest()
        await _insert_blob(conn, sha, before, "application/octet-stream", created)
    newest = await conn.fetchval("SELECT coalesce(max(n), 0) FROM checkpoints")
    row = await conn.fetchrow(
        "INSERT INTO file_snapshots (job_id, run_id, tool_call_id, path, before_sha256,"
        " checkpoint_n, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)"
        " ON CONFLICT (tool_call_id, path) DO NOTHING RETURNING *",
        call["job_id"],
        call["run_id"],
        tool_call_id,
        path,
        sha,
        newest,
        now,
    )
    if row is None:  # another process recorded it just now: keep the first
        row = await conn.fetchrow(
            "SELECT * FROM file_snapshots WHERE tool_call_id = $1 AND path = $2",
            tool_call_id,
            path,
        )
    return _file_snapshot(row)


async def _tx_file_after(conn: Conn, created: str, tool_call_id: str, after: FileContent) -> None:
    sha = None
    if after.data is not None:
        sha = hashlib.sha256(after.data).hexdigest()
        await _insert_blob(conn, sha, after.data, "application/octet-stream", created)
    await conn.execute(
        "UPDATE file_snapshots SET after_sha256 = $1, after_recorded = TRUE"
        " WHERE tool_call_id = $2 AND path = $3",
        sha,
        tool_call_id,
        after.path,
    )


async def _file_history_tx(conn: Conn, changes: Sequence[ToolStateChange], now: float) -> None:
    """The file snapshots the changes carry, in the transaction that records the changes."""
    created = _iso_now(now)
    for change in changes:
        if change.file_before is not None:
            before = change.file_before
            await _tx_file_snapshot(
                conn, now, created, change.tool_call_id, before.path, before.data
            )
        if change.file_after is not None:
            await _tx_file_after(conn, created, change.tool_call_id, change.file_after)


async def _fetch_run(conn: Conn, run_id: str, *, lock: bool = False) -> Run:
    row = await conn.fetchrow(
        "SELECT * FROM runs WHERE id = $1" + (" FOR UPDATE" if lock else ""), run_id
    )
    if row is None:
        raise errors.RunNotFound(f"run {run_id} not found")
    return _run(row)


async def _message_exists(conn: Conn, message_id: str) -> bool:
    return await conn.fetchval("SELECT 1 FROM messages WHERE id = $1", message_id) is not None


async def _fetch_request(conn: Conn, request_id: str) -> InputRequest:
    row = await conn.fetchrow("SELECT * FROM input_requests WHERE id = $1", request_id)
    if row is None:
        raise errors.RequestNotFound(f"input request {request_id} not found")
    return _input_request(row)


async def _optional_call(conn: Conn, tool_call_id: str | None) -> ToolCall | None:
    if tool_call_id is None:
        return None
    row = await conn.fetchrow("SELECT * FROM tool_calls WHERE id = $1", tool_call_id)
    return _tool_call(row) if row is not None else None


async def _next_position(conn: Conn, run_id: str) -> int:
    return int(
        await conn.fetchval(
            "SELECT coalesce(max(position) + 1, 0) FROM messages WHERE run_id = $1", run_id
        )
    )


async def _running_calls(conn: Conn, run_id: str) -> list[ToolCall]:
    rows = await conn.fetch(
        "SELECT * FROM tool_calls WHERE run_id = $1 AND state = 'running' ORDER BY n", run_id
    )
    return [_tool_call(r) for r in rows]


async def _recover_rows(
    t: _Tx, rows: Sequence[Any], now: float, report: RecoveryReport, price: Pricing | None
) -> None:
    for row in rows:
        run = _run(row)
        partials = rules.recovered_partials(
            run,
            rules.drafts_from_parts(
                await t.conn.fetch("SELECT * FROM draft_parts WHERE run_id = $1", run.id)
            ),
            counted=await _counted_cut_short(t.conn, run.id),
            price=price,
        )
        if run.state is RunState.QUEUED:
            await _apply(t, rules.interrupt_queued(run, now, partials=partials))
            report.interrupted_queued.append(run.id)
            continue
        running = await _running_calls(t.conn, run.id)
        plan, failed = rules.recover_running(run, running, now, partials=partials)
        await _apply(t, plan)
        (report.failed if failed else report.requeued).append(run.id)


async def _counted_cut_short(conn: Conn, run_id: str) -> list[str]:
    """The message ids whose usage a ``cut_short`` note of the run counted."""
    rows = await conn.fetch(
        "SELECT (payload::jsonb) -> 'data' ->> 'message_id' FROM events WHERE run_id = $1"
        " AND (payload::jsonb) ->> 'kind' = 'run_noted'"
        " AND (payload::jsonb) ->> 'note' = 'cut_short'",
        run_id,
    )
    return [str(r[0]) for r in rows if r[0] is not None]


async def _check_references(conn: Conn, new_run: NewRun) -> None:
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
        if (
            key is not None
            and await conn.fetchval(f"SELECT 1 FROM {table} WHERE id = $1", key) is None
        ):
            raise missing


async def _tool_states_plan(
    conn: Conn, run: Run, token: str, changes: Sequence[ToolStateChange], now: float
) -> tuple[Plan, list[ToolCall]]:
    rules.check_token(run, token)
    if not changes:
        return Plan(), []
    ids = list(dict.fromkeys(change.tool_call_id for change in changes))
    rows = await conn.fetch("SELECT * FROM tool_calls WHERE id = ANY($1::text[])", ids)
    return rules.tool_states(
        run, token=token, calls={r["id"]: _tool_call(r) for r in rows}, changes=changes, now=now
    )


async def _checkpoint_plan(
    conn: Conn,
    run: Run,
    token: str,
    step: int,
    now: float,
    last_position: int | None,
    before: Plan | None,
) -> tuple[Plan, Checkpoint]:
    """The checkpoint's plan. ``before``: a plan of the same transaction not yet written, whose
    tool call changes the pending list must already reflect."""
    rules.check_token(run, token)
    if last_position is None:
        last_position = int(
            await conn.fetchval(
                "SELECT coalesce(max(position), -1) FROM messages WHERE run_id = $1", run.id
            )
        )
    return rules.checkpoint(
        run,
        token=token,
        step=step,
        last_position=last_position,
        pending_tool_call_ids=await _pending_call_ids(conn, run.id, before),
        now=now,
    )


async def _pending_call_ids(conn: Conn, run_id: str, before: Plan | None) -> list[str]:
    """The run's tool calls still pending, in order (what a checkpoint records), as they stand
    after ``before`` (a plan of the same transaction not yet written)."""
    rows = await conn.fetch(
        "SELECT id, state FROM tool_calls WHERE run_id = $1 AND state IN ('pending', 'running')"
        " ORDER BY n",
        run_id,
    )
    states = {r["id"]: r["state"] for r in rows}
    if before is not None:
        for call in (*before.new_tool_calls, *before.tool_calls):
            states[call.id] = call.state.value
    return [call_id for call_id, state in states.items() if state == "pending"]


_RUN_UPDATE = (
    "UPDATE runs SET state = $1, revision = $2, owner_id = $3, execution_token = $4, step = $5,"
    " interrupted = $6, outcome = $7, failure = $8, cancel_reason = $9, input_tokens = $10,"
    " output_tokens = $11, cache_read_tokens = $12, cache_write_tokens = $13, cost_usd = $14,"
    " context_tokens = $15, updated_at = $16 WHERE id = $17 AND revision = $18"
)
_JOB_UPDATE = (
    "UPDATE jobs SET updated_at = coalesce($1, updated_at), input_tokens = input_tokens + $2,"
    " output_tokens = output_tokens + $3, cache_read_tokens = cache_read_tokens + $4,"
    " cache_write_tokens = cache_write_tokens + $5, cost_usd = cost_usd + $6,"
    " latest_run_state = CASE WHEN $7::boolean OR latest_root_run_id = $8 THEN $9"
    " ELSE latest_run_state END,"
    " latest_root_run_id = CASE WHEN $10::boolean THEN $11 ELSE latest_root_run_id END"
    " WHERE id = $12"
)


async def _apply(t: _Tx, plan: Plan) -> list[DurableEvent]:
    """Write a rule's plan in the order ``Plan`` documents; returns its events with their seq."""
    conn = t.conn
    await _insert_jobs(conn, plan.new_jobs)
    await _insert_runs(conn, plan.new_runs)
    await _update_runs(conn, plan.runs)
    await _update_jobs(conn, plan.jobs)
    await _insert_messages(conn, plan.messages)
    await _insert_tool_calls(conn, plan.new_tool_calls)
    await _update_tool_calls(conn, plan.tool_calls)
    await _insert_requests(conn, plan.new_requests)
    await _update_requests(conn, plan.requests)
    await _insert_checkpoints(conn, plan.checkpoints)
    await _delete_drafts(conn, plan.delete_drafts_of)
    await _keep_drafts(conn, plan.keep_drafts)
    await _insert_receipts(conn, plan.receipts)
    return await _emit(t, plan.events)


async def _insert_jobs(conn: Conn, new_jobs: Sequence[rules.NewJobRow]) -> None:
    for new_job in new_jobs:
        job = new_job.job
        await conn.execute(
            "INSERT INTO jobs (id, title, workspace, agent, created_at, updated_at,"
            " latest_root_run_id, latest_run_state) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            job.id,
            job.title,
            job.workspace,
            job.agent,
            job.created_at,
            job.updated_at,
            new_job.latest_root_run_id,
            job.latest_run_state.value if job.latest_run_state else None,
        )


async def _insert_runs(conn: Conn, new_runs: Sequence[tuple[Run, str | None]]) -> None:
    for run, input_hash in new_runs:
        await conn.execute(
            "INSERT INTO runs (id, job_id, agent, model, state, revision, input,"
            " parent_run_id, parent_tool_call_id, history_run_id, history_position,"
            " forked_from_checkpoint_id, retry_of_run_id, idempotency_key, idempotency_hash,"
            " owner_id, max_steps, created_at, updated_at, detached) VALUES ($1, $2, $3, $4, $5,"
            " $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20)",
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
            bool(run.detached),
        )


async def _update_runs(conn: Conn, runs: Sequence[tuple[Run, int]]) -> None:
    for run, read_revision in runs:
        usage = run.usage
        status = await conn.execute(
            _RUN_UPDATE,
            run.state.value,
            run.revision,
            run.owner_id,
            run.execution_token,
            run.step,
            bool(run.interrupted),
            run.outcome,
            run.failure.model_dump_json() if run.failure else None,
            run.cancel_reason,
            usage.input_tokens,
            usage.output_tokens,
            usage.cache_read_tokens,
            usage.cache_write_tokens,
            float(run.cost_usd),
            run.context_tokens,
            run.updated_at,
            run.id,
            read_revision,
        )
        if _count(status) != 1:
            raise errors.RevisionConflict(f"run {run.id} changed while it was being written")


async def _update_jobs(conn: Conn, changes: Sequence[rules.JobChange]) -> None:
    for change in changes:
        job_usage = change.usage
        await conn.execute(
            _JOB_UPDATE,
            change.updated_at,
            job_usage.input_tokens if job_usage else 0,
            job_usage.output_tokens if job_usage else 0,
            job_usage.cache_read_tokens if job_usage else 0,
            job_usage.cache_write_tokens if job_usage else 0,
            float(change.cost_usd),
            change.becomes_latest and change.run_state is not None,
            change.run_id if change.run_state is not None else None,
            change.run_state.value if change.run_state is not None else None,
            change.becomes_latest,
            change.run_id,
            change.job_id,
        )


async def _insert_messages(conn: Conn, messages: Sequence[Message]) -> None:
    if not messages:
        return
    await conn.executemany(
        "INSERT INTO messages (id, run_id, job_id, position, role, content, model, usage,"
        " cost_usd, created_at, search_text) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9,"
        " $10, $11)",
        [
            (
                m.id,
                m.run_id,
                m.job_id,
                m.position,
                m.role.value,
                _CONTENT.dump_json(m.content).decode(),
                m.model,
                m.usage.model_dump_json() if m.usage else None,
                float(m.cost_usd),
                m.created_at,
                _search_text(m) if m.role in (Role.USER, Role.ASSISTANT, Role.TOOL) else "",
            )
            for m in messages
        ],
    )


async def _insert_tool_calls(conn: Conn, calls: Sequence[ToolCall]) -> None:
    if not calls:
        return
    await conn.executemany(
        "INSERT INTO tool_calls (id, run_id, job_id, message_id, idx, provider_id,"
        " name, arguments, state, idempotent, step, created_at, started_at)"
        " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
        [
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
                bool(c.idempotent),
                c.step,
                c.created_at,
                c.started_at,
            )
            for c in calls
        ],
    )


async def _update_tool_calls(conn: Conn, calls: Sequence[ToolCall]) -> None:
    if not calls:
        return
    await conn.executemany(
        "UPDATE tool_calls SET state = $1, result = $2, error = $3, child_run_id = $4,"
        " started_at = $5, finished_at = $6 WHERE id = $7",
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
            for c in calls
        ],
    )


async def _insert_requests(conn: Conn, requests: Sequence[InputRequest]) -> None:
    for request in requests:
        await conn.execute(
            "INSERT INTO input_requests (id, run_id, job_id, kind, prompt, options, schema,"
            " tool_call_id, arguments_digest, detail, state, created_at)"
            " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
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
        )


async def _update_requests(conn: Conn, requests: Sequence[InputRequest]) -> None:
    for request in requests:
        await conn.execute(
            "UPDATE input_requests SET state = $1, answer = $2, answered_at = $3, detail = $4"
            " WHERE id = $5",
            request.state.value,
            _dumps(request.answer) if request.answer is not None else None,
            request.answered_at,
            _dumps(request.detail),
            request.id,
        )


async def _insert_checkpoints(conn: Conn, checkpoints: Sequence[Checkpoint]) -> None:
    for created in checkpoints:
        await conn.execute(
            "INSERT INTO checkpoints (id, run_id, job_id, step, last_position, usage,"
            " pending_tool_call_ids, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            created.id,
            created.run_id,
            created.job_id,
            created.step,
            created.last_position,
            created.usage.model_dump_json(),
            _dumps(created.pending_tool_call_ids),
            created.created_at,
        )


async def _delete_drafts(conn: Conn, run_id: str | None) -> None:
    if run_id is not None:
        await conn.execute(
            "DELETE FROM draft_parts WHERE run_id = $1 AND before_position IS NULL", run_id
        )


async def _keep_drafts(conn: Conn, kept: tuple[str, int] | None) -> None:
    if kept is not None:
        run_id, position = kept
        await conn.execute(
            "UPDATE draft_parts SET before_position = $2"
            " WHERE run_id = $1 AND before_position IS NULL",
            run_id,
            position,
        )


async def _insert_receipts(conn: Conn, receipts: Sequence[rules.Receipt]) -> None:
    for receipt in receipts:
        await conn.execute(
            "INSERT INTO receipts (operation, key, input_hash, result, created_at)"
            " VALUES ($1, $2, $3, $4, $5)",
            receipt.operation,
            receipt.key,
            receipt.input_hash,
            receipt.result,
            receipt.created_at,
        )


async def _emit(t: _Tx, events: Sequence[DurableEvent]) -> list[DurableEvent]:
    """Append ``events`` to the log with the next seq numbers. The counter update is the last
    write of the transaction, and its row lock is held to the commit: seq order is commit
    order (see the module docstring)."""
    if not events:
        return []
    last = int(
        await t.conn.fetchval("UPDATE event_seq SET last = last + $1 RETURNING last", len(events))
    )
    first = last - len(events) + 1
    published = [e.model_copy(update={"seq": first + i}) for i, e in enumerate(events)]
    await t.conn.executemany(
        "INSERT INTO events (seq, run_id, job_id, created_at, payload) VALUES ($1, $2, $3, $4, $5)",
        [
            (
                e.seq,
                getattr(e, "run_id", None),
                getattr(e, "job_id", None),
                e.created_at,
                EVENT_ADAPTER.dump_json(e, by_alias=True).decode(),
            )
            for e in published
        ],
    )
    await t.conn.execute("SELECT pg_notify($1, $2)", t.channel, f"{last} {t.origin}")
    t.events.extend(published)
    return published
