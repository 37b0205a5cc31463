"""Blobs (stored once by content) and archiving in the SQLite store, on a real file."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from runtime.errors import ConflictError, NotFoundError
from runtime.models import RunState
from runtime.store.base import NewRun
from runtime.store.sqlite import SqliteStore


async def test_a_blob_is_stored_once_under_its_sha256(tmp_path: Path) -> None:
    async with SqliteStore(tmp_path / "db.sqlite") as store:
        data = b"\x00binary\xffcontent" * 100
        first = await store.put_blob(data, "application/octet-stream")
        again = await store.put_blob(data, "application/octet-stream")
        assert first == again == hashlib.sha256(data).hexdigest()
        assert await store.get_blob(first) == ("application/octet-stream", data)
        with pytest.raises(NotFoundError):
            await store.get_blob("0" * 64)
    with sqlite3.connect(tmp_path / "db.sqlite") as conn:
        assert conn.execute("SELECT count(*), sum(size) FROM blobs").fetchone() == (1, len(data))


async def test_archived_jobs_are_hidden_from_listings_unless_asked(tmp_path: Path) -> None:
    async with SqliteStore(tmp_path / "db.sqlite") as store:
        runs = [
            await store.create_run(
                NewRun(agent="default", model="demo", input=f"task {i}", workspace=str(tmp_path))
            )
            for i in range(2)
        ]
        with pytest.raises(ConflictError, match="queued"):
            await store.set_job_archived(runs[0].job_id, True)
        await store.cancel_run(runs[0].id, reason="test")
        job = await store.set_job_archived(runs[0].job_id, True)
        assert job.archived
        listed = [j.id for j in (await store.list_jobs()).items]
        assert listed == [runs[1].job_id]
        only = [j.id for j in (await store.list_jobs(archived=True)).items]
        assert only == [runs[0].job_id]
        both = {j.id for j in (await store.list_jobs(archived=None)).items}
        assert both == {r.job_id for r in runs}
        assert [r.id for r in (await store.list_runs()).items] == [runs[1].id]
        all_runs = {r.id for r in (await store.list_runs(archived=None)).items}
        assert all_runs == {r.id for r in runs}
        assert (await store.get_run(runs[0].id)).state is RunState.CANCELLED
