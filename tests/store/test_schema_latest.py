"""The schema text by which the store and ``agent-tui runs`` recognise an intact database of the
latest schema without running the migrations (``runtime.store.checks``)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from runtime import errors
from runtime.store import schema_latest
from runtime.store.checks import check_database_file, schema_objects
from runtime.store.migrations import LATEST_VERSION, migrate
from runtime.store.sqlite import SqliteStore
from tests.store.helpers import new_run

ROOT = Path(__file__).resolve().parents[2]


def test_the_recorded_objects_are_those_of_the_schema_the_migrations_write_now() -> None:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    migrate(conn, path=":memory:")
    written = schema_objects(conn)
    conn.close()
    assert (LATEST_VERSION, written) == (schema_latest.LATEST_VERSION, schema_latest.OBJECTS), (
        "runtime/store/schema_latest.py is stale: run `python -m runtime.store.schema`"
    )


async def test_a_database_the_store_made_is_recognised_by_the_recorded_schema(
    tmp_path: Path,
) -> None:
    path = tmp_path / "agent.db"
    store = SqliteStore(path)
    await store.open()
    await store.create_run(new_run("hello"))
    await store.close()
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        assert schema_objects(conn) == schema_latest.OBJECTS
    finally:
        conn.close()
    assert check_database_file(path) == LATEST_VERSION


def test_an_intact_database_is_checked_without_importing_the_migrations(tmp_path: Path) -> None:
    path = tmp_path / "agent.db"
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, path=str(path))
    conn.close()
    probe = (
        "import sys; from pathlib import Path; from runtime.store.checks import"
        f" check_database_file; print(check_database_file(Path({str(path)!r})),"
        " 'runtime.store.migrations' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(LATEST_VERSION), "False"]


@pytest.mark.parametrize(
    "change",
    [
        "CREATE INDEX a_persons_index ON messages(created_at)",  # allowed: not damage
        "DROP INDEX runs_by_job",  # damage
    ],
)
def test_a_schema_other_than_the_recorded_one_gets_the_full_check(
    tmp_path: Path, change: str
) -> None:
    path = tmp_path / "agent.db"
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, path=str(path))
    conn.execute(change)
    assert schema_objects(conn) != schema_latest.OBJECTS
    conn.close()
    if change.startswith("DROP"):
        with pytest.raises(errors.SchemaDamaged, match="index runs_by_job is missing"):
            check_database_file(path)
    else:
        assert check_database_file(path) == LATEST_VERSION
