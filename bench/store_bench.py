"""Durable commit throughput and size (DESIGN §13, issue 13): agent steps through SqliteStore
side by side with honest baselines, on the same conversation.

A step: an assistant message with three ``read_file`` tool_use blocks, its three calls reserved
and started, their ~1 KB results (windows of real text, the standard library's ``asyncio`` and
``email`` sources: a repeated phrase would flatter compression and the search index), the tool
message carrying them, a checkpoint, and the 12
durable events of those changes. The loops compared:

- ``store``: ``SqliteStore`` through the two step transactions the engine uses
  (``commit_assistant_message_with_calls`` then ``commit_step_results``);
- ``plain, 1 tx``: a bare ``sqlite3`` loop writing the same messages, checkpoint and events
  (events by reference, as the store keeps them) in ONE transaction per step, into tables with
  no full-text index and no index beyond the primary keys;
- ``plain, same tx``: the same loop split into as many transactions per step as the store uses;
- ``langgraph``: LangGraph's ``AsyncSqliteSaver`` (optional extra ``bench``) saving the same
  conversation the way a graph does: the step's writes, then a checkpoint of the messages;
- ``store SQL alone``: the statements one store run made in its steps (with their
  parameters, content already compressed, the search indexing included) replayed in a bare
  loop on a copy of its database as it was before them, with the store's pragmas: the store's
  schema and statements with no Python of the store around them, so the ceiling of any code on
  this schema.

Printed: steps/s at each length, the ratios (budgets: store >= 0.5x same-tx, >= 0.25x 1-tx,
>= 20x LangGraph at 800 steps), bytes per step against the raw bytes of the messages held
(budget <= 1.5x), and the machine load (os.getloadavg) before and after.

    .venv/bin/python bench/store_bench.py [--quick] [--steps 200,800] [--repeat N]
        [--db postgresql://user@host/dbname]

With ``--db`` the same steps also go through ``PostgresStore`` on that server (a fresh schema
per run, dropped after), printed beside SQLite's store with their ratio. Mind the difference in
kind: the SQLite store syncs to a local file; PostgreSQL adds a network round trip per statement
and the server's own durability settings (check ``synchronous_commit`` and ``fsync`` on the
server before comparing).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sqlite3
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from runtime.models import Role, TextBlock, ToolCallState, ToolResultBlock, ToolUseBlock, Usage
from runtime.store.base import NewMessage, NewRun, NewToolCall, ToolStateChange
from runtime.store.sqlite import PAGE_SIZE, SqliteStore
from runtime.store.stored_content import register_functions

RESULT_CHARS = 1000
TEXT_CHARS = 200


def _load_corpus() -> str:
    """Real text for the messages: the sources of the standard library's ``asyncio`` and
    ``email`` packages (about 850 KB, the same on every commit of this project). A repeated
    phrase would flatter both the search index and any compression of stored content."""
    import email

    text = []
    for package in (asyncio, email):
        for source in sorted(Path(package.__file__ or "").parent.glob("*.py")):
            text.append(source.read_text(encoding="utf-8"))
    return "\n".join(text)


CORPUS = _load_corpus()


def _slice(index: int, chars: int) -> str:
    start = (index * 1009) % (len(CORPUS) - chars)  # a new window for every message
    return CORPUS[start : start + chars]


def _text(step: int) -> str:
    """The assistant's words at ``step``."""
    return _slice(7 * step + 3, TEXT_CHARS)


def _result(step: int, call: int) -> str:
    """The ~1 KB result of call ``call`` of ``step``."""
    return _slice(CALLS_PER_STEP * step + call, RESULT_CHARS)


CALLS_PER_STEP = 3
TRANSACTIONS_PER_STEP = 2
EVENTS_PER_STEP = 2 + 3 * CALLS_PER_STEP + 1  # 2 messages, pending/running/completed, checkpoint


@dataclass
class Result:
    rate: float
    size: int
    cpu_ms: float = 0.0
    """CPU time per step (all threads of this process): steadier than wall time on a busy
    machine, where a wait for a core counts as work."""
    largest_wal: int = 0
    """The WAL file's largest size between two steps (``size`` is after closing)."""


def _db_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.iterdir() if p.name.startswith(path.name))


