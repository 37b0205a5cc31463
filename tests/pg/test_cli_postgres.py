"""The command line on PostgreSQL: ``--db postgresql://…`` and ``AGENT_TUI_DB`` choose the
store; a run started by one command is answered and finished by later ones."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from runtime.providers.demo import NOTES_FILE
from tests.cli.harness import Cli, boundary_of, json_lines
from tests.pg_cluster import PgCluster
from tests.workers.procs import Proc

pytestmark = pytest.mark.slow


def _cli(tmp_path: Path) -> Cli:
    workspace = tmp_path / "project"
    workspace.mkdir()
    (workspace / "README.md").write_text("# A project\n\nIt parses things.\n")
    return Cli.create(tmp_path, workspace)


async def test_a_run_on_postgresql_stops_at_its_question_and_respond_finishes_it(
    pg_database: str, tmp_path: Path
) -> None:
    cli = _cli(tmp_path)
    where = ("--db", pg_database, "--workspace", str(cli.workspace))

    started = cli.run(
        *where,
        "run",
        "summarise this folder",
        "--json",
        "--model",
        "demo:instant",
        global_options=False,
    )
    assert started.returncode == 3, started.stderr
    run_id = boundary_of(json_lines(started.stdout))["run_id"]

    cli.env["AGENT_TUI_DB"] = pg_database  # the environment chooses it as well
    answered = cli.run(
        "--workspace", str(cli.workspace), "respond", run_id, "1", "--json", global_options=False
    )
    assert answered.returncode == 3, answered.stderr
    approved = cli.run(
        "--workspace",
        str(cli.workspace),
        "respond",
        run_id,
        "allow",
        "--json",
        global_options=False,
    )
    assert approved.returncode == 0, approved.stderr
    assert boundary_of(json_lines(approved.stdout))["state"] == "completed"
    assert (cli.workspace / NOTES_FILE).exists()
    assert not cli.db.exists()  # no SQLite file was created on the side

    conn = await asyncpg.connect(pg_database)
    try:
        state = await conn.fetchval("SELECT state FROM agent_tui.runs WHERE id = $1", run_id)
    finally:
        await conn.close()
    assert state == "completed"


def test_an_unreachable_postgresql_url_is_one_clear_line(tmp_path: Path) -> None:
    cli = _cli(tmp_path)
    url = "postgresql://someone:secret@127.0.0.1:1/nothing"
    result = cli.run("--db", url, "--workspace", str(cli.workspace), "runs", global_options=False)
    assert result.returncode != 0
    assert result.stderr.startswith("agent-tui: error:")
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr
    assert "secret" not in result.stderr


@pytest.mark.parametrize(
    ("scheme", "source"), [("PostgreSQL", "--db"), ("POSTGRES", "AGENT_TUI_DB")]
)
def test_a_database_url_whose_scheme_is_in_capitals_opens_postgresql(
    pg_database: str, tmp_path: Path, scheme: str, source: str
) -> None:
    """URL schemes are case-insensitive (RFC 3986); ``--db PostgreSQL://…`` was refused as
    "not a database agent-tui can open"."""
    cli = _cli(tmp_path)
    url = scheme + pg_database.removeprefix("postgresql")
    options = ["--workspace", str(cli.workspace)]
    if source == "--db":
        options = ["--db", url, *options]
    else:
        cli.env["AGENT_TUI_DB"] = url
    queued = cli.run(*options, "run", "--detach", "hello", global_options=False)
    assert queued.returncode == 0, queued.stderr
    run_id = queued.stdout.strip()
    listed = cli.run("--db", pg_database, "runs", "--json", global_options=False)
    assert listed.returncode == 0, listed.stderr
    assert run_id in listed.stdout
    assert not cli.db.exists()  # no SQLite file was created on the side


def test_a_worker_on_postgresql_executes_what_attached_clients_create_and_answer(
    pg_database: str, tmp_path: Path
) -> None:
    """``agent-tui worker`` and the clients' ``run --attach`` / ``respond`` / ``events --follow
    --consumer`` all reach PostgreSQL through ``--db URL``: the worker executes every leg, the
    clients hold no lease, and the consumer's cursor is saved in the database."""
    import dataclasses
    import signal

    from tests.cli.harness import LineStream, finish
    from tests.workers.procs import query, worker

    base = _cli(tmp_path)
    url: Any = pg_database
    cli = dataclasses.replace(base, db=url)  # every command gets --db URL
    executor = worker(cli, "worker")
    try:
        started_at = executor.wait_for(lambda i: i["kind"] == "worker_started", timeout=60)
        owner_id = executor.items[started_at]["owner_id"]
        started = cli.run("run", "--attach", "--json", "--model", "demo:instant", "look around")
        assert started.returncode == 3, started.stderr
        run_id = boundary_of(json_lines(started.stdout))["run_id"]
        asked = cli.run("respond", run_id, "1", "--json")
        assert asked.returncode == 3, asked.stderr
        finished = cli.run("respond", run_id, "allow", "--json")
        assert finished.returncode == 0, finished.stderr
        assert boundary_of(json_lines(finished.stdout))["state"] == "completed"
        assert (cli.workspace / NOTES_FILE).exists()
        claims = [i["run_id"] for i in executor.items if i["kind"] == "worker_claimed"]
        assert claims == [run_id] * 3
        assert {row[0] for row in query(url, "SELECT owner_id FROM owners")} == {owner_id}
        [(detached, state)] = query(url, "SELECT detached, state FROM runs WHERE id = ?", run_id)
        assert detached is True and state == "completed"

        [(newest,)] = query(url, "SELECT max(seq) FROM events")
        consumer = cli.spawn("events", "--follow", "--consumer", "bot", "--json")
        seen = LineStream(consumer).json_until(lambda item, _: item["seq"] == newest, timeout=60)
        consumer.send_signal(signal.SIGTERM)
        code, _, err = finish(consumer, timeout=60)
        assert code == 0, err
        assert [item["seq"] for item in seen] == list(range(1, newest + 1))
        cursor = query(url, "SELECT cursor FROM consumers WHERE consumer_id = 'bot'")
        assert cursor == [(newest,)]

        executor.signal(signal.SIGTERM)
        assert executor.finish(timeout=60) == 0, executor.stderr()
    finally:
        executor.kill()


