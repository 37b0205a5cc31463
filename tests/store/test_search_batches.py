"""Search indexes committed messages in batches (migration 8): what a search finds, what a
deletion does to messages not yet indexed, and an index that stays intact throughout."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from runtime.store.migrations import LATEST_VERSION, migrate
from runtime.store.sqlite import SqliteStore
from runtime.store.stored_content import register_functions
from tests.store.helpers import assistant, running_run


def _integrity_ok(path: Path) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    register_functions(conn)  # the index reads its text through the store's function
    try:
        # Raises "database disk image is malformed" when the index and the messages differ.
        conn.execute("INSERT INTO messages_fts (messages_fts, rank) VALUES ('integrity-check', 1)")
    finally:
        conn.close()


def _indexed(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("SELECT count(*) FROM messages_fts_docsize").fetchone()[0])
    finally:
        conn.close()


async def test_a_message_is_found_by_the_first_search_after_its_commit(tmp_path: Path) -> None:
    path = tmp_path / "agent.db"
    async with SqliteStore(path) as store:
        run, token = await running_run(store)
        await store.commit_message(run.id, token=token, message=assistant("the quokka smiles"))
        assert _indexed(path) == 0  # the commit itself did not touch the index
        [hit] = await store.search_messages("quokka")
        assert hit.run_id == run.id and "quokka" in hit.snippet
        await store.commit_message(run.id, token=token, message=assistant("a second quokka"))
        assert len(await store.search_messages("quokka")) == 2
    _integrity_ok(path)


async def test_deleting_a_job_whose_messages_are_not_indexed_yet_keeps_the_index_intact(
    tmp_path: Path,
) -> None:
    path = tmp_path / "agent.db"
    async with SqliteStore(path) as store:
        kept, kept_token = await running_run(store)
        await store.commit_message(kept.id, token=kept_token, message=assistant("indexed wombat"))
        assert len(await store.search_messages("wombat")) == 1
        gone, gone_token = await running_run(store)
        await store.commit_message(gone.id, token=gone_token, message=assistant("lost wombat"))
        await store.cancel_run(gone.id)
        await store.set_job_archived(gone.job_id, True)
        await store.delete_job(gone.job_id)
        # A new message takes the row number the deleted one had; it is indexed all the same.
        await store.commit_message(kept.id, token=kept_token, message=assistant("late wombat"))
        hits = await store.search_messages("wombat")
        assert sorted(h.snippet for h in hits) == ["indexed «wombat»", "late «wombat»"]
    _integrity_ok(path)


async def test_closing_the_store_indexes_what_is_left(tmp_path: Path) -> None:
    path = tmp_path / "agent.db"
    async with SqliteStore(path) as store:
        run, token = await running_run(store)
        for word in ("one", "two", "three"):
            await store.commit_message(run.id, token=token, message=assistant(word))
        assert _indexed(path) == 0
        messages = len(await store.list_messages(run.id))
    assert messages == 4 and _indexed(path) == messages  # the prompt and three answers
    _integrity_ok(path)


async def test_a_version_7_database_keeps_its_index_and_indexes_new_messages(
    tmp_path: Path,
) -> None:
    path = tmp_path / "agent.db"
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, path=str(path), upto=7)
    # Messages written under version 7, each indexed by its insert trigger.
    conn.execute(
        "INSERT INTO jobs (id, title, workspace, agent, created_at, updated_at)"
        " VALUES ('job1', 'Old job', '/w', 'default', 1.0, 2.0)"
    )
    conn.execute(
        "INSERT INTO runs (id, job_id, agent, model, state, revision, input, max_steps,"
        " created_at, updated_at) VALUES ('run1', 'job1', 'default', 'demo', 'completed', 3,"
        " 'x', 50, 1.0, 2.0)"
    )
    for position, text in enumerate(["old platypus", "older platypus"]):
        conn.execute(
            "INSERT INTO messages (id, run_id, job_id, position, role, content, created_at)"
            " VALUES (?, 'run1', 'job1', ?, 'user', json_array(json_object('type', 'text',"
            " 'text', ?)), 1.0)",
            (f"m{position}", position, text),
        )
    conn.close()
    assert _indexed(path) == 2
    async with SqliteStore(path) as store:
        assert (await store.get_run("run1")).revision == 3
        run, token = await running_run(store)
        await store.commit_message(run.id, token=token, message=assistant("new platypus"))
        hits = await store.search_messages("platypus")
        assert {"m0", "m1"} < {h.message_id for h in hits} and len(hits) == 3
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == LATEST_VERSION
    conn.close()
    _integrity_ok(path)


async def test_a_store_opened_read_only_writes_nothing_when_it_searches_or_closes(
    tmp_path: Path,
) -> None:
    """DESIGN §4.4: a process that only looks (``show``, ``export``, ``runs``) never writes. A
    review found such a store indexing the writer's new messages on its close and at a search,
    taking the write lock the process working the runs may be waiting for."""
    path = tmp_path / "agent.db"
    async with SqliteStore(path) as writer:
        run, token = await running_run(writer)
        await writer.commit_message(run.id, token=token, message=assistant("the quokka smiles"))
        watcher = sqlite3.connect(path, isolation_level=None)
        try:
            version = watcher.execute("PRAGMA data_version").fetchone()[0]
            async with SqliteStore(path, read_only=True) as reader:
                assert (await reader.get_run(run.id)).id == run.id
                assert await reader.search_messages("quokka") == []  # not indexed by anyone yet
            # No other connection committed anything meanwhile.
            assert watcher.execute("PRAGMA data_version").fetchone()[0] == version
            assert _indexed(path) == 0
        finally:
            watcher.close()
        [hit] = await writer.search_messages("quokka")  # the writer indexes, as before
        assert hit.run_id == run.id
    _integrity_ok(path)
