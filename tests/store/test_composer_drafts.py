"""The store's conveniences for clients: composer drafts per job, ids by prefix, prompt history."""

from __future__ import annotations

from pathlib import Path

from runtime.store.base import NewRun
from runtime.store.migrations import LATEST_VERSION
from runtime.store.sqlite import open_sqlite_store
from tests.store.helpers import WRITER, composer_text


async def test_drafts_are_kept_per_job_and_a_blank_one_is_deleted(tmp_path: Path) -> None:
    store = await open_sqlite_store(tmp_path / "s.db")
    try:
        assert await composer_text(store, None) == ""
        await store.save_composer_draft(None, "a new task\nsecond line", writer=WRITER)
        await store.save_composer_draft("job-1", "a follow-up", writer=WRITER)
        await store.save_composer_draft("job-1", "a better follow-up", writer=WRITER)
        assert await composer_text(store, None) == "a new task\nsecond line"
        assert await composer_text(store, "job-1") == "a better follow-up"
        await store.save_composer_draft("job-1", "  ", writer=WRITER)
        assert await composer_text(store, "job-1") == ""
    finally:
        await store.close()
    reopened = await open_sqlite_store(tmp_path / "s.db")
    try:
        assert await composer_text(reopened, None) == "a new task\nsecond line"
    finally:
        await reopened.close()


async def test_ids_by_prefix_and_recent_prompts_newest_first(tmp_path: Path) -> None:
    store = await open_sqlite_store(tmp_path / "s.db")
    try:
        runs = [
            await store.create_run(
                NewRun(agent="default", model="demo", input=f"task {n}", workspace=str(tmp_path))
            )
            for n in range(3)
        ]
        run = runs[0]
        assert await store.ids_with_prefix("run", run.id[:8]) == [run.id]
        assert await store.ids_with_prefix("job", run.job_id) == [run.job_id]
        assert await store.ids_with_prefix("run", "zz") == []
        assert len(await store.ids_with_prefix("run", "", limit=5)) == 3
        assert await store.recent_prompts(workspace=str(tmp_path)) == ["task 2", "task 1", "task 0"]
        assert await store.recent_prompts(workspace="/elsewhere") == []
    finally:
        await store.close()
    assert LATEST_VERSION >= 5