@pytest.mark.parametrize("where", ["user part", "parameter"])
def test_a_worker_names_the_database_it_serves_without_the_password(
    pg_database: str, tmp_path: Path, where: str
) -> None:
    """Found by a new-user trial: the worker's first line named only its folders, so one
    started without ``--db`` (serving the default SQLite file while runs were queued on
    PostgreSQL) looked the same as the right one. (The test cluster trusts every connection,
    so the password in the URL is accepted and ignored.) A password given as a parameter
    (``?password=``, which asyncpg takes too) was shown as it is."""
    import dataclasses
    import signal

    from tests.workers.procs import worker

    base = _cli(tmp_path)
    if where == "user part":
        with_password = pg_database.replace(
            "postgresql://agent_tui@", "postgresql://agent_tui:hunter2@"
        )
        shown = pg_database.replace("postgresql://agent_tui@", "postgresql://agent_tui:***@")
    else:
        assert "?" not in pg_database
        with_password = f"{pg_database}?password=hunter2"
        shown = f"{pg_database}?password=***"
    assert "hunter2" in with_password
    url: Any = with_password
    executor = worker(dataclasses.replace(base, db=url), "worker")
    try:
        started = executor.items[
            executor.wait_for(lambda i: i["kind"] == "worker_started", timeout=60)
        ]
        assert started["database"] == shown
        assert f"executing queued runs of {shown} under {base.workspace}" in started["text"]
        executor.signal(signal.SIGTERM)
        assert executor.finish(timeout=60) == 0, executor.stderr()
    finally:
        executor.kill()
    assert "hunter2" not in json.dumps(executor.items) + executor.stderr()


