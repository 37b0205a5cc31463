"""The browser's archive key: the job disappears from the browser and stays in the database."""

from __future__ import annotations

import asyncio
import re
import shlex
from pathlib import Path

import pytest
from textual.pilot import Pilot

from runtime.api import Runtime
from runtime.config import Config
from runtime.events import JobArchived
from runtime.models import Job, Run, RunState
from runtime.store.sqlite import SqliteStore
from tests.cli.harness import Cli
from tests.tui.helpers import (
    SIZE,
    finish_run,
    main_screen,
    make_app,
    notifications,
    open_runtime,
    screen_text,
    wait_for_browser,
    wait_until,
)
from tui.app import AgentTuiApp
from tui.screens.main import MainScreen
from tui.widgets._format import short
from tui.widgets.job_tree import BrowserDetail
from tui.widgets.question_prompt import QuestionPrompt


async def _kept_and_gone(runtime: Runtime) -> tuple[Run, Run]:
    """Two finished jobs' runs: one to keep, one to archive."""
    kept = await runtime.start("keep this one")
    await finish_run(runtime, kept.id)
    gone = await runtime.start("archive this one")
    await finish_run(runtime, gone.id)
    return kept, gone


async def test_x_archives_the_job_under_the_cursor_and_hides_it_from_the_browser(
    runtime: Runtime, workspace: Path
) -> None:
    kept, gone = await _kept_and_gone(runtime)
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        assert isinstance(screen, MainScreen)
        await wait_for_browser(pilot, app)
        assert set(screen.job_tree.job_ids) >= {kept.job_id, gone.job_id}
        screen.job_tree.focus()
        screen.job_tree.move_cursor(screen.job_tree.root.children[0])
        first = screen.job_tree.root.children[0].data.job.id  # type: ignore[union-attr]
        await pilot.press("x")
        await wait_until(pilot, lambda: first not in screen.job_tree.job_ids)
        assert any("Archived" in text for text in notifications(app))
    job = await runtime.get_job(first)
    assert job.archived
    page = await runtime.list_jobs()
    assert first not in [j.id for j in page.items]


async def test_x_in_the_conversation_archives_the_job_on_screen_not_the_cursors(
    runtime: Runtime, workspace: Path
) -> None:
    """As ``e`` does: from the conversation, the job read there (the browser's cursor, left on
    another job, archived that one)."""
    kept, gone = await _kept_and_gone(runtime)
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        await pilot.press("down", "enter")  # the older job ("keep this one") on screen
        await wait_until(pilot, lambda: screen.composer.follow_up_job_id == kept.job_id)
        screen.job_tree.move_cursor_to_line(0)  # the cursor on the newer job, not opened
        await wait_until(pilot, lambda: screen.job_tree.cursor_job() is not None)
        await pilot.press("g")
        await wait_until(pilot, lambda: app.focused is screen.conversation)
        await pilot.press("x")
        await wait_until(pilot, lambda: kept.job_id not in screen.job_tree.job_ids)
        assert gone.job_id in screen.job_tree.job_ids
    assert (await runtime.get_job(kept.job_id)).archived
    assert not (await runtime.get_job(gone.job_id)).archived


async def test_u_brings_back_the_job_archived_last(runtime: Runtime, workspace: Path) -> None:
    # A trial archived a job with x by mistake; only `agent-tui unarchive` brought it back.
    kept, gone = await _kept_and_gone(runtime)
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        assert isinstance(screen, MainScreen)
        await wait_for_browser(pilot, app)
        screen.job_tree.focus()
        assert not screen.check_action("unarchive_last", ())  # nothing archived yet
        assert screen.job_tree.job_ids == [gone.job_id, kept.job_id]  # newest first
        screen.job_tree.move_cursor(screen.job_tree.job_node(kept.job_id))
        await pilot.press("x")
        await wait_until(pilot, lambda: kept.job_id not in screen.job_tree.job_ids)
        [archived] = [text for text in notifications(app) if "u brings it back" in text]
        # Or the command, naming this database (not the default one a bare agent-tui opens).
        assert "(or `agent-tui --db " in archived
        assert f" unarchive {kept.job_id[:8]}`)" in archived
        await pilot.press("u")
        await wait_until(pilot, lambda: kept.job_id in screen.job_tree.job_ids)
        assert any("is back" in text for text in notifications(app))
        # Back in its place by activity (a trial saw it come back at the top).
        assert screen.job_tree.job_ids == [gone.job_id, kept.job_id]
        assert not screen.check_action("unarchive_last", ())
    assert not (await runtime.get_job(kept.job_id)).archived
    assert {j.id for j in (await runtime.list_jobs()).items} == {kept.job_id, gone.job_id}