def _step_content(step: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[str]]:
    """The assistant and tool message contents of one step (as JSON-ready blocks)."""
    call_ids = [uuid.uuid4().hex for _ in range(CALLS_PER_STEP)]
    assistant = [{"type": "text", "text": _text(step)}] + [
        {
            "type": "tool_use",
            "id": f"toolu_{step}_{i}",
            "tool_call_id": call_id,
            "name": "read_file",
            "input": {"path": f"src/module_{i}.py"},
        }
        for i, call_id in enumerate(call_ids)
    ]
    tool = [
        {
            "type": "tool_result",
            "tool_use_id": f"toolu_{step}_{i}",
            "tool_call_id": call_id,
            "content": _result(step, i),
            "is_error": False,
        }
        for i, call_id in enumerate(call_ids)
    ]
    return assistant, tool, call_ids


def raw_message_bytes(steps: int) -> int:
    """The bytes of the messages themselves (their content JSON), the size budget's unit."""
    total = 0
    for step in range(1, steps + 1):
        assistant, tool, _ = _step_content(step)
        for content in (assistant, tool):
            total += len(json.dumps(content, separators=(",", ":"), ensure_ascii=False).encode())
    return total


# --- the store -----------------------------------------------------------------------------------


async def store_steps(
    path: Path,
    steps: int,
    pg_url: str | None = None,
    *,
    store: Any = None,
    before_steps: Callable[[Any], None] | None = None,
    after_steps: Callable[[Any], None] | None = None,
) -> Result:
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    if store is not None:
        pass
    elif pg_url is not None:
        from runtime.store.postgres import PostgresStore

        joiner = "&" if "?" in pg_url else "?"
        store = PostgresStore(f"{pg_url}{joiner}schema={schema}")
    else:
        store = SqliteStore(path)
    await store.open()
    run = await store.create_run(
        NewRun(agent="default", model="demo", input=None, workspace="/w", owner_id="b")
    )
    run = await store.claim_run(run.id, owner_id="b")
    token = run.execution_token
    assert token is not None
    if before_steps is not None:
        before_steps(store)
    two_step = hasattr(store, "commit_step_results")  # the same bench runs on older code
    elapsed = cpu = 0.0
    wal, largest_wal = path.with_name(path.name + "-wal"), 0
    for step in range(1, steps + 1):
        _, _, call_ids = _step_content(step)
        calls = [
            NewToolCall(
                id=call_ids[i],
                provider_id=f"toolu_{step}_{i}",
                name="read_file",
                arguments={"path": f"src/module_{i}.py"},
                idempotent=True,
                start=True,
            )
            for i in range(CALLS_PER_STEP)
        ]
        message = NewMessage(
            role=Role.ASSISTANT,
            content=[TextBlock(text=_text(step))]
            + [
                ToolUseBlock(
                    id=c.provider_id, tool_call_id=c.id or "", name=c.name, input=c.arguments
                )
                for c in calls
            ],
            usage=Usage(input_tokens=1200, output_tokens=80),
            cost_usd=0.001,
        )
        started, cpu_started = time.perf_counter(), time.process_time()
        if two_step:
            first = await store.commit_assistant_message_with_calls(
                run.id, token=token, message=message, tool_calls=calls, step=step
            )
            reserved = first.tool_calls
        else:
            _, reserved = await store.commit_message(
                run.id, token=token, message=message, tool_calls=calls, step=step
            )
        changes = [
            ToolStateChange(tool_call_id=c.id, to=ToolCallState.COMPLETED, result=_result(step, i))
            for i, c in enumerate(reserved)
        ]
        tool_message = NewMessage(
            role=Role.TOOL,
            content=[
                ToolResultBlock(
                    tool_use_id=c.provider_id, tool_call_id=c.id, content=_result(step, i)
                )
                for i, c in enumerate(reserved)
            ],
        )
        finish = store.commit_step_results if two_step else store.finish_step
        await finish(
            run.id, token=token, tool_changes=changes, message=tool_message, checkpoint_step=step
        )
        elapsed += time.perf_counter() - started
        cpu += time.process_time() - cpu_started
        if pg_url is None and wal.exists():
            largest_wal = max(largest_wal, wal.stat().st_size)
    if after_steps is not None:
        after_steps(store)
    await store.close()
    if pg_url is not None:
        return Result(steps / elapsed, await _pg_schema_size(pg_url, schema), 1000 * cpu / steps)
    return Result(steps / elapsed, _db_size(path), 1000 * cpu / steps, largest_wal)