def test_a_worker_waits_out_a_server_restart_then_executes_what_is_queued(
    own_cluster: PgCluster, tmp_path: Path
) -> None:
    """Found by a new-user trial: stopping PostgreSQL (a restart, an upgrade, a failover)
    ended every worker ("agent-tui: error: …: Connect call failed", exit 2), and a worker's
    log took a traceback twice a second while the server was down. Now the worker says once
    that it cannot reach the database, looks again, says when it answers, and goes on; the
    log has one traceback per background loop for the whole outage."""
    import signal

    from tests.workers.procs import query

    cli, url, executor = _worker_on(own_cluster, tmp_path)
    log_file = _log_file(cli)
    try:
        own_cluster.stop()
        down = executor.wait_for(lambda i: i["kind"] == "worker_unreachable", timeout=60)
        assert "cannot reach the database" in executor.items[down]["text"]
        # Down until the slowest background loop (recovery, every third of the lease) failed
        # too: by then the events loop (every poll interval) failed several times.
        _wait_in_log(cli, "recovery failed", "the recovery loop never met the outage")
        own_cluster.start()
        executor.wait_for(lambda i: i["kind"] == "worker_reconnected", timeout=60, start=down)

        queued = cli.run("run", "--detach", "--model", "demo:instant", "look around")
        assert queued.returncode == 0, queued.stderr
        run_id = queued.stdout.strip()
        executor.wait_for(
            lambda i: i["kind"] == "worker_released" and i.get("run_id") == run_id, timeout=60
        )
        assert query(url, "SELECT state FROM runs WHERE id = ?", run_id) == [("input_required",)]
        # Its lease is renewed again (the thread that renews it lived through the outage).
        [(renewed_at,)] = query(url, "SELECT heartbeat_at FROM owners")
        deadline = time.monotonic() + 60
        while query(url, "SELECT heartbeat_at FROM owners")[0][0] == renewed_at:
            assert time.monotonic() < deadline, "the lease is not renewed any more"
            time.sleep(0.1)
        executor.signal(signal.SIGTERM)
        assert executor.finish(timeout=60) == 0, executor.stderr()
    finally:
        executor.kill()
    assert "Traceback" not in executor.stderr()
    log = log_file.read_text()
    assert log.count("reading events failed") <= 1, log[-3000:]
    assert log.count("recovery failed") <= 1, log[-3000:]


def test_a_run_the_server_stopped_under_ends_failed_once_it_is_back_not_running_for_ever(
    own_cluster: PgCluster, tmp_path: Path
) -> None:
    """Found by a new-user trial: PostgreSQL stopped while a worker executed a run; the engine
    could not record the run's failure then, gave up, and the run read ``running`` under the
    live worker for as long as it lived (nothing recovers a live owner's run). Now the failure
    is recorded once the server is back, naming what happened, and the run can be retried."""
    import signal

    from tests.workers.procs import query

    cli, url, executor = _worker_on(own_cluster, tmp_path)
    try:
        run_id = _claimed_run(cli, executor)
        own_cluster.stop()
        # Down until the execution failed for it (its next write found no server).
        _wait_in_log(cli, "failed inside the engine", "the execution never met the outage")
        own_cluster.start()

        deadline = time.monotonic() + 60
        while (state := _state(url, run_id)) == "running":
            assert time.monotonic() < deadline, "the run reads running for ever"
            time.sleep(0.1)
        assert state == "failed"
        [(failure,)] = query(url, "SELECT failure FROM runs WHERE id = ?", run_id)
        assert "internal_error" in failure and "DatabaseUnreachable" in failure, failure
        executor.signal(signal.SIGTERM)
        assert executor.finish(timeout=60) == 0, executor.stderr()
    finally:
        executor.kill()


