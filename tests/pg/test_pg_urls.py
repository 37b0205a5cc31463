"""PostgreSQL URLs as agent-tui shows and checks them: never with their password, and a port
asyncpg could not parse refused in one line before any connection is tried."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.compose import open_store
from runtime.errors import ConfigError
from runtime.store.pg_passwords import missing_password_hint
from runtime.store.postgres import PostgresStore, redacted


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://me:hunter2@db:5432/agents", "postgresql://me:***@db:5432/agents"),
        ("postgresql://me@db/agents", "postgresql://me@db/agents"),
        (
            "postgresql://me:hunter2@[::1]:5432/a?schema=s",
            "postgresql://me:***@[::1]:5432/a?schema=s",
        ),
        ("postgresql://me:hunter2@db:notaport/agents", "postgresql://me:***@db:notaport/agents"),
        ("postgresql://me:hunter2@db1:5432,db2/agents", "postgresql://me:***@db1:5432,db2/agents"),
        # asyncpg takes the password as a parameter too
        ("postgresql://me@db/agents?password=hunter2", "postgresql://me@db/agents?password=***"),
        (
            "postgresql://me@db/agents?sslmode=require&password=hunter2&schema=s",
            "postgresql://me@db/agents?sslmode=require&password=***&schema=s",
        ),
        # a password whose #, ? or / was not percent-encoded ends the host part early
        ("postgresql://me:hun#ter2@db/agents", "postgresql://me:***@db/agents"),
        ("postgresql://me:hun?ter2@db:5432/agents", "postgresql://me:***@db:5432/agents"),
        ("postgresql://me:12/ter2@db/agents", "postgresql://me:***@db/agents"),
    ],
)
def test_a_url_is_shown_without_its_password_even_when_it_does_not_parse(
    url: str, shown: str
) -> None:
    assert redacted(url) == shown


@pytest.mark.parametrize("port", ["notaport", "99999", "5432x"])
def test_a_store_refuses_a_port_that_is_not_a_port_number_naming_the_url_without_password(
    port: str,
) -> None:
    with pytest.raises(ConfigError) as refused:
        PostgresStore(f"postgresql://me:hunter2@db:{port}/agents")
    assert f"postgresql://me:***@db:{port}/agents" in refused.value.message
    assert "hunter2" not in refused.value.message


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://me@db:5432/agents",
        "postgresql://db1:5432,db2:5433/agents",  # several hosts, as asyncpg takes them
        "postgresql://[::1]/agents",
        "postgresql:///agents?host=/run/postgresql",
    ],
)
def test_a_store_takes_every_url_form_asyncpg_parses(url: str) -> None:
    PostgresStore(url)


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://me:hun#ter2@db/agents",
        "postgresql://me:hun?ter2@db/agents",
        "postgresql://me:hun/ter2@db/agents",
        "postgresql://me:hunter2@[::1/agents",
    ],
)
def test_a_store_refuses_a_url_asyncpg_cannot_parse_without_showing_its_password(
    url: str,
) -> None:
    with pytest.raises(ConfigError) as refused:
        PostgresStore(url)
    assert "postgresql://me:***@" in refused.value.message
    assert "hun" not in refused.value.message and "ter2" not in refused.value.message


@pytest.mark.parametrize("scheme", ["PostgreSQL", "POSTGRES", "Postgres"])
def test_a_url_whose_scheme_is_not_in_lower_case_opens_postgresql_not_an_sqlite_file(
    scheme: str,
) -> None:
    """URL schemes are case-insensitive (RFC 3986): ``Runtime.open(db_path="PostgreSQL://…")``
    took it for an SQLite path and made the folders ``PostgreSQL:/me@db`` and a database."""
    assert isinstance(open_store(f"{scheme}://me@db:5432/agents"), PostgresStore)


@pytest.mark.parametrize(
    ("url", "env", "pgpass", "given"),
    [
        ("postgresql://me@db/agents", {}, None, False),
        ("postgresql://me:secret@db/agents", {}, None, True),
        ("postgresql://me:@db/agents", {}, None, False),  # empty: asyncpg sends none
        ("postgresql://me@db/agents?password=secret", {}, None, True),
        ("postgresql://me@db/agents", {"PGPASSWORD": "secret"}, None, True),
        ("postgresql://me@db/agents", {}, "db:5432:agents:me:secret", True),
        ("postgresql://me@db:5433/agents", {}, "db:5432:agents:me:secret", False),
        ("postgresql://me@db/agents", {}, "db:5432:agents:you:secret", False),
        ("postgresql://me@db/agents", {}, "db:5432:other:me:secret", False),
        ("postgresql://me@db1,db2:6000/agents", {}, "db2:6000:*:me:secret", True),
        (
            "postgresql:///agents?host=/run/postgresql&user=me",
            {},
            "localhost:*:agents:me:secret",
            True,
        ),
        ("postgresql://me@db", {}, "*:*:me:me:secret", True),  # the database is the user's name
        ("postgresql://me@[::1]/agents", {}, "\\:\\:1:5432:agents:me:secret", False),  # as asyncpg
    ],
)
def test_a_refused_password_is_said_to_be_missing_only_where_asyncpg_found_none(
    tmp_path: Path, url: str, env: dict[str, str], pgpass: str | None, given: bool
) -> None:
    """The server's refusal reads the same for no password and a wrong one; where asyncpg
    found none (URL, PGPASSWORD, the password file's lines), the hint says where to put one."""
    passfile = tmp_path / "pgpass"
    if pgpass is not None:
        passfile.write_text(f"# a comment\n{pgpass}\n")
        passfile.chmod(0o600)
    hint = missing_password_hint(url, {**env, "PGPASSFILE": str(passfile)})
    assert (hint is None) == given, hint
    if hint is not None:
        assert "put it in PGPASSWORD or ~/.pgpass" in hint and "secret" not in hint