async def _pg_schema_size(pg_url: str, schema: str) -> int:
    """The bytes of the bench schema's tables and indexes; then the schema is dropped."""
    import asyncpg

    conn = await asyncpg.connect(pg_url.split("?", 1)[0])
    try:
        size = await conn.fetchval(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class AS c"
            " JOIN pg_namespace AS n ON n.oid = c.relnamespace"
            " WHERE n.nspname = $1 AND c.relkind = 'r'",
            schema,
        )
        await conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
    finally:
        await conn.close()
    return int(size)


# --- plain sqlite3 loops -------------------------------------------------------------------------

_PLAIN_SCHEMA = (
    "CREATE TABLE messages (n INTEGER PRIMARY KEY, id TEXT NOT NULL, run_id TEXT NOT NULL,"
    " position INTEGER NOT NULL, role TEXT NOT NULL, content TEXT NOT NULL, usage TEXT,"
    " created_at REAL NOT NULL)",
    "CREATE TABLE tool_calls (n INTEGER PRIMARY KEY, id TEXT NOT NULL, message_n INTEGER NOT NULL,"
    " name TEXT NOT NULL, arguments TEXT NOT NULL, state TEXT NOT NULL, created_at REAL NOT NULL)",
    "CREATE TABLE checkpoints (n INTEGER PRIMARY KEY, id TEXT NOT NULL, run_id TEXT NOT NULL,"
    " step INTEGER NOT NULL, last_position INTEGER NOT NULL, created_at REAL NOT NULL)",
    "CREATE TABLE events (seq INTEGER PRIMARY KEY, run_n INTEGER NOT NULL, kind INTEGER NOT NULL,"
    " ref INTEGER, created_at REAL NOT NULL, payload TEXT)",
)


