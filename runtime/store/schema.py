"""The schema check: is a database's schema exactly what its ``user_version`` promises?

The expected schema is not written down a second time: it is what the migrations produce when
applied to an empty in-memory database up to that version, so the check follows every future
migration by itself. A database is compared table by table (its columns, from
``pragma table_info``), index by index (table and columns, from ``pragma index_info``), and
trigger and view by their SQL. Objects the database has beyond the expected ones are allowed
(an index a person added); anything missing or different is damage.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass, field
from functools import cache

__all__ = ["SchemaShape", "expected_shape", "schema_problems", "shape_of"]

Column = tuple[str, str, int, int]
"""name, declared type, not null, primary-key position."""


@dataclass(frozen=True)
class SchemaShape:
    tables: dict[str, tuple[Column, ...]] = field(default_factory=dict)
    indexes: dict[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict)
    """index name → (table, columns); automatic indexes of UNIQUE constraints included."""
    sql_objects: dict[str, tuple[str, str]] = field(default_factory=dict)
    """trigger or view name → (type, SQL with whitespace folded)."""


def _fold(sql: str | None) -> str:
    return re.sub(r"\s+", " ", sql or "").strip()


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def shape_of(conn: sqlite3.Connection) -> SchemaShape:
    """The schema of ``conn``'s main database, read without writing."""
    shape = SchemaShape()
    objects = conn.execute(
        "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_stat%'"
        " ORDER BY name"
    ).fetchall()
    for kind, name, table, sql in objects:
        if kind == "table":
            columns = conn.execute(f"PRAGMA table_info({_quoted(name)})").fetchall()
            shape.tables[name] = tuple(
                (str(c[1]), str(c[2]).upper(), int(c[3]), int(c[5])) for c in columns
            )
        elif kind == "index":
            columns = conn.execute(f"PRAGMA index_info({_quoted(name)})").fetchall()
            shape.indexes[name] = (str(table), tuple(str(c[2]) for c in columns))
        elif kind in ("trigger", "view"):
            shape.sql_objects[name] = (str(kind), _fold(sql))
    return shape


@cache
def expected_shape(version: int) -> SchemaShape:
    """The schema the migrations give a new database at ``version``."""
    from runtime.store.migrations import migrate

    conn = sqlite3.connect(":memory:", isolation_level=None)
    try:
        migrate(conn, path=":memory:", upto=version)
        return shape_of(conn)
    finally:
        conn.close()


def schema_problems(actual: SchemaShape, expected: SchemaShape) -> list[str]:
    """What ``actual`` lacks or has changed compared with ``expected``, one phrase each."""
    problems: list[str] = []
    for name, columns in expected.tables.items():
        found = actual.tables.get(name)
        if found is None:
            problems.append(f"table {name} is missing")
            continue
        have = {c[0]: c for c in found}
        for column in columns:
            if column[0] not in have:
                problems.append(f"column {name}.{column[0]} is missing")
            elif have[column[0]] != column:
                problems.append(f"column {name}.{column[0]} has changed")
    for name, index in expected.indexes.items():
        found_index = actual.indexes.get(name)
        if found_index is None:
            problems.append(f"index {name} is missing")
        elif found_index != index:
            problems.append(f"index {name} has changed")
    for name, (kind, sql) in expected.sql_objects.items():
        found_sql = actual.sql_objects.get(name)
        if found_sql is None:
            problems.append(f"{kind} {name} is missing")
        elif found_sql != (kind, sql):
            problems.append(f"{kind} {name} has changed")
    return problems