def test_a_worker_stopped_while_the_server_is_down_stops_without_waiting_out_its_drain(
    own_cluster: PgCluster, tmp_path: Path
) -> None:
    """A run failed by the outage keeps trying to record its failure; a worker asked to stop
    then waited for it until ``--drain-timeout`` ran out (120 s by default, past systemd's 90 s
    before SIGKILL). It stops now, and the run is left as a close leaves it (``running`` under
    an owner that is gone: recovered by the usual rules)."""
    import signal

    cli, url, executor = _worker_on(own_cluster, tmp_path, "--drain-timeout", "300")
    try:
        run_id = _claimed_run(cli, executor)
        own_cluster.stop()
        _wait_in_log(cli, "cannot record its failure yet", "the execution never met the outage")
        executor.signal(signal.SIGTERM)
        assert executor.finish(timeout=60) == 0, executor.stderr()
    finally:
        executor.kill()
    assert executor.items[-1]["kind"] == "worker_stopped"
    own_cluster.start()
    assert _state(url, run_id) == "running"  # as a close leaves it: recoverable


@pytest.mark.parametrize("consumer", [[], ["--consumer", "bot"]], ids=["plain", "consumer"])
def test_events_follow_waits_out_a_server_restart_and_goes_on_with_no_event_lost_or_repeated(
    own_cluster: PgCluster, tmp_path: Path, consumer: list[str]
) -> None:
    """Found by review: ``events --follow`` (with or without ``--consumer``) ended with exit
    2 when PostgreSQL restarted ("agent-tui: error: …: Connect call failed"), where a worker
    waits. Now it says once that it cannot reach the database, looks again, says when it
    answers, and prints what committed meanwhile and after, each event once."""
    import signal

    from tests.workers.procs import Proc, query

    cli, url = _cli_on(own_cluster, tmp_path)
    follower = Proc(
        cli.argv("events", "--follow", "--json", "--after", "0", *consumer), cli=cli, name="events"
    )
    try:
        _printed_up_to_the_newest(follower, url)
        own_cluster.stop()
        _said(follower, "cannot reach the database", "it never met the outage")
        own_cluster.start()
        _said(follower, "the database answers again", "it never reconnected")
        queued = cli.run("run", "--detach", "--model", "demo:instant", "look again")
        assert queued.returncode == 0, queued.stderr
        newest = _printed_up_to_the_newest(follower, url)
        follower.signal(signal.SIGTERM)
        assert follower.finish(timeout=60) == 0, follower.stderr()
    finally:
        follower.kill()
    assert [item["seq"] for item in follower.items] == list(range(1, newest + 1))
    if consumer:
        assert query(url, "SELECT cursor FROM consumers WHERE consumer_id = 'bot'") == [(newest,)]
    assert "Traceback" not in follower.stderr()


def test_events_follow_waiting_for_the_server_ends_at_ctrl_c(
    own_cluster: PgCluster, tmp_path: Path
) -> None:
    """Ctrl+C while it waits for the database ends it at once, as while it follows."""
    import signal

    from tests.workers.procs import Proc

    cli, url = _cli_on(own_cluster, tmp_path)
    follower = Proc(
        cli.argv("events", "--follow", "--json", "--after", "0", "--consumer", "bot"),
        cli=cli,
        name="events",
    )
    try:
        _printed_up_to_the_newest(follower, url)
        own_cluster.stop()
        _said(follower, "cannot reach the database", "it never met the outage")
        follower.signal(signal.SIGINT)
        assert follower.finish(timeout=30) == 0, follower.stderr()
    finally:
        follower.kill()
        own_cluster.start()