def _plain_connection(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")  # the store's
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    for statement in _PLAIN_SCHEMA:
        conn.execute(statement)
    return conn


def _plain_first(
    conn: sqlite3.Connection,
    run_id: str,
    position: int,
    assistant: list[dict[str, Any]],
    call_ids: list[str],
    now: float,
) -> list[int]:
    """The assistant message, its calls (started) and their events; returns the calls' n."""
    cur = conn.execute(
        "INSERT INTO messages (id, run_id, position, role, content, usage, created_at)"
        " VALUES (?, ?, ?, 'assistant', ?, ?, ?)",
        (
            uuid.uuid4().hex,
            run_id,
            position,
            json.dumps(assistant, separators=(",", ":")),
            '{"input_tokens":1200,"output_tokens":80}',
            now,
        ),
    )
    message_n = cur.lastrowid
    conn.executemany(
        "INSERT INTO tool_calls (id, message_n, name, arguments, state, created_at)"
        " VALUES (?, ?, 'read_file', ?, 'running', ?)",
        [
            (call_id, message_n, json.dumps({"path": f"src/module_{i}.py"}), now)
            for i, call_id in enumerate(call_ids)
        ],
    )
    last_call = int(conn.execute("SELECT last_insert_rowid()").fetchone()[0])
    call_ns = list(range(last_call - len(call_ids) + 1, last_call + 1))
    events: list[tuple[int, int, int | None, float, str | None]] = [(1, 2, message_n, now, None)]
    for call_n in call_ns:
        events.append((1, 3, call_n, now, '{"from":null,"to":"pending","arguments_ref":true}'))
        events.append((1, 3, call_n, now, '{"from":"pending","to":"running"}'))
    conn.executemany(
        "INSERT INTO events (run_n, kind, ref, created_at, payload) VALUES (?, ?, ?, ?, ?)", events
    )
    return call_ns


def _plain_second(
    conn: sqlite3.Connection,
    run_id: str,
    position: int,
    step: int,
    tool: list[dict[str, Any]],
    call_ns: list[int],
    now: float,
) -> None:
    """The results (kept in the tool message only), the tool message, the checkpoint and their
    events."""
    conn.executemany(
        "UPDATE tool_calls SET state = 'completed' WHERE n = ?", [(n,) for n in call_ns]
    )
    cur = conn.execute(
        "INSERT INTO messages (id, run_id, position, role, content, created_at)"
        " VALUES (?, ?, ?, 'tool', ?, ?)",
        (uuid.uuid4().hex, run_id, position, json.dumps(tool, separators=(",", ":")), now),
    )
    message_n = cur.lastrowid
    cur = conn.execute(
        "INSERT INTO checkpoints (id, run_id, step, last_position, created_at)"
        " VALUES (?, ?, ?, ?, ?)",
        (uuid.uuid4().hex, run_id, step, position, now),
    )
    events: list[tuple[int, int, int | None, float, str | None]] = [
        (1, 3, n, now, '{"from":"running","to":"completed","result_ref":true}') for n in call_ns
    ]
    events += [(1, 2, message_n, now, None), (1, 4, cur.lastrowid, now, None)]
    conn.executemany(
        "INSERT INTO events (run_n, kind, ref, created_at, payload) VALUES (?, ?, ?, ?, ?)", events
    )


def plain_steps(path: Path, steps: int, *, transactions: int) -> Result:
    """The same messages, calls, checkpoint and events, in ``transactions`` per step."""
    conn = _plain_connection(path)
    run_id = uuid.uuid4().hex
    elapsed = cpu = 0.0
    for step in range(1, steps + 1):
        assistant, tool, call_ids = _step_content(step)
        position = 2 * step - 1
        started, cpu_started = time.perf_counter(), time.process_time()
        now = time.time()
        conn.execute("BEGIN IMMEDIATE")
        call_ns = _plain_first(conn, run_id, position, assistant, call_ids, now)
        if transactions > 1:
            conn.execute("COMMIT")
            conn.execute("BEGIN IMMEDIATE")
        _plain_second(conn, run_id, position + 1, step, tool, call_ns, now)
        conn.execute("COMMIT")
        elapsed += time.perf_counter() - started
        cpu += time.process_time() - cpu_started
    conn.close()
    return Result(steps / elapsed, _db_size(path), 1000 * cpu / steps)


# --- the store's SQL alone ------------------------------------------------------------------------


class _Recording(sqlite3.Connection):
    """A connection that notes every statement it runs, with its parameters, while asked to."""

    statements: list[tuple[str, str, Any]]
    recording = False

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        cursor = super().execute(sql, parameters)  # one refused (busy) is not replayed
        if self.recording:
            self.statements.append(("one", sql, parameters))
        return cursor

    def executemany(self, sql: str, parameters: Any, /) -> sqlite3.Cursor:
        rows = list(parameters)
        cursor = super().executemany(sql, rows)
        if self.recording:
            self.statements.append(("many", sql, rows))
        return cursor


class _RecordedStore(SqliteStore):
    """``SqliteStore`` on a ``_Recording`` connection (a private override: a bench, not an
    extension point)."""

    def _connect(self) -> Any:
        conn = sqlite3.connect(
            str(self.path), isolation_level=None, check_same_thread=False, factory=_Recording
        )
        conn.statements = []
        self._setup(conn)
        return conn


def sql_floor(folder: Path, steps: int) -> float:
    """Steps/s of the store's own statements alone: one store run's statements (with their
    parameters, the content already compressed; the search indexing its worker does every
    CHECKPOINT_EVERY commits included) recorded, then replayed in a plain loop on a copy of its
    database as it was before the steps, with the store's pragmas, the rows of every SELECT
    fetched. No Python of the store runs in the replay: it is the most any code around this
    schema could reach."""
    path, base = folder / "recorded.db", folder / "before-steps.db"
    recorded: list[_Recording] = []

    def snapshot(store: Any) -> None:
        conn = store._conn
        busy, wal_frames, copied = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if busy or wal_frames != copied:
            raise SystemExit("sql_floor: the WAL could not be copied back before the steps")
        shutil.copy(path, base)
        conn.recording = True
        recorded.append(conn)

    def stop(store: Any) -> None:
        store._conn.recording = False  # closing (its last indexing, a checkpoint) is not timed

    asyncio.run(
        store_steps(
            path, steps, store=_RecordedStore(path), before_steps=snapshot, after_steps=stop
        )
    )
    conn = sqlite3.connect(base, isolation_level=None)
    register_functions(conn)  # the search indexing's text extraction, as the store has it
    for pragma in (
        "journal_mode = WAL",
        "synchronous = NORMAL",
        "foreign_keys = ON",
        "cache_size = -32000",
        "wal_autocheckpoint = 0",  # the store copies the WAL back on a thread of its own
    ):
        conn.execute(f"PRAGMA {pragma}")
    started = time.perf_counter()
    for kind, sql, parameters in recorded[0].statements:
        if kind == "many":
            conn.executemany(sql, parameters)
        elif sql.lstrip().upper().startswith("SELECT"):
            conn.execute(sql, parameters).fetchall()
        else:
            conn.execute(sql, parameters)
    elapsed = time.perf_counter() - started
    conn.close()
    return steps / elapsed


# --- LangGraph -----------------------------------------------------------------------------------


async def langgraph_steps(path: Path, steps: int) -> Result | None:
    try:
        from langgraph.checkpoint.base import empty_checkpoint
        from langgraph.checkpoint.base.id import uuid6
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
    except ImportError:
        return None
    messages: list[dict[str, Any]] = []
    elapsed = cpu = 0.0
    async with AsyncSqliteSaver.from_conn_string(str(path)) as saver:
        await saver.setup()
        config: Any = {"configurable": {"thread_id": "bench", "checkpoint_ns": ""}}
        # The graph's input checkpoint; each step's writes belong to the checkpoint before it.
        start = empty_checkpoint()
        start["id"] = str(uuid6(clock_seq=0))
        start["channel_values"] = {"messages": []}
        config = await saver.aput(config, start, {"source": "input", "step": 0, "parents": {}}, {})
        for step in range(1, steps + 1):
            assistant, tool, _ = _step_content(step)
            started, cpu_started = time.perf_counter(), time.process_time()
            messages.append({"role": "assistant", "content": assistant})
            messages.append({"role": "tool", "content": tool})
            await saver.aput_writes(
                config, [("messages", [messages[-2], messages[-1]])], task_id=f"task-{step}"
            )
            checkpoint = empty_checkpoint()
            checkpoint["id"] = str(uuid6(clock_seq=step))
            checkpoint["channel_values"] = {"messages": list(messages)}
            checkpoint["channel_versions"] = {"messages": step}
            config = await saver.aput(
                config,
                checkpoint,
                {"source": "loop", "step": step, "parents": {}},
                {"messages": step},
            )
            elapsed += time.perf_counter() - started
            cpu += time.process_time() - cpu_started
    return Result(steps / elapsed, _db_size(path), 1000 * cpu / steps)


# --- report --------------------------------------------------------------------------------------


def _best(results: list[Result]) -> Result:
    return Result(
        max(r.rate for r in results),
        results[0].size,
        min(r.cpu_ms for r in results),
        max(r.largest_wal for r in results),
    )


def measure(steps: int, repeat: int, pg_url: str | None = None) -> dict[str, Result | None]:
    runs: dict[str, list[Result]] = {"store": [], "plain_1tx": [], "plain_same_tx": []}
    if pg_url is not None:
        runs["postgresql"] = []
    floors: list[float] = []
    # Alternate the loops and keep the best rate of each: the machine may be busy.
    for _ in range(repeat):
        with tempfile.TemporaryDirectory(prefix="store-bench-") as tmp:
            folder = Path(tmp)
            runs["plain_1tx"].append(plain_steps(folder / "plain1.db", steps, transactions=1))
            runs["store"].append(asyncio.run(store_steps(folder / "store.db", steps)))
            if pg_url is not None:
                runs["postgresql"].append(asyncio.run(store_steps(folder / "x", steps, pg_url)))
            runs["plain_same_tx"].append(
                plain_steps(folder / "plain2.db", steps, transactions=TRANSACTIONS_PER_STEP)
            )
            floors.append(sql_floor(folder / "floor", steps))
    measured: dict[str, Result | None] = {name: _best(r) for name, r in runs.items()}
    measured["sql_floor"] = Result(max(floors), 0)
    with tempfile.TemporaryDirectory(prefix="store-bench-") as tmp:
        measured["langgraph"] = asyncio.run(langgraph_steps(Path(tmp) / "lg.db", steps))
    return measured


async def _empty_store_size() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "empty.db"
        async with SqliteStore(path):
            pass
        return _db_size(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200 steps, one run")
    parser.add_argument("--steps", default=None, help="comma-separated lengths (200,800)")
    parser.add_argument("--repeat", type=int, default=None, help="alternating runs (best kept)")
    parser.add_argument("--db", default=None, help="also run the store on this postgresql:// URL")
    args = parser.parse_args()
    lengths = [int(s) for s in (args.steps or ("200" if args.quick else "200,800")).split(",")]
    repeat = args.repeat or (1 if args.quick else 3)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"step: {CALLS_PER_STEP} tool calls, {EVENTS_PER_STEP} events; best of {repeat}")
    print(
        "loops: store = SqliteStore's two step transactions (its schema: indexes, search,"
        " job and run rows);\n"
        "  plain sqlite3 = a bare loop writing the same messages, calls, checkpoint and events"
        " (by reference) into\n"
        "  tables with primary keys only, no search index, same pragmas and page size, in 1"
        f" or {TRANSACTIONS_PER_STEP} transactions per step;\n"
        "  langgraph = AsyncSqliteSaver: the step's writes, then a checkpoint of all messages"
    )
    empty = asyncio.run(_empty_store_size())
    print(
        f"an empty store database: {empty:,} bytes (its schema: about a page per table and index)"
    )
    for steps in lengths:
        m = measure(steps, repeat, args.db)
        raw = raw_message_bytes(steps)
        store, plain1, plain2, lg = m["store"], m["plain_1tx"], m["plain_same_tx"], m["langgraph"]
        assert store is not None and plain1 is not None and plain2 is not None
        print(f"\n{steps} steps (raw message bytes {raw / steps:,.0f} per step)")
        print(
            f"  {'loop':30s} {'steps/s':>9s} {'cpu ms/step':>12s} {'bytes/step':>11s} {'x raw':>6s}"
        )
        rows: list[tuple[str, Result | None]] = [
            ("store (2 tx per step)", store),
            ("plain sqlite3, 1 tx", plain1),
            (f"plain sqlite3, {TRANSACTIONS_PER_STEP} tx", plain2),
            ("langgraph AsyncSqliteSaver", lg),
        ]
        pg = m.get("postgresql")
        if pg is not None:
            rows.insert(1, ("PostgresStore (2 tx per step)", pg))
        for name, result in rows:
            if result is None:
                print(f"  {name:30s} not installed (pip install -e '.[bench]'); skipped")
                continue
            per_step = result.size / steps
            print(
                f"  {name:30s} {result.rate:9,.0f} {result.cpu_ms:12.2f} {per_step:11,.0f}"
                f" {result.size / raw:6.2f}"
            )
        floor = m["sql_floor"]
        assert floor is not None
        print(
            f"  {'store SQL alone (replayed)':30s} {floor.rate:9,.0f}   the store's own"
            " statements of one run, replayed with no Python"
        )
        print(
            f"  store / plain same tx:  {store.rate / plain2.rate:5.2f}   (budget >= 0.5;"
            f" by CPU time {plain2.cpu_ms / store.cpu_ms:.2f})"
        )
        print(
            f"  store / plain 1 tx:     {store.rate / plain1.rate:5.2f}   (budget >= 0.25;"
            f" by CPU time {plain1.cpu_ms / store.cpu_ms:.2f})"
        )
        print(
            f"  store size / raw:       {store.size / raw:5.2f}   (budget <= 1.5;"
            f" {(store.size - empty) / raw:.2f} beyond the empty database)"
        )
        print(
            f"  store's WAL at its largest: {store.largest_wal / 1e6:.1f} MB while the steps ran"
            " (the sizes above are after closing)"
        )
        print(
            f"  its SQL alone / plain:  {floor.rate / plain2.rate:5.2f} same tx,"
            f" {floor.rate / plain1.rate:.2f} 1 tx   (the ceiling of any code on this schema)"
        )
        if pg is not None:
            print(
                f"  postgresql / sqlite store: {pg.rate / store.rate:5.2f}   (steps/s; by CPU"
                f" time {store.cpu_ms / pg.cpu_ms:.2f}; size / raw {pg.size / raw:.2f})"
            )
        if lg is not None:
            print(f"  store / langgraph:      {store.rate / lg.rate:5.1f}   (budget >= 20 at 800)")
    print(f"\nload average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
