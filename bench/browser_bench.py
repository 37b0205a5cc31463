"""The browser at scale (DESIGN §13): 100,000 jobs and 1,000,000 messages, then through
SqliteStore: the first page of jobs, opening a run of 10,000 messages, and a full-text search.

The database is filled with plain sqlite3 in the store's schema (after running the store's own
migrations, so the FTS triggers index every message), in big transactions.

    .venv/bin/python bench/browser_bench.py [--quick] [--keep PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from runtime.models import RunState
from runtime.store.migrations import migrate
from runtime.store.sqlite import SqliteStore

BIG_RUN_MESSAGES = 10_000
WORDS = [f"w{i:04d}" for i in range(4000)] + [
    "parser",
    "config",
    "database",
    "migration",
    "refactor",
    "test",
    "error",
    "function",
]


def fill(path: Path, jobs: int, messages: int) -> None:
    rng = random.Random(7)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    migrate(conn, path=str(path))
    conn.execute("PRAGMA synchronous = OFF")
    base = 1_700_000_000.0
    per_job, extra = divmod(messages - BIG_RUN_MESSAGES, jobs - 1)
    started = time.perf_counter()
    batch = 5_000
    for first in range(0, jobs, batch):
        conn.execute("BEGIN")
        job_rows, run_rows, message_rows = [], [], []
        for j in range(first, min(jobs, first + batch)):
            job_id, run_id = f"job{j:07d}", f"run{j:07d}"
            t = base + j * 60
            count = BIG_RUN_MESSAGES if j == jobs - 1 else per_job + (j < extra)
            job_rows.append(
                (
                    job_id,
                    f"Task number {j}: {' '.join(rng.choices(WORDS, k=5))}",
                    t,
                    t + count,
                    run_id,
                    rng.choice(["completed", "failed", "completed", "cancelled", "input_required"]),
                )
            )
            run_rows.append((run_id, job_id, t, t + count))
            for p in range(count):
                text = " ".join(rng.choices(WORDS, k=14))
                if p % 3 == 0:
                    text += " agent"  # a common word: a third of all messages
                role = "user" if p % 2 == 0 else "assistant"
                content = json.dumps([{"type": "text", "text": text}], separators=(",", ":"))
                message_rows.append((f"m{j:07d}_{p}", run_id, job_id, p, role, content, t + p))
        conn.executemany(
            "INSERT INTO jobs (id, title, workspace, agent, created_at, updated_at,"
            " latest_root_run_id, latest_run_state) VALUES (?, ?, '/w', 'default', ?, ?, ?, ?)",
            job_rows,
        )
        conn.executemany(
            "INSERT INTO runs (id, job_id, agent, model, state, revision, input, max_steps,"
            " created_at, updated_at) VALUES (?, ?, 'default', 'demo', 'completed', 3, 'x', 50,"
            " ?, ?)",
            run_rows,
        )
        conn.executemany(
            "INSERT INTO messages (id, run_id, job_id, position, role, content, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            message_rows,
        )
        conn.execute("COMMIT")
    conn.execute(
        "UPDATE jobs SET latest_run_state = 'running' WHERE id = ?", (f"job{jobs - 1:07d}",)
    )
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("ANALYZE")
    conn.close()
    total = sqlite3.connect(path).execute("SELECT count(*) FROM messages").fetchone()[0]
    print(
        f"filled {jobs:,} jobs and {total:,} messages in {time.perf_counter() - started:.1f} s"
        f" ({path.stat().st_size / 1e6:.0f} MB)"
    )


async def measure(path: Path, jobs: int) -> None:
    async def timed(label: str, goal_ms: float | None, coro_factory, repeat: int = 5):  # type: ignore[no-untyped-def]
        best = float("inf")
        result = None
        for _ in range(repeat):
            started = time.perf_counter()
            result = await coro_factory()
            best = min(best, time.perf_counter() - started)
        goal = f"(goal <= {goal_ms:.0f} ms)" if goal_ms else ""
        print(f"{label:<52} {best * 1000:8.1f} ms  {goal}")
        return result

    started = time.perf_counter()
    store = SqliteStore(path)
    await store.open()
    opened_ms = (time.perf_counter() - started) * 1000
    print(f"{'open the store (checks + migrations)':<52} {opened_ms:8.1f} ms")
    big_run = f"run{jobs - 1:07d}"
    try:
        page = await timed("first page of jobs (50)", 100, lambda: store.list_jobs(limit=50))
        await timed(
            "second page of jobs (50)",
            100,
            lambda: store.list_jobs(limit=50, cursor=page.next_cursor),
        )
        await timed(
            "first page of jobs filtered by state",
            100,
            lambda: store.list_jobs(limit=50, state=RunState.INPUT_REQUIRED),
        )
        await timed("first page of runs (50)", 100, lambda: store.list_runs(limit=50))
        await timed("count runs by state", None, store.count_runs_by_state)
        await timed(
            "open a run of 10,000 messages: last window (200)",
            300,
            lambda: store.list_messages(big_run, before_position=BIG_RUN_MESSAGES),
        )

        async def page_through() -> int:
            after, seen = -1, 0
            while True:
                window = await store.list_messages(big_run, after_position=after, limit=500)
                if not window:
                    return seen
                seen += len(window)
                after = window[-1].position

        await timed("open a run of 10,000 messages: all of it (500/page)", 300, page_through, 3)
        await timed("search a rare word (best 50)", 200, lambda: store.search_messages("parser"))
        await timed(
            "search two words (best 50)", 200, lambda: store.search_messages("database migration")
        )
        await timed(
            "search a prefix as typed (best 50)", 200, lambda: store.search_messages("refac")
        )
        await timed(
            "search a common word (1 in 3 messages, best 50)",
            200,
            lambda: store.search_messages("agent"),
        )
        hits = await store.search_messages("parser")
        print(f"  e.g. {hits[0].snippet!r}" if hits else "  (no hits)")
    finally:
        await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10,000 jobs and 100,000 messages")
    parser.add_argument("--keep", type=Path, default=None, help="reuse or keep the database here")
    args = parser.parse_args()
    jobs, messages = (10_000, 100_000) if args.quick else (100_000, 1_000_000)
    with tempfile.TemporaryDirectory(prefix="browser-bench-") as tmp:
        path = args.keep or Path(tmp) / "browser.db"
        if not path.exists():
            fill(path, jobs, messages)
        asyncio.run(measure(path, jobs))


if __name__ == "__main__":
    main()