async def test_a_worker_whose_role_loses_its_permission_ends_with_one_line_naming_it(
    pg_database: str, tmp_path: Path
) -> None:
    """Found by review: a worker waited out any database error as an outage, saying "cannot
    reach the database (…: permission denied for table runs)" every 10 s, for ever. A refusal
    that would be the same next time ends the worker in one line naming it, exit status 2."""
    from tests.workers.procs import ended_on_a_refusal

    async with _worker_as_a_role(pg_database, tmp_path) as (_, admin, role, executor):
        await admin.execute(f'REVOKE ALL ON ALL TABLES IN SCHEMA agent_tui FROM "{role}"')
        ended_on_a_refusal(executor, "permission denied for table")


async def test_a_worker_the_server_has_no_connection_for_waits_until_it_has_one(
    pg_database: str, tmp_path: Path
) -> None:
    """A server that ended a worker's sessions and has no connection for it when it answers
    again (53300: every slot taken after a restart, or here the role's connection limit) is
    waited for like a server away, not taken for a refusal that ends the worker: once a
    connection is free it says the database answers again and takes the next run."""
    import signal

    async with _worker_as_a_role(pg_database, tmp_path) as (cli, admin, role, executor):
        await admin.execute(f'ALTER ROLE "{role}" CONNECTION LIMIT 0')
        await admin.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE usename = $1",
            role,
        )
        down = executor.wait_for(lambda i: i["kind"] == "worker_unreachable", timeout=60)
        # Refused for want of a connection (its events loop logs it), and still there.
        _wait_in_log(cli, "too many connections", "it was never refused a connection")
        assert executor.proc.poll() is None, executor.stderr()
        await admin.execute(f'ALTER ROLE "{role}" CONNECTION LIMIT -1')
        executor.wait_for(lambda i: i["kind"] == "worker_reconnected", timeout=60, start=down)
        queued = cli.run("--db", pg_database, "run", "--detach", "--model", "demo:instant", "hi")
        assert queued.returncode == 0, queued.stderr
        run_id = queued.stdout.strip()
        executor.wait_for(
            lambda i: i["kind"] == "worker_released" and i.get("run_id") == run_id, timeout=60
        )
        executor.signal(signal.SIGTERM)
        assert executor.finish(timeout=60) == 0, executor.stderr()


@contextlib.asynccontextmanager
async def _worker_as_a_role(
    pg_database: str, tmp_path: Path
) -> AsyncIterator[tuple[Cli, Any, str, Proc]]:
    """A worker on ``pg_database`` logged in as a role of its own (granted what a worker
    needs), once it executed a first run; with the CLI (as the tables' owner), an admin
    connection and the role's name."""
    import dataclasses

    from tests.workers.procs import worker

    cli = _cli(tmp_path)
    queued = cli.run("--db", pg_database, "run", "--detach", "--model", "demo:instant", "look")
    assert queued.returncode == 0, queued.stderr  # agent-tui's tables, made by their owner
    run_id = queued.stdout.strip()
    role = f"worker_{run_id[:12]}"
    admin = await asyncpg.connect(pg_database)
    executor = None
    try:
        await admin.execute(f'CREATE ROLE "{role}" LOGIN')
        await admin.execute(f'GRANT USAGE ON SCHEMA agent_tui TO "{role}"')
        await admin.execute(f'GRANT ALL ON ALL TABLES IN SCHEMA agent_tui TO "{role}"')
        await admin.execute(f'GRANT ALL ON ALL SEQUENCES IN SCHEMA agent_tui TO "{role}"')
        as_role: Any = pg_database.replace("postgresql://agent_tui@", f"postgresql://{role}@")
        executor = worker(dataclasses.replace(cli, db=as_role), "worker")
        executor.wait_for(
            lambda i: i["kind"] == "worker_released" and i.get("run_id") == run_id, timeout=60
        )
        yield cli, admin, role, executor
    finally:
        if executor is not None:
            executor.kill()
        await _drop_role(admin, role)


