"""Draft saves that land out of order: the text typed last is what the store keeps (and what a
restart puts back), for the composer and for an answer being typed. The first save is held on
its way into a real SQLite store until the next one has landed, as when it waited for the write
lock while the next one wrote."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from runtime.api import Runtime
from runtime.config import Config
from runtime.store.sqlite import SqliteStore
from tests.store.helpers import answer_text, composer_text
from tests.tui.helpers import SIZE, main_screen, make_app, wait_for_browser, wait_until
from tui.widgets.question_prompt import AnswerInput, QuestionPrompt


class FirstSaveHeld(SqliteStore):
    """A real SQLite store whose first draft save after ``hold`` waits for ``gate`` before it
    writes (``reached`` once it waits, ``landed`` once it wrote)."""

    def __init__(self, db_path: Path) -> None:
        super().__init__(db_path)
        self.hold = False
        self.reached = asyncio.Event()
        self.gate = asyncio.Event()
        self.landed = asyncio.Event()

    async def _held(self) -> bool:
        if not self.hold:
            return False
        self.hold = False
        self.reached.set()
        await self.gate.wait()
        return True

    async def save_composer_draft(
        self,
        job_id: str | None,
        text: str,
        *,
        writer: str,
        replacing: Sequence[str] = (),
        revision: int | None = None,
    ) -> None:
        held = await self._held()
        await super().save_composer_draft(
            job_id, text, writer=writer, replacing=replacing, revision=revision
        )
        if held:
            self.landed.set()

    async def save_answer_draft(
        self,
        request_id: str,
        text: str,
        *,
        job_id: str,
        writer: str,
        replacing: Sequence[str] = (),
        revision: int | None = None,
    ) -> None:
        held = await self._held()
        await super().save_answer_draft(
            request_id, text, job_id=job_id, writer=writer, replacing=replacing, revision=revision
        )
        if held:
            self.landed.set()


async def _open(db_path: Path, workspace: Path) -> tuple[Runtime, FirstSaveHeld]:
    store = FirstSaveHeld(db_path)
    runtime = await Runtime.open(
        db_path=db_path, workspace=workspace, config=Config(), model="demo:instant", store=store
    )
    return runtime, store


async def test_a_composer_save_landing_after_a_later_one_leaves_the_later_text(
    db_path: Path, workspace: Path
) -> None:
    runtime, store = await _open(db_path, workspace)
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            composer = main_screen(app).composer
            store.hold = True
            await pilot.press(*"fix the parser")
            await wait_until(pilot, store.reached.is_set)  # saved after a quiet moment: held
            await pilot.press(*" and its tests")
            composer.flush_draft()
            await wait_until(pilot, lambda: composer.input.text == "fix the parser and its tests")
            async with asyncio.timeout(10):
                while await composer_text(store, None) != "fix the parser and its tests":
                    await pilot.pause(0.02)
            store.gate.set()
            async with asyncio.timeout(10):
                await store.landed.wait()
            # What a crash now leaves, and a restart puts back.
            assert await composer_text(store, None) == "fix the parser and its tests"
    finally:
        store.gate.set()
        await runtime.close()


async def test_an_answer_save_landing_after_a_later_one_leaves_the_later_text(
    db_path: Path, workspace: Path
) -> None:
    runtime, store = await _open(db_path, workspace)
    try:
        run = await runtime.start("summarise")
        boundary = await runtime.wait(run.id, timeout=10)
        assert boundary.request is not None
        request_id = boundary.request.id
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            screen = main_screen(app)
            await wait_for_browser(pilot, app)
            await pilot.press("enter")
            await wait_until(pilot, lambda: screen.query(QuestionPrompt))
            field = screen.query_one(AnswerInput)
            await wait_until(pilot, lambda: app.focused is field)
            store.hold = True
            await pilot.press(*"only the TODOs")
            await wait_until(pilot, store.reached.is_set)
            await pilot.press(*" and the tests")
            screen.query_one(QuestionPrompt).flush_draft()
            async with asyncio.timeout(10):
                while await answer_text(store, request_id) != "only the TODOs and the tests":
                    await pilot.pause(0.02)
            store.gate.set()
            async with asyncio.timeout(10):
                await store.landed.wait()
            assert await answer_text(store, request_id) == "only the TODOs and the tests"
    finally:
        store.gate.set()
        await runtime.close()