async def _refusal(pilot: Pilot[object], app: AgentTuiApp) -> str:
    """``x`` in the browser, then the one warning that says why nothing was archived."""
    screen = app.screen
    assert isinstance(screen, MainScreen)
    screen.job_tree.focus()
    await wait_until(pilot, lambda: app.focused is screen.job_tree)
    await pilot.press("x")
    await wait_until(pilot, lambda: any(t.startswith("Not archived: ") for t in notifications(app)))
    [refusal] = [t for t in notifications(app) if t.startswith("Not archived: ")]
    return refusal.removeprefix("Not archived: ")


async def test_x_on_a_job_waiting_for_input_says_why_in_the_apps_own_keys(
    runtime: Runtime, workspace: Path
) -> None:
    """A new-user trial was told, in the TUI, to run `agent-tui respond <id> ANSWER`: the
    refusal names the keys here (enter opens the job, i the inbox, c cancels)."""
    waiting = await runtime.start("summarise")
    await runtime.wait(waiting.id, timeout=10)
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_browser(pilot, app)
        refusal = await _refusal(pilot, app)
        assert refusal.startswith("A run of this job waits for input")
        assert "(enter)" in refusal and "inbox (i)" in refusal and "c cancels it" in refusal
        assert "agent-tui" not in refusal and waiting.id not in refusal
        assert waiting.job_id in main_screen(app).job_tree.job_ids
    assert not (await runtime.get_job(waiting.job_id)).archived


async def test_x_on_the_open_job_waiting_for_input_points_to_its_prompt(
    runtime: Runtime, workspace: Path
) -> None:
    waiting = await runtime.start("summarise")
    await runtime.wait(waiting.id, timeout=10)
    app = make_app(runtime, workspace, open_job=waiting.job_id)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await wait_until(pilot, lambda: screen.query(QuestionPrompt))
        refusal = await _refusal(pilot, app)
        assert "answer it in its prompt, or c cancels it" in refusal
        assert "agent-tui" not in refusal and "(enter)" not in refusal
    assert not (await runtime.get_job(waiting.job_id)).archived


async def test_x_on_a_job_whose_run_was_interrupted_says_r_retries_it(
    db_path: Path, workspace: Path
) -> None:
    """The interrupted run's refusal gave `agent-tui retry` and `agent-tui cancel` commands."""
    first = await open_runtime(db_path, workspace, chunk_delay=0.5)
    try:
        run = await first.start("summarise")
        async with asyncio.timeout(30):
            while (await first.get_run(run.id)).state is not RunState.RUNNING:
                await asyncio.sleep(0.01)
    finally:
        await first.close()  # the process goes: its run is left interrupted
    runtime = await open_runtime(db_path, workspace)
    try:
        assert (await runtime.get_run(run.id)).interrupted
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            await wait_for_browser(pilot, app)
            refusal = await _refusal(pilot, app)
            assert "interrupted" in refusal
            assert "open the job (enter), then R retries it or c cancels it" in refusal
            assert "agent-tui" not in refusal
        assert not (await runtime.get_job(run.job_id)).archived
    finally:
        await runtime.close()


async def test_a_job_archived_in_another_process_leaves_this_browser_and_comes_back_with_it(
    db_path: Path, workspace: Path
) -> None:
    """Found by a new-user trial: `agent-tui archive JOB` (or `x` in a second agent-tui) hid
    the job there, while this browser kept showing it until restarted."""
    elsewhere = await open_runtime(db_path, workspace)
    watching = await open_runtime(db_path, workspace)
    try:
        kept, gone = await _kept_and_gone(elsewhere)
        app = make_app(watching, workspace)
        async with app.run_test(size=SIZE) as pilot:
            screen = app.screen
            assert isinstance(screen, MainScreen)
            await wait_for_browser(pilot, app)
            await wait_until(
                pilot, lambda: {kept.job_id, gone.job_id} <= set(screen.job_tree.job_ids)
            )
            await elsewhere.store.set_job_archived(gone.job_id, True)
            await wait_until(pilot, lambda: gone.job_id not in screen.job_tree.job_ids)
            assert kept.job_id in screen.job_tree.job_ids
            await elsewhere.store.set_job_archived(gone.job_id, False)
            await wait_until(pilot, lambda: gone.job_id in screen.job_tree.job_ids)
    finally:
        await watching.close()
        await elsewhere.close()