async def test_a_worker_back_from_a_restart_that_refuses_its_password_ends_saying_so(
    own_cluster: PgCluster, tmp_path: Path
) -> None:
    """Found by review: a worker waited out any database error as an outage. A server
    restarted after the worker's password was changed (a rotation) answered again refusing it,
    and the worker went on saying "cannot reach the database (…: password authentication
    failed …)" for ever. The restart is waited for; the refusal then ends the worker in one
    line naming it, exit status 2, and the password is not shown."""
    import dataclasses

    from tests.workers.procs import ended_on_a_refusal, worker

    await _role_with_a_password(own_cluster)
    url: Any = own_cluster.dsn().replace("agent_tui@", "secretive@")
    cli = dataclasses.replace(_cli(tmp_path), db=url)
    for name in ("PGPASSFILE", "PGSERVICE", "PGUSER", "PGDATABASE"):
        cli.env.pop(name, None)
    cli.env["PGPASSWORD"] = PASSWORD
    executor = worker(cli, "worker")
    try:
        executor.wait_for(lambda i: i["kind"] == "worker_started", timeout=60)
        admin = await asyncpg.connect(own_cluster.dsn())
        try:
            await admin.execute("ALTER ROLE secretive PASSWORD 'changed-meanwhile'")
        finally:
            await admin.close()
        own_cluster.stop()
        executor.wait_for(lambda i: i["kind"] == "worker_unreachable", timeout=60)
        own_cluster.start()
        line = ended_on_a_refusal(executor, 'password authentication failed for user "secretive"')
    finally:
        executor.kill()
    assert PASSWORD not in line + json.dumps(executor.items)


def _cli_on(own_cluster: PgCluster, tmp_path: Path) -> tuple[Cli, Any]:
    """A CLI on ``own_cluster``'s database, with a run queued there (tables and events)."""
    import dataclasses

    url: Any = own_cluster.dsn()
    cli = dataclasses.replace(_cli(tmp_path), db=url)
    queued = cli.run("run", "--detach", "--model", "demo:instant", "look around")
    assert queued.returncode == 0, queued.stderr
    return cli, url


def _printed_up_to_the_newest(follower: Any, url: str) -> int:
    """Until ``follower`` printed the newest event in the database; its seq."""
    from tests.workers.procs import query

    [(newest,)] = query(url, "SELECT max(seq) FROM events")
    follower.wait_for(lambda item: item["seq"] == newest, timeout=60)
    return int(newest)


def _said(follower: Any, text: str, problem: str, *, timeout: float = 60) -> None:
    """Until ``follower`` wrote ``text`` to its stderr, going on (an end fails at once)."""
    deadline = time.monotonic() + timeout
    while text not in follower.stderr():
        code = follower.proc.poll()
        assert code is None, f"{problem}: it ended ({code}): {follower.stderr()[-2000:]}"
        assert time.monotonic() < deadline, problem
        time.sleep(0.1)


PASSWORD = "Xy7-secret9"


async def _role_with_a_password(own_cluster: PgCluster) -> None:
    """Role ``secretive`` (a superuser), whose password ``PASSWORD`` the server asks for."""
    admin = await asyncpg.connect(own_cluster.dsn())
    try:
        await admin.execute(f"CREATE ROLE secretive LOGIN SUPERUSER PASSWORD '{PASSWORD}'")
        hba = own_cluster.data_dir / "pg_hba.conf"
        hba.write_text(f"host all secretive 127.0.0.1/32 scram-sha-256\n{hba.read_text()}")
        await admin.fetchval("SELECT pg_reload_conf()")
    finally:
        await admin.close()


