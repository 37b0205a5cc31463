"""Draft saves that land out of order: the text typed last is what the store keeps (and what a
restart puts back), for the composer, for an answer being typed and for the messages queued for
a job. The first save is held on its way into a real SQLite store until the next one has landed,
as when it waited for the write lock while the next one wrote."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from runtime.api import Runtime
from runtime.config import Config
from runtime.models import RunState
from runtime.store.sqlite import SqliteStore
from tests.fakes.scripted import ScriptedProvider, Turn
from tests.store.helpers import answer_text, composer_text, queued_messages
from tests.tui.helpers import SIZE, main_screen, make_app, wait_for_browser, wait_until
from tui.widgets.question_prompt import AnswerInput, QuestionPrompt


class FirstSaveHeld(SqliteStore):
    """A real SQLite store whose first save of the kind ``hold`` names (composer, answer,
    queue) waits for ``gate`` before it writes (``reached`` once it waits, ``landed`` once it
    wrote)."""

    def __init__(self, db_path: Path) -> None:
        super().__init__(db_path)
        self.hold: Literal["composer", "answer", "queue"] | None = None
        self.reached = asyncio.Event()
        self.gate = asyncio.Event()
        self.landed = asyncio.Event()

    async def _held(self, kind: str) -> bool:
        if self.hold != kind:
            return False
        self.hold = None
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
        held = await self._held("composer")
        await super().save_composer_draft(
            job_id, text, writer=writer, replacing=replacing, revision=revision
        )
        if held:
            self.landed.set()

    async def save_queued_messages(
        self, job_id: str, texts: Sequence[str], *, writer: str, revision: int | None = None
    ) -> None:
        held = await self._held("queue")
        await super().save_queued_messages(job_id, texts, writer=writer, revision=revision)
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
        held = await self._held("answer")
        await super().save_answer_draft(
            request_id, text, job_id=job_id, writer=writer, replacing=replacing, revision=revision
        )
        if held:
            self.landed.set()


async def _open(
    db_path: Path, workspace: Path, provider: ScriptedProvider | None = None
) -> tuple[Runtime, FirstSaveHeld]:
    store = FirstSaveHeld(db_path)
    runtime = await Runtime.open(
        db_path=db_path,
        workspace=workspace,
        config=Config(),
        model="demo:instant" if provider is None else "scripted:test",
        providers=None if provider is None else lambda reference: provider,
        store=store,
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
            store.hold = "composer"
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
            store.hold = "answer"
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


async def test_a_queue_save_landing_after_a_later_one_keeps_the_message_queued_since(
    db_path: Path, workspace: Path
) -> None:
    """Two follow-ups queued while the run works: the save of the first queue lands after the
    save of both; the store keeps both (a restart puts both back, not only the first)."""
    gate = asyncio.Event()  # never set: the run works until the app closes
    provider = ScriptedProvider([Turn("working on it " * 20, gate=gate)])
    runtime, store = await _open(db_path, workspace, provider)
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            screen = main_screen(app)
            await pilot.press(*"first task", "enter")
            await wait_until(
                pilot,
                lambda: (
                    screen.selected_run is not None
                    and screen.selected_run.state is RunState.RUNNING
                ),
            )
            assert screen.selected_run is not None
            job_id = screen.selected_run.job_id
            store.hold = "queue"
            await pilot.press(*"then the tests", "enter")
            await wait_until(pilot, store.reached.is_set)  # the first queue's save: held
            await pilot.press(*"and the docs", "enter")
            both = ["then the tests", "and the docs"]
            await wait_until(pilot, lambda: screen.composer.queued(job_id) == both)
            async with asyncio.timeout(10):
                while await queued_messages(store, job_id) != both:
                    await pilot.pause(0.02)
            store.gate.set()
            async with asyncio.timeout(10):
                await store.landed.wait()
            # What a crash now leaves, and a restart puts back in the box.
            assert await queued_messages(store, job_id) == both
    finally:
        store.gate.set()
        await runtime.close()
