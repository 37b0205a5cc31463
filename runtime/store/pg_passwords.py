"""Where a PostgreSQL password comes from, to say what to do when the server asks for one and
none came. asyncpg looks where libpq does: the URL (``USER:PASSWORD@``, ``?password=``), then
``PGPASSWORD``, then the password file (``?passfile=``, else ``PGPASSFILE``, else
``~/.pgpass``) for a line naming the host, port, database and user (``*`` for any), a file
that others may read being ignored. The server's refusal is the same whether no password or a
wrong one was sent ("password authentication failed for user …"), so only this tells them
apart. Nothing here reads or returns a password's value beyond comparing the other fields."""

from __future__ import annotations

import getpass
import re
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlsplit

__all__ = ["missing_password_hint"]

_FIELD_SEPARATOR = re.compile(r"(?<!\\):")


def missing_password_hint(dsn: str, env: Mapping[str, str]) -> str | None:
    """What to do, in one clause, when the server refused ``dsn`` for its password and none
    was given anywhere asyncpg looks; None when one was (it was wrong: the server said so)."""
    try:
        parts = urlsplit(dsn)
    except ValueError:  # refused before any connection was tried (``check_url``)
        return None
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    user_info, at, hosts_part = parts.netloc.partition("@")  # the first @, as asyncpg reads it
    if not at:
        user_info, hosts_part = "", parts.netloc
    name, _, password = user_info.partition(":")
    if password or query.get("password") or env.get("PGPASSWORD"):
        return None
    if "service" in query or env.get("PGSERVICE"):
        return None  # a service file may hold one: not looked into here
    user = unquote(name) or query.get("user") or env.get("PGUSER") or getpass.getuser()
    database = (
        unquote(parts.path.lstrip("/"))
        or query.get("dbname")
        or query.get("database")
        or env.get("PGDATABASE")
        or user
    )
    passfile = _password_file(query, env)
    supply = (
        "no password was given: put it in PGPASSWORD or ~/.pgpass "
        "(HOST:PORT:DATABASE:USER:PASSWORD, readable by you alone), or in the URL (USER:PASSWORD@)"
    )
    try:
        if passfile is None or not passfile.is_file():
            return supply
        if passfile.stat().st_mode & 0o077:
            return f"{supply}; {passfile} is not read, as others may read it (chmod 600 {passfile})"
        lines = passfile.read_text(errors="replace").splitlines()
    except OSError:
        return supply
    targets = _hosts_and_ports(hosts_part, query, env)
    for line in lines:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        # Split as asyncpg splits it (which keeps a field's escapes, where libpq drops them).
        line = line.replace("\\\\", "\n")
        fields = [f.replace("\n", "\\\\") for f in _FIELD_SEPARATOR.split(line, maxsplit=4)]
        if len(fields) < 5:
            continue
        host, port, db, name = fields[:4]
        if (
            any(
                host in ("*", target_host) and port in ("*", target_port)
                for target_host, target_port in targets
            )
            and db in ("*", database)
            and name in ("*", user)
        ):
            return None
    return supply


def _password_file(query: Mapping[str, str], env: Mapping[str, str]) -> Path | None:
    given = query.get("passfile") or env.get("PGPASSFILE")
    if given:
        return Path(given)
    try:
        return Path.home() / ".pgpass"
    except (RuntimeError, KeyError):
        return None


def _hosts_and_ports(
    hosts_part: str, query: Mapping[str, str], env: Mapping[str, str]
) -> list[tuple[str, str]]:
    """Each host and its port as the password file names them (a socket folder is
    ``localhost``; the port 5432 unless one is given)."""
    default_port = query.get("port") or env.get("PGPORT") or "5432"
    found: list[tuple[str, str]] = []
    for spec in hosts_part.split(",") if hosts_part else []:
        if spec.startswith("["):
            host, _, rest = spec[1:].partition("]")
            port = rest.removeprefix(":")
        else:
            host, _, port = spec.partition(":")
        found.append((unquote(host), port or default_port))
    if not any(host for host, _ in found):
        given = query.get("host") or env.get("PGHOST") or "localhost"
        found = [(host, default_port) for host in given.split(",")]
    return [("localhost" if host.startswith("/") else host, port) for host, port in found]