async def _drop_role(admin: Any, role: str) -> None:
    """Drop ``role`` (after what it was granted) on the shared cluster; close ``admin``."""
    try:
        await admin.execute(f'DROP OWNED BY "{role}"')
        await admin.execute(f'DROP ROLE IF EXISTS "{role}"')
    finally:
        await admin.close()


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("nowhere", "no password was given: put it in PGPASSWORD or ~/.pgpass"),
        ("in a ~/.pgpass others may read", "is not read, as others may read it (chmod 600"),
        ("wrong, in PGPASSWORD", 'password authentication failed for user "secretive"'),
        ("in ~/.pgpass", "Database opens: yes"),
    ],
)
async def test_doctor_says_how_to_give_the_password_the_server_asks_for_when_none_was_given(
    own_cluster: PgCluster, tmp_path: Path, given: str, said: str
) -> None:
    """Found by review: with no password in the URL, PGPASSWORD or ~/.pgpass, doctor said
    only the server's "password authentication failed for user …", as for a wrong one. Now
    it says none was given and where to put it; a password is never printed."""
    await _role_with_a_password(own_cluster)
    cli = _cli(tmp_path)
    for name in ("PGPASSWORD", "PGPASSFILE", "PGSERVICE", "PGUSER", "PGDATABASE"):
        cli.env.pop(name, None)
    pgpass = Path(cli.env["HOME"]) / ".pgpass"
    if "pgpass" in given:
        pgpass.write_text(f"127.0.0.1:{own_cluster.port}:postgres:secretive:{PASSWORD}\n")
        pgpass.chmod(0o644 if "others" in given else 0o600)
    elif "PGPASSWORD" in given:
        cli.env["PGPASSWORD"] = "wrong-one"
    url = own_cluster.dsn().replace("agent_tui@", "secretive@")
    doctor = cli.run("--db", url, "--workspace", str(cli.workspace), "doctor", global_options=False)
    assert said in doctor.stdout, doctor.stdout
    [finding] = [
        line
        for line in doctor.stdout.splitlines()
        if line.startswith(("Runtime: error:", "Database opens:"))
    ]
    if given == "in ~/.pgpass":
        assert finding.startswith("Database opens: yes")
    else:
        assert finding.startswith(f"Runtime: error: {url}: cannot connect (password "), finding
        assert ("no password was given" in finding) == (given != "wrong, in PGPASSWORD")
        assert doctor.returncode == 1
    assert PASSWORD not in doctor.stdout + doctor.stderr
    assert "wrong-one" not in doctor.stdout + doctor.stderr


def _worker_on(own_cluster: PgCluster, tmp_path: Path, *options: str) -> tuple[Cli, Any, Any]:
    """A CLI on ``own_cluster``'s database, its URL, and a worker started on it (``options``
    added), once it said so."""
    import dataclasses

    from tests.workers.procs import worker

    url: Any = own_cluster.dsn()
    cli = dataclasses.replace(_cli(tmp_path), db=url)
    executor = worker(cli, "worker", *options)
    try:
        executor.wait_for(lambda i: i["kind"] == "worker_started", timeout=60)
    except BaseException:
        executor.kill()
        raise
    return cli, url, executor


def _claimed_run(cli: Cli, executor: Any) -> str:
    """A run queued for the worker and claimed by it: the demo model at its reading pace, so
    it streams (and saves drafts) for seconds."""
    queued = cli.run("run", "--detach", "--model", "demo", "look around")
    assert queued.returncode == 0, queued.stderr
    run_id = queued.stdout.strip()
    executor.wait_for(
        lambda i: i["kind"] == "worker_claimed" and i.get("run_id") == run_id, timeout=60
    )
    return run_id


def _log_file(cli: Cli) -> Path:
    return Path(cli.env["XDG_DATA_HOME"]) / "agent-tui" / "agent-tui.log"


def _wait_in_log(cli: Cli, text: str, problem: str, *, timeout: float = 60) -> None:
    """Until the CLI's log file holds ``text`` (``problem`` says what failed if it never does)."""
    log_file = _log_file(cli)
    deadline = time.monotonic() + timeout
    while text not in (log_file.read_text() if log_file.exists() else ""):
        assert time.monotonic() < deadline, problem
        time.sleep(0.1)


def _state(url: str, run_id: str) -> str:
    from tests.workers.procs import query

    [(state,)] = query(url, "SELECT state FROM runs WHERE id = ?", run_id)
    return str(state)