async def test_archiving_the_job_on_screen_leaves_a_new_job_and_the_keys_in_the_browser(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by new-user trials: after `x` on the job on screen, the composer still said
    "Follow-up in" it, and Enter sent the message into the archived job (hidden from then on)
    or into the job on the row below. Then, with the focus moved to the new job's box, the `u`
    the notice offered was typed into it, beside the archived job's run still described as if
    current."""
    kept, gone = await _kept_and_gone(runtime)
    app = make_app(runtime, workspace, open_job=gone.job_id)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        assert isinstance(screen, MainScreen)
        await wait_until(pilot, lambda: screen.composer.follow_up_job_id == gone.job_id)
        tree = screen.job_tree
        tree.focus()
        await wait_until(pilot, lambda: app.focused is tree)
        await pilot.press("x")
        await wait_until(pilot, lambda: gone.job_id not in tree.job_ids)
        await wait_until(pilot, lambda: screen.composer.follow_up_job_id is None)
        await pilot.pause()  # what the new job does with the keys is done by now
        assert screen.selected_job is None
        assert screen.status.run is None  # the status line shows no run
        assert str(screen.query_one(BrowserDetail).render()).startswith("job · ")  # kept's row
        assert app.focused is tree
        [archived] = [t for t in notifications(app) if t.startswith("Archived")]
        assert "u brings it back" in archived and "Esc" not in archived
        await pilot.press("u")
        await wait_until(pilot, lambda: gone.job_id in tree.job_ids)
        assert screen.composer.input.text == ""
        await pilot.press("tab", "tab")  # browser → conversation → composer
        await wait_until(pilot, lambda: app.focused is screen.composer.input)
        await pilot.press(*"a new task", "enter")
        await wait_until(
            pilot,
            lambda: screen.selected_job is not None and screen.selected_job.title == "a new task",
        )
    assert [r.id for r in await runtime.job_runs(gone.job_id)] == [gone.id]
    assert [r.id for r in await runtime.job_runs(kept.job_id)] == [kept.id]


async def test_the_detail_line_never_describes_a_row_archived_from_under_the_cursor(
    runtime: Runtime, workspace: Path
) -> None:
    """The line under the browser describes the row under the cursor. As the job on screen
    was archived with its run's row under the cursor, the line went on describing that run
    ("run · default · completed · 935 tokens", a new-user trial; here until the tree's next
    frame): Tree keeps its cursor on a removed row until it builds its lines again."""
    kept, gone = await _kept_and_gone(runtime)
    app = make_app(runtime, workspace, open_job=gone.job_id)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        assert isinstance(screen, MainScreen)
        tree = screen.job_tree

        def on_its_run_row() -> bool:
            row = tree.run_node(gone.id)
            return row is not None and tree.cursor_node is row

        await wait_until(pilot, on_its_run_row)
        detail = screen.query_one(BrowserDetail)
        assert str(detail.render()).startswith("run · default · completed")
        tree.remove_job(gone.job_id)  # as the job's archived event does
        assert str(detail.render()).startswith("job · default")
        assert tree.cursor_node is tree.job_node(kept.job_id)


async def test_after_x_ctrl_t_in_the_composer_follows_up_the_row_in_the_archived_ones_place(
    runtime: Runtime, workspace: Path
) -> None:
    """The composer's ctrl+t follows up the browser's selection. After `x`, the row below took
    the archived one's line, and Tree said nothing of a row that changed under a cursor that
    did not move: the selection stayed the archived job, and ctrl+t addressed the next
    message to it."""
    kept, gone = await _kept_and_gone(runtime)
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        assert isinstance(screen, MainScreen)
        await wait_for_browser(pilot, app)
        tree = screen.job_tree
        assert tree.cursor_node is tree.job_node(gone.job_id)  # the newest, on top
        await pilot.press("x")
        await wait_until(pilot, lambda: gone.job_id not in tree.job_ids)
        await pilot.press("tab", "tab")  # browser → conversation → composer
        await wait_until(pilot, lambda: app.focused is screen.composer.input)
        await pilot.press("ctrl+t")
        await wait_until(pilot, lambda: screen.composer.follow_up_job_id is not None)
        assert screen.composer.follow_up_job_id == kept.job_id
        assert "Follow-up in: keep this one" in screen_text(app)


async def test_the_job_on_screen_archived_elsewhere_says_so_and_keeps_the_message_typed(
    db_path: Path, workspace: Path
) -> None:
    """Found by a new-user trial: while a follow-up was being typed to the job on screen,
    `agent-tui archive JOB` in a shell (or `x` in a second agent-tui) emptied the
    conversation and the box, with not a word: the text typed was gone from sight."""
    elsewhere = await open_runtime(db_path, workspace)
    watching = await open_runtime(db_path, workspace)
    try:
        _kept, gone = await _kept_and_gone(elsewhere)
        app = make_app(watching, workspace, open_job=gone.job_id)
        async with app.run_test(size=SIZE) as pilot:
            screen = main_screen(app)
            composer = screen.composer
            await wait_until(pilot, lambda: composer.follow_up_job_id == gone.job_id)
            composer.focus_input()
            await pilot.press(*"and the tests too")
            await elsewhere.store.set_job_archived(gone.job_id, True)
            await wait_until(pilot, lambda: gone.job_id not in screen.job_tree.job_ids)
            await wait_until(pilot, lambda: composer.follow_up_job_id is None)
            await pilot.pause()
            assert composer.input.text == "and the tests too"  # now for a new job
            [told] = [t for t in notifications(app) if "archive this one" in t]
            assert "archived elsewhere" in told and f" unarchive {gone.job_id[:8]}`" in told
            await pilot.press("enter")
            await wait_until(
                pilot,
                lambda: (
                    screen.selected_job is not None
                    and screen.selected_job.title == "and the tests too"
                ),
            )
        assert [r.id for r in await watching.job_runs(gone.job_id)] == [gone.id]
    finally:
        await watching.close()
        await elsewhere.close()


class ArchiveHeld(SqliteStore):
    """A real SQLite store whose next archive (``set_job_archived(..., True)``) waits for
    ``gate`` before it writes (``reached`` once it waits)."""

    def __init__(self, db_path: Path) -> None:
        super().__init__(db_path)
        self.holding = False
        self.reached = asyncio.Event()
        self.gate = asyncio.Event()

    async def set_job_archived(self, job_id: str, archived: bool) -> Job:
        if archived and self.holding:
            self.holding = False
            self.reached.set()
            await self.gate.wait()
        return await super().set_job_archived(job_id, archived)


async def test_u_pressed_while_the_archive_is_being_written_brings_the_job_back_once_it_landed(
    db_path: Path, workspace: Path
) -> None:
    """Found in review: u pressed while x's archive was still being written said "is back"
    at once, then the archive landed: the job stayed archived, and u had nothing left to undo."""
    store = ArchiveHeld(db_path)
    runtime = await Runtime.open(
        db_path=db_path, workspace=workspace, config=Config(), model="demo:instant", store=store
    )
    try:
        kept, _gone = await _kept_and_gone(runtime)
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            screen = main_screen(app)
            await wait_for_browser(pilot, app)
            screen.job_tree.focus()
            screen.job_tree.move_cursor(screen.job_tree.job_node(kept.job_id))
            store.holding = True
            await pilot.press("x")
            async with asyncio.timeout(30):
                await store.reached.wait()
            assert screen.check_action("unarchive_last", ())  # the archive asked for last
            await pilot.press("u")
            await pilot.pause()
            assert not any("is back" in text for text in notifications(app))  # not yet
            assert not screen.check_action("unarchive_last", ())  # that one is being undone
            store.gate.set()
            await wait_until(pilot, lambda: any("is back" in t for t in notifications(app)))
            await wait_until(pilot, lambda: kept.job_id in screen.job_tree.job_ids)
            assert not screen.check_action("unarchive_last", ())
            assert not any("u brings it back" in text for text in notifications(app))
        assert not (await runtime.get_job(kept.job_id)).archived
        events = await runtime.events(job_id=kept.job_id)
        assert [e.archived for e in events if isinstance(e, JobArchived)] == [True, False]
    finally:
        await runtime.close()


async def test_the_archived_elsewhere_notice_names_the_job_shortened_and_a_command_for_this_db(
    tmp_path: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found in review: the title was a Python repr (quotes switching with its content), not
    shortened, and `agent-tui unarchive ID` opened the default database, not this one."""
    cli = Cli.create(tmp_path, workspace)  # the database is not the default one (--db)
    for key in ("HOME", "XDG_DATA_HOME"):
        monkeypatch.setenv(key, cli.env[key])
    monkeypatch.delenv("AGENT_TUI_DB", raising=False)
    title = "don't rename the old package's modules before the release branch is cut"
    elsewhere = await open_runtime(cli.db, workspace)
    watching = await open_runtime(cli.db, workspace)
    try:
        gone = await elsewhere.start("rename them", title=title)
        await finish_run(elsewhere, gone.id)
        app = make_app(watching, workspace, open_job=gone.job_id)
        async with app.run_test(size=SIZE) as pilot:
            screen = main_screen(app)
            await wait_until(pilot, lambda: screen.composer.follow_up_job_id == gone.job_id)
            await elsewhere.store.set_job_archived(gone.job_id, True)
            await wait_until(pilot, lambda: any("elsewhere" in t for t in notifications(app)))
            [told] = [t for t in notifications(app) if "elsewhere" in t]
        assert told.startswith(f"Archived: {short(title, 40)} was archived elsewhere")
        found = re.search(r"`(agent-tui [^`]*) unarchive ([0-9a-f]+)` brings it back", told)
        assert found is not None, told
        command = shlex.split(found.group(1))
        assert command == ["agent-tui", "--db", str(cli.db.resolve())]
        result = cli.run(*command[1:], "unarchive", found.group(2), global_options=False)
        assert result.returncode == 0, result.stderr
        assert not (await watching.get_job(gone.job_id)).archived
    finally:
        await watching.close()
        await elsewhere.close()


async def test_a_job_archived_here_brought_back_elsewhere_then_archived_elsewhere_is_said_so(
    db_path: Path, workspace: Path
) -> None:
    """Found in review: a job x archived here stayed counted as archived here once brought
    back elsewhere, so its next archive, made elsewhere, was taken for this one's: no notice,
    and the message being typed to it was not kept in the box."""
    elsewhere = await open_runtime(db_path, workspace)
    watching = await open_runtime(db_path, workspace)
    try:
        _kept, gone = await _kept_and_gone(elsewhere)
        app = make_app(watching, workspace)
        async with app.run_test(size=SIZE) as pilot:
            screen = main_screen(app)
            await wait_for_browser(pilot, app)
            screen.job_tree.focus()
            screen.job_tree.move_cursor(screen.job_tree.job_node(gone.job_id))
            await pilot.press("x")
            await wait_until(pilot, lambda: gone.job_id not in screen.job_tree.job_ids)
            await elsewhere.store.set_job_archived(gone.job_id, False)
            await wait_until(pilot, lambda: gone.job_id in screen.job_tree.job_ids)
            assert not screen.check_action("unarchive_last", ())  # back already
            screen.job_tree.move_cursor(screen.job_tree.job_node(gone.job_id))
            await pilot.press("enter")
            composer = screen.composer
            await wait_until(pilot, lambda: composer.follow_up_job_id == gone.job_id)
            composer.focus_input()
            await pilot.press(*"and the docs")
            await elsewhere.store.set_job_archived(gone.job_id, True)
            await wait_until(pilot, lambda: composer.follow_up_job_id is None)
            await pilot.pause()
            assert composer.input.text == "and the docs"
            assert any("archived elsewhere" in text for text in notifications(app))
    finally:
        await watching.close()
        await elsewhere.close()


async def test_u_pressed_while_an_archive_that_is_then_refused_is_written_brings_nothing_back(
    db_path: Path, workspace: Path
) -> None:
    """Found in review: u took the job off the undo list while its archive was on its way; the
    archive then refused (a run waits for input) and its clean-up failed (ValueError)."""
    store = ArchiveHeld(db_path)
    runtime = await Runtime.open(
        db_path=db_path, workspace=workspace, config=Config(), model="demo:instant", store=store
    )
    try:
        kept, _gone = await _kept_and_gone(runtime)
        waiting = await runtime.start("summarise")
        await runtime.wait(waiting.id, timeout=10)
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            screen = main_screen(app)
            await wait_for_browser(pilot, app)
            screen.job_tree.focus()
            screen.job_tree.move_cursor(screen.job_tree.job_node(kept.job_id))
            await pilot.press("x")
            await wait_until(pilot, lambda: kept.job_id not in screen.job_tree.job_ids)
            screen.job_tree.move_cursor(screen.job_tree.job_node(waiting.job_id))
            store.holding = True
            await pilot.press("x")
            async with asyncio.timeout(30):
                await store.reached.wait()
            await pilot.press("u")  # meant for the archive on its way: that one is refused
            await pilot.pause()
            assert not any("is back" in text for text in notifications(app))
            store.gate.set()
            await wait_until(pilot, lambda: any("Not archived" in t for t in notifications(app)))
            await pilot.pause()
            assert not any("is back" in text for text in notifications(app))
            assert screen.check_action("unarchive_last", ())  # the earlier archive is still u's
            assert app.is_running
        assert (await runtime.get_job(kept.job_id)).archived
        assert not (await runtime.get_job(waiting.job_id)).archived
    finally:
        await runtime.close()


async def test_a_job_archived_here_then_deleted_with_the_cli_is_no_longer_offered_for_undo(
    tmp_path: Path, workspace: Path
) -> None:
    """Found by a user trial: a job archived with x, then deleted from another shell with
    `agent-tui delete`, left its "Archived … u brings it back" notice up and u offered; u then
    said "job <id> not found". A deletion writes no event, so the screen looks for the job."""
    cli = Cli.create(tmp_path, workspace)
    runtime = await open_runtime(cli.db, workspace)
    try:
        kept, gone = await _kept_and_gone(runtime)
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE, notifications=True) as pilot:
            screen = main_screen(app)
            await wait_for_browser(pilot, app)
            screen.job_tree.focus()
            screen.job_tree.move_cursor(screen.job_tree.job_node(gone.job_id))
            await pilot.press("x")
            await wait_until(pilot, lambda: gone.job_id not in screen.job_tree.job_ids)

            def archived_toast() -> bool:
                return any(
                    "u brings it back" in str(toast.render()) for toast in app.screen.query("Toast")
                )

            await wait_until(pilot, archived_toast)
            deleted = await asyncio.to_thread(cli.run, "delete", gone.job_id, "--yes")
            assert deleted.returncode == 0, deleted.stderr
            await wait_until(
                pilot, lambda: any(t.startswith("Deleted: ") for t in notifications(app))
            )
            [told] = [t for t in notifications(app) if t.startswith("Deleted: ")]
            assert told.startswith("Deleted: archive this one was deleted elsewhere")
            # The rack draws the notices again as it takes the new one: a frame or so later.
            await wait_until(pilot, lambda: not archived_toast())
            assert not any("u brings it back" in t for t in notifications(app))
            assert not screen.check_action("unarchive_last", ())
            assert kept.job_id in screen.job_tree.job_ids
            # Said once, however many ways it is found gone; nothing is looked for any more.
            screen._deleted_elsewhere(gone.job_id)
            assert len([t for t in notifications(app) if t.startswith("Deleted: ")]) == 1
            await wait_until(pilot, lambda: screen._deletion_watch is None)
    finally:
        await runtime.close()


