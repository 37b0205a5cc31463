"""A database file with damaged pages (found by a new-user trial): SQLite says "database disk
image is malformed" only when it reads a damaged page. Every CLI command then exits 2 with one
line; the TUI opened it, showed an empty browser and a "database error" popup per read, and
"Not sent" on Enter. It now leaves as the CLI does, whenever the damage is found: with the one
line on the terminal and exit status 2, writing nothing to the file."""

from __future__ import annotations

import asyncio
import random
import sqlite3
from pathlib import Path

import pytest

from runtime import errors
from runtime.store.sqlite import SqliteStore
from tests.tui.helpers import finish_run, open_runtime, wait_for_browser, wait_until
from tui.app import AgentTuiApp, Launch, program_app

JOBS = 6


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No user configuration and no API key: the demo model, nothing read from the machine."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "home" / ".config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "home" / ".local" / "share"))
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)


async def _database_with_jobs(db_path: Path, workspace: Path) -> None:
    """A few finished jobs with long enough answers to fill several pages of messages; closed,
    so everything is in the database file itself (no write-ahead log left)."""
    runtime = await open_runtime(db_path, workspace)
    try:
        for n in range(JOBS):
            run = await runtime.start(f"task {n}: " + "summarise this folder " * 80)
            await finish_run(runtime, run.id)
    finally:
        await runtime.close()
    wal = db_path.with_name(db_path.name + "-wal")
    assert not wal.exists() or wal.stat().st_size == 0


def _damage(db_path: Path, tables: tuple[str, ...]) -> list[int]:
    """Overwrite every page of ``tables``' b-trees with random bytes (``dbstat`` lists them; a
    SQLite built without it: their root pages); the pages."""
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        (page_size,) = conn.execute("PRAGMA page_size").fetchone()
        marks = ",".join("?" * len(tables))
        try:
            query = f"SELECT DISTINCT pageno FROM dbstat WHERE name IN ({marks})"
            pages = [page for (page,) in conn.execute(query, tables)]
        except sqlite3.OperationalError:  # no dbstat
            query = f"SELECT rootpage FROM sqlite_master WHERE type = 'table' AND name IN ({marks})"
            pages = [page for (page,) in conn.execute(query, tables)]
    finally:
        conn.close()
    noise = random.Random(1)
    with db_path.open("r+b") as file:
        for page in pages:
            file.seek((page - 1) * page_size)
            file.write(noise.randbytes(page_size))
    return pages


def _file_state(db_path: Path) -> tuple[bytes, int]:
    return db_path.read_bytes(), db_path.stat().st_mtime_ns


async def _until_it_ends(app: AgentTuiApp, *keys: str) -> None:
    """Run the program's app; once its browser shows the jobs (when it gets that far), press
    ``keys``; return when the app has ended by itself."""
    async with app.run_test(size=(120, 40)) as pilot:
        if keys:
            await wait_for_browser(pilot, app)
            await pilot.press(*keys)
        await wait_until(pilot, lambda: not app.is_running, timeout=30)


def _said_damaged(app: AgentTuiApp, db_path: Path) -> None:
    assert app.return_code == 2
    assert app.exit_error == (
        f"agent-tui: error: {db_path}: the database file is damaged (database disk image is"
        " malformed); nothing more is written to it"
    )


async def test_opening_a_job_whose_messages_are_on_damaged_pages_ends_the_app_as_the_cli_does(
    db_path: Path, workspace: Path
) -> None:
    await _database_with_jobs(db_path, workspace)
    assert _damage(db_path, ("messages",))
    before = _file_state(db_path)

    app = program_app(db_path, workspace, Launch(model="demo:instant"))
    await _until_it_ends(app, "enter")  # the browser's first job: its transcript is read

    _said_damaged(app, db_path)
    assert _file_state(db_path) == before  # not a byte written, not even touched


async def test_a_database_whose_jobs_and_runs_are_on_damaged_pages_ends_the_app_at_open(
    db_path: Path, workspace: Path
) -> None:
    await _database_with_jobs(db_path, workspace)
    assert _damage(db_path, ("jobs", "runs"))
    before = _file_state(db_path)

    app = program_app(db_path, workspace, Launch(model="demo:instant"))
    await _until_it_ends(app)  # no key pressed: opening it reads them

    _said_damaged(app, db_path)
    assert _file_state(db_path) == before


async def test_a_task_sent_to_a_damaged_database_ends_the_app_and_creates_no_job(
    db_path: Path, workspace: Path
) -> None:
    """Enter said "Not sent … malformed" and the app went on. The damage is found when the new
    run's message is written (what was written before it, the composer's draft, was fine):
    that transaction rolls back, and the store writes nothing after it."""
    await _database_with_jobs(db_path, workspace)
    _damage(db_path, ("messages",))

    app = program_app(db_path, workspace, Launch(model="demo:instant"))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: app.runtime is not None)
        await pilot.press(*"hello", "enter")
        await wait_until(pilot, lambda: not app.is_running, timeout=30)

    _said_damaged(app, db_path)
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (JOBS,)
        assert conn.execute("SELECT count(*) FROM runs").fetchone() == (JOBS,)
    finally:
        conn.close()


async def test_a_store_that_found_its_file_damaged_refuses_every_write_and_tells_its_listeners(
    db_path: Path, workspace: Path
) -> None:
    await _database_with_jobs(db_path, workspace)
    _damage(db_path, ("messages",))
    told: list[errors.DatabaseCorrupt] = []
    store = SqliteStore(db_path)
    await store.open()
    try:
        store.on_damaged(told.append)
        [job] = (await store.list_jobs(limit=1)).items  # healthy pages: read as ever
        [run] = await store.job_runs(job.id)
        with pytest.raises(errors.DatabaseCorrupt) as found:
            await store.list_messages(run.id)
        assert told == [found.value]  # once, before the read raised it
        assert found.value.code == "database_corrupt"
        assert isinstance(found.value, errors.DatabaseError)  # the CLI's exit status 2
        before = _file_state(db_path)
        with pytest.raises(errors.DatabaseCorrupt):
            await store.save_composer_draft(job.id, "a draft", writer="test")
        late: list[errors.DatabaseCorrupt] = []
        store.on_damaged(late.append)  # a listener that comes later hears at once
        assert late == [found.value]
    finally:
        await store.close()
    assert _file_state(db_path) == before  # nor does closing index or checkpoint anything
    wal = db_path.with_name(db_path.name + "-wal")
    assert not wal.exists() or wal.stat().st_size == 0


@pytest.mark.parametrize("command", [["show", "RUN"], ["export", "JOB"]])
def test_the_cli_says_the_same_line_with_exit_status_2(
    db_path: Path, workspace: Path, command: list[str]
) -> None:
    asyncio.run(_database_with_jobs(db_path, workspace))
    conn = sqlite3.connect(db_path)
    job_id, run_id = conn.execute("SELECT job_id, id FROM runs LIMIT 1").fetchone()
    conn.close()
    _damage(db_path, ("messages",))
    from tests.cli.harness import Cli

    cli = Cli.create(db_path.parent / "cli", workspace)
    cli.db = db_path
    names = {"RUN": run_id, "JOB": job_id}
    result = cli.run(*(names.get(part, part) for part in command))
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        f"agent-tui: error: {db_path}: the database file is damaged (database disk image is"
        " malformed); nothing more is written to it\n"
    )