async def test_a_role_that_may_only_read_lists_and_shows_the_runs_of_a_team_database(
    pg_database: str, tmp_path: Path
) -> None:
    """Found by a new-user trial: every open ran ``CREATE SCHEMA IF NOT EXISTS`` (and the
    ledger's ``CREATE TABLE IF NOT EXISTS``) under the migration lock, so a team member with
    a SELECT-only role got "permission denied for database" from ``runs`` and ``show``. A
    database already at the latest schema is now only read on open; writing stays refused."""
    cli = _cli(tmp_path)
    where = ("--db", pg_database, "--workspace", str(cli.workspace))
    started = cli.run(
        *where, "run", "look around", "--json", "--model", "demo:instant", global_options=False
    )
    assert started.returncode == 3, started.stderr
    run_id = boundary_of(json_lines(started.stdout))["run_id"]

    viewer = f"viewer_{run_id[:12]}"
    admin = await asyncpg.connect(pg_database)
    try:
        await admin.execute(f'CREATE ROLE "{viewer}" LOGIN')
        await admin.execute(f'GRANT USAGE ON SCHEMA agent_tui TO "{viewer}"')
        await admin.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA agent_tui TO "{viewer}"')
        as_viewer = pg_database.replace("postgresql://agent_tui@", f"postgresql://{viewer}@")
        seen = ("--db", as_viewer, "--workspace", str(cli.workspace))

        listed = cli.run(*seen, "runs", global_options=False)
        assert listed.returncode == 0, listed.stderr
        assert run_id in listed.stdout
        shown = cli.run(*seen, "show", run_id, global_options=False)
        assert shown.returncode == 0, shown.stderr
        assert "input_required" in shown.stdout
        written = cli.run(*seen, "run", "--detach", "hello", global_options=False)
        assert written.returncode == 2
        assert "permission denied" in written.stderr
        assert "Traceback" not in written.stderr
    finally:
        await _drop_role(admin, viewer)


async def test_commands_that_only_look_create_nothing_in_a_database_agent_tui_never_set_up(
    pg_database: str, tmp_path: Path
) -> None:
    """Found by a new-user trial: `runs`, `show`, `events` and `doctor` on a fresh PostgreSQL
    database created agent-tui's schema and tables (a listing is not a first use), where on
    SQLite they create nothing and say so. Now they say there is nothing there yet, as on
    SQLite, and leave the database as it was; `run` sets it up."""
    cli = _cli(tmp_path)
    where = ("--db", pg_database, "--workspace", str(cli.workspace))

    listed = cli.run(*where, "runs", global_options=False)
    assert (listed.returncode, listed.stdout) == (0, "")
    assert listed.stderr == f"No agent-tui tables yet at {pg_database}.\n"
    events = cli.run(*where, "events", global_options=False)
    assert (events.returncode, events.stderr) == (0, listed.stderr)
    for command in (["show", "abc"], ["events", "--follow"]):
        refused = cli.run(*where, *command, global_options=False)
        assert refused.returncode == 2, (command, refused.stderr)
        assert refused.stderr == (
            f"agent-tui: error: there are no agent-tui tables at {pg_database} "
            "(check --db or AGENT_TUI_DB)\n"
        )
    doctor = cli.run(*where, "doctor", global_options=False)
    assert doctor.returncode == 0, doctor.stdout
    assert "no agent-tui tables yet (made on the first run)" in doctor.stdout

    conn = await asyncpg.connect(pg_database)
    try:
        schema = await conn.fetchval(
            "SELECT count(*) FROM pg_namespace WHERE nspname = 'agent_tui'"
        )
    finally:
        await conn.close()
    assert schema == 0

    queued = cli.run(*where, "run", "--detach", "hello", global_options=False)
    assert queued.returncode == 0, queued.stderr
    listed = cli.run(*where, "runs", global_options=False)
    assert listed.returncode == 0 and queued.stdout.strip() in listed.stdout