async def test_the_job_on_screen_archived_then_deleted_with_the_cli_is_no_longer_offered_back(
    tmp_path: Path, workspace: Path
) -> None:
    """Found by a trial of several processes on one database: `agent-tui archive JOB`, then
    `agent-tui delete JOB --yes` (delete takes archived jobs only), of the job another agent-tui
    showed: its "archived elsewhere … `unarchive` brings it back" notice stayed up over the
    deletion, and that command then said no such job."""
    cli = Cli.create(tmp_path, workspace)
    elsewhere = await open_runtime(cli.db, workspace)
    watching = await open_runtime(cli.db, workspace)
    try:
        gone = await elsewhere.start("archive and delete this one")
        await finish_run(elsewhere, gone.id)
        await elsewhere.close()
        app = make_app(watching, workspace, open_job=gone.job_id)
        async with app.run_test(size=SIZE, notifications=True) as pilot:
            screen = main_screen(app)
            await wait_until(pilot, lambda: screen.composer.follow_up_job_id == gone.job_id)

            def offered_back() -> bool:
                return any(
                    "brings it back" in str(toast.render()) for toast in app.screen.query("Toast")
                )

            archived = await asyncio.to_thread(cli.run, "archive", gone.job_id)
            assert archived.returncode == 0, archived.stderr
            await wait_until(pilot, offered_back)
            deleted = await asyncio.to_thread(cli.run, "delete", gone.job_id, "--yes")
            assert deleted.returncode == 0, deleted.stderr
            await wait_until(
                pilot, lambda: any(t.startswith("Deleted: ") for t in notifications(app))
            )
            [told] = [t for t in notifications(app) if t.startswith("Deleted: ")]
            assert told.startswith("Deleted: archive and delete this one was deleted elsewhere")
            # The rack draws the notices again as it takes the new one: a frame or so later.
            await wait_until(pilot, lambda: not offered_back())
            assert not any("brings it back" in t for t in notifications(app))
    finally:
        await watching.close()
