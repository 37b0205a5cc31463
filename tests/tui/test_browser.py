"""The browser (issue 11 point 6): named columns that line up, ages that tick, checkpoints
under an expanded run, the interrupted filter, an empty filter result, a browser that hides."""

from __future__ import annotations

import asyncio
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from runtime.api import Runtime
from runtime.kinds import RunState
from runtime.models import Job, Run, ToolResultBlock
from runtime.store.base import NewRun
from tests.fakes.scripted import ScriptedProvider, Turn, open_scripted
from tests.store.helpers import composer_text
from tests.tui.helpers import (
    LayoutCount,
    finish_run,
    main_screen,
    make_app,
    notifications,
    open_runtime,
    screen_text,
    send_burst,
    wait_for_browser,
    wait_until,
)
from tests.tui.test_status_line import _held_step_runtime
from tui import browser_filters
from tui.messages import RunsLoaded
from tui.screens.main import MainScreen
from tui.widgets import job_tree
from tui.widgets.job_tree import (
    BrowserDetail,
    BrowserHeader,
    CheckpointEntry,
    EmptyEntry,
    JobEntry,
    JobTree,
    RunEntry,
)
from tui.widgets.question_prompt import QuestionPrompt

WIDE = (140, 45)


def rendered(widget: Any) -> str:
    return str(widget.render())


async def _two_finished_jobs(runtime: Runtime) -> None:
    for task in ("summarise this project and then some more words", "list the TODOs"):
        run = await runtime.start(task)
        await finish_run(runtime, run.id)


async def test_the_header_names_the_columns_and_each_sits_over_its_figures(
    runtime: Runtime, workspace: Path
) -> None:
    await _two_finished_jobs(runtime)
    app = make_app(runtime, workspace, hide_ages=False)
    async with app.run_test(size=WIDE) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        tree = screen.job_tree
        paid = (await runtime.list_jobs()).items[0]
        tree.upsert_job(paid.model_copy(update={"cost_usd": 0.42}))  # as a paid model's run
        await pilot.pause()
        header = rendered(screen.query_one(BrowserHeader))
        # One agent everywhere: no column repeating "default", the titles get its room.
        assert header.split() == ["job", "upd", "tok", "cost"]
        rows = [tree.row_text(node) for node in tree._visible_nodes()]
        assert any("summarise this project and th" in row for row in rows)  # 11 cells before
        # A second agent: every row gets the column, under its name (in the wide browser,
        # where the titles keep their room beside it).
        await pilot.press("w")
        elsewhere = await runtime.store.create_run(
            NewRun(
                agent="reviewer",
                model="demo",
                input="review it",
                workspace=str(workspace),
                owner_id="t",
            )
        )
        job = await runtime.get_job(elsewhere.job_id)
        screen.job_tree.upsert_job(job)
        await wait_until(
            pilot,
            lambda: (
                rendered(screen.query_one(BrowserHeader)).split()
                == ["job", "agent", "upd", "tok", "cost"]
            ),
        )
        header = rendered(screen.query_one(BrowserHeader))
        for job_id in tree.job_ids:
            node = tree.job_node(job_id)
            assert node is not None
            row = "▶ " + tree.row_text(node)
            agent = "reviewer" if job_id == job.id else "default"
            assert row.index(agent) == header.index("agent")
            assert len(row.rstrip()) == len(header.rstrip())  # the cost ends under "cost"
            assert row.rstrip().endswith("$0.42" if job_id == paid.id else "$0.00")


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
async def test_a_title_of_wide_characters_is_cut_to_the_row_and_keeps_its_figures_in_place(
    runtime: Runtime, workspace: Path, size: tuple[int, int]
) -> None:
    """Found by a new-user trial: a job titled in Chinese (each character two cells wide) was
    cut by characters, not cells: its row ran past the pane and its age and tokens were not
    drawn; a run's title with the 📎 of an attachment pushed its tokens into the border.
    Rows are cut to their cells: each ends where an ASCII row ends, with its figures."""
    from rich.cells import cell_len

    for task in ("修复这个错误：解析器里的问题和更多的文字 🐛🐛", "list the TODOs 📎"):
        await finish_run(runtime, (await runtime.start(task)).id)
    app = make_app(runtime, workspace, hide_ages=False)
    async with app.run_test(size=size) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        tree = screen.job_tree
        await pilot.pause()
        header = rendered(screen.query_one(BrowserHeader)).rstrip()
        rows = ["▶ " + tree.row_text(node) for node in tree._visible_nodes()]
        assert len(rows) == 2, rows
        for row in rows:
            assert cell_len(row.rstrip()) == cell_len(header), (row, header)
            assert re.search(r" \d+s +\d+(\.\d)?k?$", row.rstrip()), row  # age, tokens
        assert any("修复这个错误" in row and "…" in row for row in rows), rows


def _drawn_rows(tree: JobTree) -> list[str]:
    """The browser's rows as drawn, guides and expanders included."""
    return [str(tree.render_line(y).text).rstrip() for y in range(tree.last_line + 1)]


async def test_the_agent_column_shows_only_while_the_listed_jobs_name_two_agents(
    db_path: Path, workspace: Path
) -> None:
    """Found by a new-user trial: with agents configured, the sub-runs of a delegation
    (researcher, reviewer) brought the agent column, which then repeated the one agent of
    every job on each job's row. It shows while the jobs listed name two agents."""
    from tests.tui.test_keys_and_delegation import delegation_config

    runtime = await Runtime.open(
        db_path=db_path, workspace=workspace, config=delegation_config(), model="demo:instant"
    )
    try:
        for task in ("survey the parser", "survey the store"):
            run = await runtime.start(task)  # the coordinator delegates to two sub-agents
            await finish_run(runtime, run.id)
        sub_runs = [r for r in await runtime.job_runs(run.job_id) if r.parent_run_id]
        assert {r.agent for r in sub_runs} == {"researcher", "reviewer"}
        app = make_app(runtime, workspace)
        async with app.run_test(size=(120, 40)) as pilot:
            screen = main_screen(app)
            tree = screen.job_tree
            await wait_for_browser(pilot, app)
            await pilot.press("w")  # the wide browser: room for every column
            await pilot.press("enter")  # the job's runs and sub-runs are listed
            await wait_until(pilot, lambda: all(tree.run_node(r.id) for r in sub_runs))
            await pilot.pause()
            header = rendered(screen.query_one(BrowserHeader)).split()
            assert header == ["job", "tok"]  # ages hidden; nothing cost anything (demo)
            assert not any("coordinat" in row for row in _drawn_rows(tree))
            # A job of another agent: now the column tells which is which.
            other = await runtime.start("review the store", agent="reviewer")
            await wait_until(
                pilot, lambda: "agent" in rendered(screen.query_one(BrowserHeader)).split()
            )
            await wait_until(pilot, lambda: any("reviewer" in r for r in _drawn_rows(tree)))
            assert any("coordinat…" in row for row in _drawn_rows(tree))
            # Archived, it is no longer listed: the column goes with it.
            await finish_run(runtime, other.id)
            await runtime.store.set_job_archived(other.job_id, True)
            await wait_until(pilot, lambda: tree.job_node(other.job_id) is None)
            await wait_until(
                pilot, lambda: "agent" not in rendered(screen.query_one(BrowserHeader)).split()
            )
    finally:
        await runtime.close()


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
async def test_the_agent_column_never_leaves_a_title_fewer_than_24_cells(
    db_path: Path, workspace: Path, size: tuple[int, int]
) -> None:
    """Found by a new-user trial: with two agents' jobs listed, the agent column cut the
    titles to 13 cells at 120 columns ("summarise this p…"). It shows only where each title
    keeps at least 24 cells: not at 80 columns nor in the browser's normal width at 120, but
    in its wide one there."""
    from runtime.config import AgentConfig, Config

    config = Config(agents={"reviewer": AgentConfig(description="reviews")})
    runtime = await Runtime.open(
        db_path=db_path, workspace=workspace, config=config, model="demo:instant"
    )
    try:
        title = "summarise this project and then some more words"
        for task, agent in ((title, None), ("review the parser module", "reviewer")):
            run = await runtime.start(task, agent=agent)
            await finish_run(runtime, run.id)
        app = make_app(runtime, workspace, hide_ages=False)
        async with app.run_test(size=size) as pilot:
            screen = main_screen(app)
            tree = screen.job_tree
            await wait_for_browser(pilot, app)
            shown = {}
            for width in ("normal", "wide", "narrow"):
                await pilot.pause()
                rows = _drawn_rows(tree)
                shown[width] = "agent" in rendered(screen.query_one(BrowserHeader)).split()
                if shown[width]:
                    assert any("reviewer" in row for row in rows), rows
                    assert any(title[:23] in row for row in rows), rows
                await pilot.press("w")
            assert shown == {"normal": False, "wide": size[0] >= 120, "narrow": False}
    finally:
        await runtime.close()


async def test_at_80_columns_the_header_shows_only_the_columns_that_fit(
    runtime: Runtime, workspace: Path
) -> None:
    await _two_finished_jobs(runtime)
    app = make_app(runtime, workspace, hide_ages=False)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        tree = screen.job_tree
        paid = (await runtime.list_jobs()).items[0]
        tree.upsert_job(paid.model_copy(update={"cost_usd": 0.42}))  # as a paid model's run
        await pilot.pause()
        header = rendered(screen.query_one(BrowserHeader)).split()
        assert header[0] == "job" and header[-1] == "cost"
        assert "upd" not in header  # the age goes first; the detail line still says it
        for job_id in tree.job_ids:
            node = tree.job_node(job_id)
            assert node is not None
            assert tree.row_text(node).rstrip().endswith("$0.42" if job_id == paid.id else "$0.00")
        # "0s ago": "updated" is left out at this width, so that the cost fits.
        await wait_until(pilot, lambda: " ago" in rendered(screen.query_one(BrowserDetail)))


@pytest.mark.parametrize(
    "size", [(80, 24), (120, 40), (200, 60)], ids=["80x24", "120x40", "200x60"]
)
async def test_rows_show_their_age_not_a_cost_while_nothing_listed_cost_anything(
    runtime: Runtime, workspace: Path, size: tuple[int, int]
) -> None:
    """Found by a new-user trial: on the free demo model every row at 80 columns read "$0.00"
    and nothing else. While no job or run listed cost anything, the rows show how long ago
    each was updated in that place; a job that costs something brings the cost back."""
    await _two_finished_jobs(runtime)
    app = make_app(runtime, workspace, hide_ages=False)
    async with app.run_test(size=size) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        tree = screen.job_tree
        await pilot.press("enter")  # the job's run rows too
        await wait_until(pilot, lambda: len(tree.loaded_runs) == 1)
        await pilot.pause()
        header = rendered(screen.query_one(BrowserHeader)).split()
        assert "cost" not in header and "upd" in header
        rows = _drawn_rows(tree)
        assert len(rows) == 3 and not any("$" in row for row in rows), rows
        ages = re.compile(r" (now|\d+[smhd])(\s|$)")
        assert all(ages.search(row) for row in rows), rows
        job = (await runtime.list_jobs()).items[-1]
        tree.upsert_job(job.model_copy(update={"cost_usd": 0.42}))  # as a paid model's run
        await wait_until(pilot, lambda: any("$0.42" in row for row in _drawn_rows(tree)))
        assert rendered(screen.query_one(BrowserHeader)).split()[-1] == "cost"
        assert sum("$0.00" in row for row in _drawn_rows(tree)) == 2  # the free job and its run
        tree.upsert_job(job)  # no cost again (e.g. another page): the age is back
        await wait_until(pilot, lambda: not any("$" in row for row in _drawn_rows(tree)))


async def test_the_tree_its_header_and_detail_fill_the_browser_with_no_strip_beside_them(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial: at 80x24 the two columns at the right of the tree were left
    out of it (a darker strip the height of the browser while the tree had the focus), and of
    its header and the detail line under it."""
    await _two_finished_jobs(runtime)
    app = make_app(runtime, workspace)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        await pilot.pause()
        browser = screen.query_one("#browser").content_region
        tree = screen.job_tree
        header = screen.query_one(BrowserHeader)
        detail = screen.query_one(BrowserDetail)
        for widget in (header, tree, detail):
            assert (widget.region.x, widget.region.right) == (browser.x, browser.right), widget
        # Every cell of the tree's first and last rows, to the browser's border, is the tree's.
        for y in (tree.region.y, tree.region.bottom - 1):
            for x in range(browser.x, browser.right):
                under, _ = screen.get_widget_at(x, y)
                assert under is tree, (x, y, under)


def lines_on_screen(widget: Any) -> list[str]:
    """The rows ``widget`` covers on screen, as a person reads them (border and padding too)."""
    from textual.geometry import Region

    return [strip.text for strip in widget.render_lines(Region(0, 0, *widget.outer_size))]


async def test_at_80_columns_the_detail_line_shows_the_cost_in_shorter_words(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial: at 80x24 "run · default · completed · updated 0s ago ·
    1.2k tokens · $0.00" was cut after the tokens, the cost never shown."""
    await _two_finished_jobs(runtime)
    app = make_app(runtime, workspace, hide_ages=False)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        tree, detail = screen.job_tree, screen.query_one(BrowserDetail)
        job_node = tree.job_node(tree.job_ids[0])
        assert job_node is not None
        await pilot.press("space")  # the job's runs, under it
        await wait_until(pilot, lambda: len(job_node.children) == 1)
        for row in (job_node.children[0], job_node):
            tree.move_cursor(row)
            kind = "job" if row is job_node else "run"
            await wait_until(pilot, lambda kind=kind: rendered(detail).startswith(kind))
            await pilot.pause()
            rule, *lines = lines_on_screen(detail)
            words = " ".join(line.strip() for line in lines)
            assert words.endswith("$0.00"), lines
            # No piece cut in two (the age as the clock has it: a loaded run read "1s ago").
            assert " tok · " in words and re.search(r"\b\d+s ago\b", words), lines
            assert len(lines) == 2 and rule.strip(), lines  # the tree keeps the other rows


def test_the_detail_keeps_its_long_words_when_they_take_two_lines_and_never_cuts_a_figure() -> None:
    words = (("run", "run"), ("default", "default"), ("updated 3m ago", "3m ago"))
    words += (("1.2k tokens", "1.2k tok"), ("$0.00", "$0.00"))
    assert job_tree.detail_lines(words, 40) == "run · default · updated 3m ago\n1.2k tokens · $0.00"
    assert job_tree.detail_lines(words, 27) == "run · default · 3m ago\n1.2k tok · $0.00"
    assert job_tree.detail_lines(words, 0) == "run · default · updated 3m ago · 1.2k tokens · $0.00"


@pytest.fixture
def own_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test ticks the ages itself: the browser's own once-a-second tick (real time) would
    redraw them with the real ages between a test's tick and what it reads."""
    monkeypatch.setattr(job_tree, "AGE_TICK", 24 * 3600.0)


@pytest.mark.usefixtures("own_clock")
async def test_ages_tick_without_a_new_row_and_the_detail_says_updated_ago(
    runtime: Runtime, workspace: Path
) -> None:
    await _two_finished_jobs(runtime)
    app = make_app(runtime, workspace, hide_ages=False)
    async with app.run_test(size=WIDE) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        tree = screen.job_tree
        node = tree.cursor_node
        assert node is not None
        job = node.data.job  # type: ignore[union-attr]
        tree.tick(now=job.updated_at + 3 * 60 + 5)
        await pilot.pause()
        assert " 3m " in tree.row_text(node)
        assert "updated 3m ago" in rendered(screen.query_one(BrowserDetail))
        tree.tick(now=job.updated_at + 2 * 3600)
        await pilot.pause()
        assert " 2h " in tree.row_text(node)
        assert "updated 2h ago" in rendered(screen.query_one(BrowserDetail))


async def _unfold_checkpoints(pilot: Pilot[Any], screen: MainScreen, run_id: str) -> None:
    """From the browser's cursor on the run's job: space (its runs), ↓ and space (the run's
    checkpoints), until they are listed."""
    tree = screen.job_tree
    await pilot.press("space")
    await wait_until(pilot, lambda: tree.run_node(run_id) is not None)
    run_node = tree.run_node(run_id)
    assert run_node is not None
    await pilot.press("down", "space")
    await wait_until(
        pilot, lambda: [c for c in run_node.children if isinstance(c.data, CheckpointEntry)]
    )


async def test_expanding_a_run_lists_its_checkpoints_at_once(
    runtime: Runtime, workspace: Path
) -> None:
    run = await runtime.start("summarise this project")
    await finish_run(runtime, run.id)
    checkpoints = await runtime.checkpoints(run.id)
    assert checkpoints
    app = make_app(runtime, workspace)
    async with app.run_test(size=WIDE) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        tree = screen.job_tree
        await pilot.press("space")  # expand the job: its runs
        await wait_until(pilot, lambda: tree.run_node(run.id) is not None)
        run_node = tree.run_node(run.id)
        assert run_node is not None
        assert not run_node.is_expanded  # collapsed: no ▼ over nothing
        await pilot.press("down", "space")  # expand the run, once
        await wait_until(
            pilot,
            lambda: [c for c in run_node.children if isinstance(c.data, CheckpointEntry)],
        )
        shown = [c.data.checkpoint.id for c in run_node.children]  # type: ignore[union-attr]
        assert shown == [checkpoint.id for checkpoint in checkpoints]
        assert tree.row_text(run_node.children[0]).startswith("◆ step")


async def test_selecting_a_run_just_added_or_just_expanded_puts_the_cursor_on_that_run(
    runtime: Runtime, workspace: Path
) -> None:
    """Tree lines are built lazily: the cursor must land on the run itself, not on the line the
    run's node had before the tree was rebuilt (a new node has none: the cursor went to row 0)."""
    await _two_finished_jobs(runtime)
    app = make_app(runtime, workspace)
    async with app.run_test(size=WIDE) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        tree = screen.job_tree
        await wait_until(pilot, lambda: len(tree.job_ids) == 2)
        older = tree.job_ids[-1]
        runs = await runtime.job_runs(older)
        tree.set_runs(older, runs)  # nodes added under a collapsed job, no refresh in between
        tree.select_run(runs[0].id)  # expands the job and moves there at once
        assert tree.cursor_node is tree.run_node(runs[0].id)
        again = await runtime.follow_up(older, "and list the files")
        await finish_run(runtime, again.id)
        tree.upsert_run(await runtime.get_run(again.id))
        tree.move_cursor(tree.run_node(again.id))
        assert tree.cursor_node is tree.run_node(again.id)


async def test_a_state_filter_with_no_match_says_so(runtime: Runtime, workspace: Path) -> None:
    await _two_finished_jobs(runtime)
    app = make_app(runtime, workspace)
    async with app.run_test(size=WIDE) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        await pilot.press("s")  # running: none
        tree = screen.job_tree

        def only_row() -> str:
            rows = list(tree.root.children)
            if len(rows) == 1 and isinstance(rows[0].data, EmptyEntry):
                return tree.row_text(rows[0])
            return ""

        await wait_until(pilot, lambda: "no running job (s: next filter)" in only_row())
        assert not tree.job_ids


async def test_the_interrupted_filter_shows_only_jobs_with_an_interrupted_run(
    db_path: Path, workspace: Path
) -> None:
    first = await open_runtime(db_path, workspace, model="demo")
    try:
        done = await first.start("list the TODOs")
        await finish_run(first, done.id)
        cut = await first.start("summarise this project")
    finally:
        await first.close()  # the streaming demo run is cut off mid-way
    second = await open_runtime(db_path, workspace)
    try:
        found = await browser_filters.interrupted_jobs(second, limit=50)
        assert [job.id for job in found] == [cut.job_id]
        assert browser_filters.INTERRUPTED in browser_filters.FILTERS
        app = make_app(second, workspace)
        async with app.run_test(size=WIDE) as pilot:
            screen = main_screen(app)
            await wait_for_browser(pilot, app)
            assert set(screen.job_tree.job_ids) == {cut.job_id, done.job_id}
            while screen.state_filter != browser_filters.INTERRUPTED:
                await pilot.press("s")
            await wait_until(pilot, lambda: screen.job_tree.job_ids == [cut.job_id])
            assert "filter: interrupted" in rendered(screen.query_one("#filter"))
    finally:
        await second.close()


async def test_the_queued_filter_lists_the_jobs_about_to_start_and_not_an_interrupted_one(
    db_path: Path, workspace: Path
) -> None:
    """Found by a new-user trial: a run a quit interrupted is stored as queued (it waits for a
    person to retry it), and the queued filter listed its job as about to start; ``agent-tui
    runs --state queued`` leaves it to ``--state interrupted``, and so does the browser."""
    first = await open_runtime(db_path, workspace, model="demo")
    try:
        cut = await first.start("summarise this project")
    finally:
        await first.close()  # the streaming demo run is cut off mid-way: interrupted, queued
    second = await open_runtime(db_path, workspace)
    try:
        assert (await second.get_run(cut.id)).state is RunState.QUEUED
        waiting = await second.store.create_run(
            NewRun(agent="default", model="demo", input="later", workspace=str(workspace))
        )
        app = make_app(second, workspace)
        async with app.run_test(size=WIDE) as pilot:
            screen = main_screen(app)
            await wait_for_browser(pilot, app)
            assert set(screen.job_tree.job_ids) == {cut.job_id, waiting.job_id}
            while screen.state_filter is not RunState.QUEUED:
                await pilot.press("s")
            await wait_until(pilot, lambda: screen.job_tree.job_ids == [waiting.job_id])
            while screen.state_filter != browser_filters.INTERRUPTED:
                await pilot.press("s")
            await wait_until(pilot, lambda: screen.job_tree.job_ids == [cut.job_id])
    finally:
        await second.close()


@pytest.mark.parametrize(
    "size", [(80, 24), (120, 40), (200, 60)], ids=["80x24", "120x40", "200x60"]
)
async def test_the_filter_line_names_each_filter_and_its_key_in_whole_words_at_every_size(
    runtime: Runtime, workspace: Path, size: tuple[int, int]
) -> None:
    """Found by a new-user trial at 80x24: the line over the browser read "filter: cancelled
    (s to", cut mid-phrase, for any filter longer than "all". A shorter wording fits."""
    await _two_finished_jobs(runtime)
    app = make_app(runtime, workspace)
    async with app.run_test(size=size) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        line = screen.query_one("#filter")
        for state in browser_filters.FILTERS:
            name = browser_filters.filter_name(state)
            await wait_until(pilot, lambda name=name: name in rendered(line))
            await pilot.pause()
            text = rendered(line)
            assert len(text) <= line.content_size.width, text
            if size[0] >= 120:
                assert text == f"filter: {name}  (s to change)"
            else:
                assert text in (f"filter: {name}  (s to change)", f"filter (s): {name}"), text
            await pilot.press("s")
        if size[0] == 80:  # the narrow browser too
            await pilot.press("w", "w")
            await pilot.pause()
            text = rendered(line)
            assert len(text) <= line.content_size.width and text.startswith("filter"), text


async def test_w_cycles_the_browser_wide_narrow_hidden_and_the_conversation_takes_the_width(
    runtime: Runtime, workspace: Path
) -> None:
    await _two_finished_jobs(runtime)
    app = make_app(runtime, workspace)
    async with app.run_test(size=WIDE) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        browser = screen.query_one("#browser")
        conversation = screen.conversation
        normal = browser.size.width
        await pilot.press("w")
        await pilot.pause()
        assert browser.size.width > normal
        await pilot.press("w")
        await pilot.pause()
        assert browser.size.width < normal
        await pilot.press("w")
        await pilot.pause()
        assert not browser.display
        assert conversation.size.width >= WIDE[0] - 2  # the conversation has the width
        assert app.focused is not screen.job_tree
        await pilot.press("b")  # focusing the browser brings it back
        await pilot.pause()
        assert browser.display and app.focused is screen.job_tree
        assert browser.size.width == normal


@pytest.mark.usefixtures("own_clock")
async def test_an_age_tick_redraws_no_row_whose_age_is_unchanged_even_one_drawn_since(
    runtime: Runtime, workspace: Path
) -> None:
    """A run's row appears when its job opens or expands; the next once-a-second tick drew it
    again although its age was the same (the last frame after opening a run, well after
    everything else). A tick redraws only the rows whose age changed."""
    await _two_finished_jobs(runtime)
    app = make_app(runtime, workspace, hide_ages=False)
    async with app.run_test(size=WIDE) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        tree = screen.job_tree
        assert "age" in tree.columns()
        job_node = tree.cursor_node
        assert job_node is not None
        job = job_node.data.job  # type: ignore[union-attr]
        now = job.updated_at + 3 * 60 + 5
        tree.tick(now=now)
        await pilot.pause()
        job_node.expand()
        await wait_until(pilot, lambda: job.id in tree.loaded_runs and job_node.children)
        await pilot.pause()
        run_rows = list(job_node.children)
        assert all(" 3m " in tree.row_text(node) for node in run_rows)
        drawn = {id(node): node._updates for node in tree._visible_nodes()}
        tree.tick(now=now)
        await pilot.pause()
        assert {id(node): node._updates for node in tree._visible_nodes()} == drawn
        tree.tick(now=job.updated_at + 2 * 3600)  # ages that do change are redrawn
        await pilot.pause()
        assert all(node._updates > drawn[id(node)] for node in [job_node, *run_rows])
        assert " 2h " in tree.row_text(job_node)


def _rows_ageless(tree: Any) -> list[str]:
    """The tree's rows as drawn, their ages blanked: an age ticks on (0s, 1s) with the clock,
    and a loaded machine took a second between two readings (a CI rehearsal)."""
    return [
        re.sub(r"\b\d+[smhd]\b", "<age>", tree.row_text(node)) for node in tree._visible_nodes()
    ]


async def test_the_detail_growing_by_a_row_lays_the_screen_out_once_and_keeps_the_rows(
    runtime: Runtime, workspace: Path
) -> None:
    """The detail under the tree takes a row more as a run starts (and one less as it ends),
    which makes the tree a row shorter. Tree's own resize handler threw its rows away and
    asked for a second layout of the whole screen, a frame of its own; the rows do not depend
    on the tree's height, so one layout does it. A change of width still redraws them."""
    await _two_finished_jobs(runtime)
    app = make_app(runtime, workspace, hide_ages=False)
    async with app.run_test(size=WIDE) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        tree = screen.job_tree
        detail = screen.query_one(BrowserDetail)
        detail.update("job")  # one row
        await wait_until(pilot, lambda: detail.size.height == 1)
        for _ in range(3):  # the focus settles (a blur restyles the tree)
            await pilot.pause()
        rows_before = _rows_ageless(tree)
        height, width = tree.size.height, tree.size.width
        layouts = LayoutCount(screen)
        detail.update("run\nrunning")
        await wait_until(pilot, lambda: tree.size.height == height - 1)
        for _ in range(3):  # a second layout, if one was asked for, is drawn by then
            await pilot.pause()
        assert layouts.count == 1
        assert tree.size.width == width
        assert _rows_ageless(tree) == rows_before
        await pilot.resize_terminal(WIDE[0] - 20, WIDE[1])  # narrower: rows fitted again
        await wait_until(pilot, lambda: tree.size.width < width)
        await pilot.pause()
        assert _rows_ageless(tree) != rows_before


async def test_rows_drawn_before_the_scrollbar_came_are_drawn_again_in_line_with_the_header(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial at 80x24: the detail under the tree took a row more, the tree
    a row less brought its scrollbar, and the rows drawn before kept the width they had without
    it: their figures a column out of line with the header and with the rows drawn since."""

    async def add_job(number: int) -> Job:
        new = NewRun(agent="default", model="demo", input=f"job {number}", workspace=str(workspace))
        return await runtime.get_job((await runtime.store.create_run(new)).job_id)

    await add_job(0)
    app = make_app(runtime, workspace)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        tree = screen.job_tree
        detail = screen.query_one(BrowserDetail)
        detail.update("job")  # one row
        await wait_until(pilot, lambda: detail.size.height == 1)
        for number in range(1, tree.size.height):  # every row of the tree taken, no scrollbar
            tree.upsert_job(await add_job(number))
        await wait_until(pilot, lambda: len(tree.job_ids) == tree.size.height)
        await pilot.pause()
        assert not tree.show_vertical_scrollbar
        height = tree.size.height
        detail.update("run\nrunning")  # the tree a row shorter: its rows need the scrollbar
        await wait_until(pilot, lambda: tree.size.height == height - 1)
        await wait_until(pilot, lambda: tree.show_vertical_scrollbar)
        await pilot.pause()
        room = tree.scrollable_content_region.width
        rows = [tree.render_line(y).text[:room].rstrip() for y in range(tree.size.height)]
        header = rendered(screen.query_one(BrowserHeader)).rstrip()
        assert {len(row) for row in rows} == {len(header)}, rows


async def test_a_row_read_again_unchanged_is_not_drawn_again_and_a_changed_one_is(
    runtime: Runtime, workspace: Path
) -> None:
    """A run's rows are read again at each checkpoint and state change, mostly to the same
    cells: those rows are not drawn again (a redraw is a repaint in the next frame, after the
    one that showed the run's last words). A row whose cells change is."""
    await _two_finished_jobs(runtime)
    app = make_app(runtime, workspace, hide_ages=False)
    async with app.run_test(size=WIDE) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        tree = screen.job_tree
        job_node = tree.cursor_node
        assert job_node is not None
        job = job_node.data.job  # type: ignore[union-attr]
        job_node.expand()
        await wait_until(pilot, lambda: job.id in tree.loaded_runs and job_node.children)
        await pilot.pause()
        run_node = job_node.children[0]
        run = run_node.data.run  # type: ignore[union-attr]
        drawn = (job_node._updates, run_node._updates)
        tree.upsert_job(job.model_copy(update={"updated_at": job.updated_at + 0.1}))
        tree.upsert_run(run.model_copy(update={"updated_at": run.updated_at + 0.1}))
        assert (job_node._updates, run_node._updates) == drawn
        assert run_node.data.run.updated_at == run.updated_at + 0.1  # type: ignore[union-attr]
        tree.upsert_run(run.model_copy(update={"cost_usd": 1.25}))
        assert run_node._updates > drawn[1]
        assert "$1.25" in tree.row_text(run_node)


async def test_f_after_enter_on_a_checkpoint_forks_from_that_checkpoint(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial: Enter on 'step 1' opened the run (the focus went to the
    conversation) and f then forked from the run's last checkpoint, not from step 1."""
    run = await runtime.start("summarise this project")
    await finish_run(runtime, run.id)
    checkpoints = await runtime.checkpoints(run.id)
    assert len(checkpoints) >= 2
    app = make_app(runtime, workspace)
    async with app.run_test(size=WIDE) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        await _unfold_checkpoints(pilot, screen, run.id)
        await pilot.press("down", "enter")  # Enter on the first checkpoint opens its run
        await wait_until(pilot, lambda: screen.conversation.run_id == run.id)
        if screen.focused is not None and screen.typing():
            await pilot.press("escape")  # letters are keys again
        await pilot.press("f")
        await wait_until(pilot, lambda: "Fork step 1 of run" in screen_text(app))
        assert len((await runtime.list_jobs()).items) == 1  # asked first: nothing forked yet
        await pilot.press("y")
        await wait_until(
            pilot,
            lambda: screen.selected_run is not None and screen.selected_run.job_id != run.job_id,
        )
        forked = screen.selected_run
    assert forked is not None
    stored = await runtime.get_run(forked.id)
    assert stored.forked_from_checkpoint_id == checkpoints[0].id


async def test_a_forks_run_is_titled_with_its_source_and_step_as_agent_tui_runs_names_it(
    db_path: Path, runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial: a forked job's run read just "fork" in the browser."""
    run = await runtime.start("summarise this project")
    await finish_run(runtime, run.id)
    app = make_app(runtime, workspace)
    async with app.run_test(size=WIDE) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        await _unfold_checkpoints(pilot, screen, run.id)
        await pilot.press("down", "enter")  # the first checkpoint, opened
        await wait_until(pilot, lambda: screen.conversation.run_id == run.id)
        if screen.focused is not None and screen.typing():
            await pilot.press("escape")
        await pilot.press("f")
        await wait_until(pilot, lambda: "Fork step 1 of run" in screen_text(app))
        await pilot.press("y")
        await wait_until(
            pilot,
            lambda: screen.selected_run is not None and screen.selected_run.job_id != run.job_id,
        )
        forked = screen.selected_run
        assert forked is not None and forked.input is None
        tree = screen.job_tree
        await wait_until(pilot, lambda: tree.run_node(forked.id) is not None)
        row = tree.run_node(forked.id)
        assert row is not None
        title = "Fork of summarise this project at step 1"
        await pilot.press("escape")  # from the fork's question to the browser
        await wait_until(pilot, lambda: app.focused is tree)
        await pilot.press("w")  # the browser wide: the whole title in the row
        await wait_until(pilot, lambda: tree.row_text(row)[2:].startswith(title))
    process = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "agent-tui"),
        *("--db", str(db_path), "--workspace", str(workspace), "runs"),
        stdout=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(60):
        listed, _ = await process.communicate()
    [line] = [line for line in listed.decode().splitlines() if line.startswith(forked.id)]
    assert line.endswith(title)  # the JOB column of `agent-tui runs`: the same words


async def test_enter_on_a_checkpoint_shows_that_step_marked_and_the_cursor_stays_on_it(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial: Enter on '◆ step 2' put the cursor back on the run's row,
    the conversation stayed at the run's end, and nothing named the step (though f forked
    from it)."""
    run = await runtime.start("summarise this project")
    await finish_run(runtime, run.id)
    checkpoints = await runtime.checkpoints(run.id)
    assert len(checkpoints) >= 2
    first = checkpoints[0]
    app = make_app(runtime, workspace)
    async with app.run_test(size=WIDE) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        tree = screen.job_tree
        await _unfold_checkpoints(pilot, screen, run.id)
        await pilot.press("down")
        step_node = tree.cursor_node
        assert step_node is not None and isinstance(step_node.data, CheckpointEntry)
        assert step_node.data.checkpoint.id == first.id
        await pilot.press("enter")
        await wait_until(pilot, lambda: screen.conversation.run_id == run.id)
        await wait_until(pilot, lambda: screen.conversation.query(".-found"))
        await pilot.pause()
        assert tree.cursor_node is step_node
        marked = screen.conversation.query(".-found").first()
        messages = await runtime.all_messages(run.id)
        at_step = next(m for m in messages if m.position == first.last_position)
        # The step ended with its tool results: shown (and marked) with their calls.
        results = [b.tool_call_id for b in at_step.content if isinstance(b, ToolResultBlock)]
        assert getattr(marked, "tool_call_id", None) in results
        assert any(f"Step {first.step}:" in text for text in notifications(app))


async def test_the_footer_offers_f_on_a_checkpoints_row_and_not_off_it(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial: on '◆ step 1', f forked from that step, but the footer never
    showed it: the keys were not asked again as the cursor moved."""
    from tui.widgets.key_footer import FooterKey, KeyFooter

    run = await runtime.start("summarise this project")
    await finish_run(runtime, run.id)
    app = make_app(runtime, workspace)
    async with app.run_test(size=WIDE) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)

        def footer_keys() -> set[str]:
            return {key.key for key in screen.query_one(KeyFooter).query(FooterKey)}

        await _unfold_checkpoints(pilot, screen, run.id)  # the cursor on the run's row
        assert screen.selected_run is None  # nothing opened: no run to fork from
        await wait_until(pilot, lambda: "f" not in footer_keys())
        await pilot.press("down")
        assert isinstance(screen.job_tree.cursor_node.data, CheckpointEntry)  # type: ignore[union-attr]
        await wait_until(pilot, lambda: "f" in footer_keys())
        await pilot.press("up")
        await wait_until(pilot, lambda: "f" not in footer_keys())


async def test_f_asks_before_forking_and_no_forks_nothing(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial: words typed into the browser by mistake forked a job with
    their f, and its run called the model at once."""
    run = await runtime.start("summarise this project")
    await finish_run(runtime, run.id)
    first = (await runtime.checkpoints(run.id))[0]
    app = make_app(runtime, workspace)
    async with app.run_test(size=WIDE) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        tree = screen.job_tree
        tree.focus()
        await pilot.press("enter")
        await wait_until(pilot, lambda: screen.conversation.run_id == run.id)
        screen._opened_checkpoint = first  # as Enter on its row does
        if screen.focused is not None and screen.typing():
            await pilot.press("escape")
        await pilot.press("f")
        await wait_until(pilot, lambda: f"Fork step {first.step} of run" in screen_text(app))
        await pilot.press("n")
        await wait_until(pilot, lambda: any("Nothing was forked." in t for t in notifications(app)))
        assert f"Fork step {first.step}" not in screen_text(app)
    assert len((await runtime.list_jobs()).items) == 1


async def test_the_palette_offers_run_actions_only_where_they_make_sense_and_a_fork_is_labelled(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial: the palette offered "Cancel run" on a completed run, and a
    fork's run row read only "run"."""
    run = await runtime.start("summarise this project")
    await finish_run(runtime, run.id)
    first = (await runtime.checkpoints(run.id))[0]
    fork = await runtime.fork(first.id)
    await finish_run(runtime, fork.id)
    app = make_app(runtime, workspace, open_job=fork.job_id)
    async with app.run_test(size=WIDE) as pilot:
        screen = main_screen(app)
        await wait_until(
            pilot, lambda: screen.selected_run is not None and screen.selected_run.id == fork.id
        )
        titles = {command.title for command in app.get_system_commands(app.screen)}
        assert "Cancel run" not in titles and {"Fork", "Export job"} <= titles
        # Every action of the screen is in the palette (a trial missed these), not Textual's
        # "Keys" panel of the text box's keys.
        assert {
            "Archive job",
            "Browser width",
            "Conversation",
            "Next tool call",
            "Previous tool call",
            "Thinking",
        } <= titles
        assert "Keys" not in titles and "Undo archive" not in titles  # nothing archived yet
        await wait_until(pilot, lambda: screen.job_tree.run_node(fork.id) is not None)
        node = screen.job_tree.run_node(fork.id)
        assert node is not None
        assert "Fork of summarise this project" in screen.job_tree.row_text(node)
        waiting = await runtime.start("summarise again")
        await runtime.wait(waiting.id, timeout=10)
        screen.open_run(waiting.id)
        await wait_until(
            pilot, lambda: screen.selected_run is not None and screen.selected_run.id == waiting.id
        )
        titles = {command.title for command in app.get_system_commands(app.screen)}
        assert "Cancel run" in titles


async def test_a_job_of_another_folder_says_which_under_the_browser(
    db_path: Path, workspace: Path, tmp_path: Path
) -> None:
    """Found by a new-user trial: the browser lists the jobs of every folder, and nothing said
    which folder a job worked in."""
    other = tmp_path / "other-project"
    other.mkdir()
    elsewhere = await open_runtime(db_path, other)
    here = await open_runtime(db_path, workspace)
    try:
        theirs = await elsewhere.start("summarise that project")
        await finish_run(elsewhere, theirs.id)
        ours = await here.start("summarise this project")
        await finish_run(here, ours.id)
        app = make_app(here, workspace)
        async with app.run_test(size=WIDE) as pilot:
            screen = main_screen(app)
            await wait_for_browser(pilot, app)
            tree = screen.job_tree
            await wait_until(pilot, lambda: {ours.job_id, theirs.job_id} <= set(tree.job_ids))
            # Its row starts with the folder's name (the trial saw no hint on the row).
            theirs_row = tree.row_text(tree.job_node(theirs.job_id))  # type: ignore[arg-type]
            ours_row = tree.row_text(tree.job_node(ours.job_id))  # type: ignore[arg-type]
            assert theirs_row.startswith("✓ other-project: summarise th"), theirs_row
            assert "other-project" not in ours_row
            # Narrow, an arrow says it all the same (the name does not fit).
            await pilot.resize_terminal(80, 24)
            await wait_until(
                pilot,
                lambda: tree.row_text(tree.job_node(theirs.job_id)).startswith("✓ ↗ summ"),  # type: ignore[arg-type]
            )
            assert "↗" not in tree.row_text(tree.job_node(ours.job_id))  # type: ignore[arg-type]
            tree.move_cursor(tree.job_node(theirs.job_id))
            assert f"in {other}" in tree.detail_text()
            tree.move_cursor(tree.job_node(ours.job_id))
            assert " in " not in tree.detail_text()
    finally:
        await here.close()
        await elsewhere.close()


def test_the_filter_names_read_as_words() -> None:
    """Found by a new-user trial: 'filter: input_required', 'no input_required job'."""
    from runtime.kinds import RunState

    assert browser_filters.filter_name(RunState.INPUT_REQUIRED) == "input required"
    assert browser_filters.empty_text(RunState.INPUT_REQUIRED) == (
        "no input required job (s: next filter)"
    )
    assert browser_filters.filter_name(browser_filters.INTERRUPTED) == "interrupted"
    assert browser_filters.filter_name(None) == "all"


async def test_answering_a_run_opened_at_a_search_hit_follows_it_to_its_tail(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial: a run opened from a search result stayed scrolled at the hit
    after its prompt was answered; what the run did next landed out of view, unannounced."""
    run = await runtime.start("summarise this project")
    boundary = await runtime.wait(run.id, timeout=10)
    assert boundary.request is not None  # the demo's question
    app = make_app(runtime, workspace)
    async with app.run_test(size=WIDE) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        conversation = screen.conversation
        conversation.page = 4  # the hit's window ends well before the run's tail
        screen.open_run(run.id, at_position=1)
        await wait_until(pilot, lambda: conversation.run_id == run.id and screen.open_request)
        await wait_until(pilot, lambda: conversation.query(".-found"))
        assert conversation.has_newer and not conversation.following
        await wait_until(pilot, lambda: screen.query(QuestionPrompt))
        screen.query_one(QuestionPrompt).focus()
        await pilot.press("1", "enter")
        await wait_until(pilot, lambda: conversation.following)
        stored = await runtime.get_run(run.id)
        assert stored.state.value in ("queued", "running", "input_required")


def _job_order(tree: JobTree) -> list[str]:
    """The jobs' ids as the browser lists them, top first."""
    return [c.data.job.id for c in tree.root.children if isinstance(c.data, JobEntry)]


async def test_a_job_with_new_activity_goes_up_to_its_place_and_the_cursor_stays_put(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial: in an agent-tui left open, a job worked from elsewhere kept
    its row under jobs idle for minutes (a new launch sorted it by activity)."""
    await _two_finished_jobs(runtime)
    app = make_app(runtime, workspace)
    async with app.run_test(size=WIDE) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        tree = screen.job_tree

        await wait_until(pilot, lambda: len(_job_order(tree)) == 2)
        newer, older = _job_order(tree)
        newer_node = tree.job_node(newer)
        assert tree.cursor_node is newer_node
        run = await runtime.follow_up(older, "and list the files")  # as another process would
        await finish_run(runtime, run.id)
        await wait_until(pilot, lambda: _job_order(tree) == [older, newer])
        assert tree.cursor_node is tree.job_node(newer)  # still on the row it was on


async def test_an_expanded_job_with_new_activity_goes_up_expanded_with_the_cursor_on_it(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial: a job expanded (▼) and followed up from elsewhere stayed
    under an older job, its "upd" column contradicting the order, while a folded one went up."""
    await _two_finished_jobs(runtime)
    app = make_app(runtime, workspace)
    async with app.run_test(size=WIDE) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        tree = screen.job_tree

        await wait_until(pilot, lambda: len(_job_order(tree)) == 2)
        newer, older = _job_order(tree)
        (first_run,) = await runtime.job_runs(older)
        await pilot.press("down", "space")  # the older job, expanded: its run under it
        await wait_until(pilot, lambda: tree.run_node(first_run.id) is not None)
        older_node = tree.job_node(older)
        assert older_node is not None and older_node.is_expanded
        assert tree.cursor_node is older_node

        run = await runtime.follow_up(older, "what about main")  # as another process would
        await finish_run(runtime, run.id)
        await wait_until(pilot, lambda: _job_order(tree) == [older, newer])
        moved = tree.job_node(older)
        assert moved is not None and moved.is_expanded
        await wait_until(pilot, lambda: tree.run_node(run.id) is not None)
        assert [tree.run_node(first_run.id), tree.run_node(run.id)] == list(moved.children)
        assert tree.cursor_node is moved  # still on the row it was on
        rows = [tree.row_text(node) for node in tree._visible_nodes()]
        assert len(rows) == 4  # the two jobs, the moved one's two runs: nothing doubled


async def test_a_follow_up_typed_here_takes_its_expanded_job_up_with_the_cursor_on_its_run(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial: "▼ ● draft answer test" stayed 4th while its follow-up, sent
    in the same agent-tui, ran."""
    await _two_finished_jobs(runtime)
    app = make_app(runtime, workspace)
    async with app.run_test(size=WIDE) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        tree = screen.job_tree
        await wait_until(pilot, lambda: len(tree.job_ids) == 2)
        newer, older = tree.job_ids
        await pilot.press("down", "enter")  # the older job opened: its run row under it
        await wait_until(pilot, lambda: screen.composer.follow_up_job_id == older)
        await pilot.press("ctrl+t", *"what about main", "enter")
        await wait_until(pilot, lambda: len(tree._job_runs.get(older, {})) == 2)
        (follow_up,) = [
            run for run in await runtime.job_runs(older) if run.input == "what about main"
        ]
        await finish_run(runtime, follow_up.id)
        await wait_until(
            pilot, lambda: list(tree.root.children) == [tree.job_node(older), tree.job_node(newer)]
        )
        moved = tree.job_node(older)
        assert moved is not None and moved.is_expanded
        await wait_until(pilot, lambda: tree.cursor_node is tree.run_node(follow_up.id))


async def test_a_sent_slash_fork_leaves_no_draft_behind_to_fork_again(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial: "/fork focus on TODOs instead", sent, came back in the
    job's box after a relaunch (its saved draft was never cleared), and Enter forked again."""
    run = await runtime.start("summarise this project")
    await finish_run(runtime, run.id)
    app = make_app(runtime, workspace, open_job=run.job_id)
    async with app.run_test(size=WIDE) as pilot:
        screen = main_screen(app)
        await wait_until(pilot, lambda: screen.composer.follow_up_job_id == run.job_id)
        screen.composer.focus_input()
        await pilot.press(*"/fork focus on TODOs instead")

        async def draft_until(holds: Callable[[str], bool]) -> None:
            async with asyncio.timeout(10):
                while not holds(await composer_text(runtime.store, run.job_id)):
                    await pilot.pause(0.05)

        await draft_until(lambda text: "/fork" in text)  # saved as one types: a quit keeps it
        await pilot.press("enter")
        await wait_until(
            pilot,
            lambda: screen.selected_job is not None and screen.selected_job.id != run.job_id,
        )
        await draft_until(lambda text: text == "")


async def test_a_checkpoints_marked_step_stays_in_view_as_the_diffs_above_it_load(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial: Enter on the last step scrolled to its answer, then the
    write's applied diff above it loaded and pushed the marked answer below the screen."""
    run = await runtime.start("summarise this project")
    await finish_run(runtime, run.id)
    last = (await runtime.checkpoints(run.id))[-1]
    app = make_app(runtime, workspace)
    async with app.run_test(size=WIDE) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        screen.open_run(run.id, at_position=last.last_position)
        conversation = screen.conversation
        await wait_until(pilot, lambda: conversation.query(".-found"))
        diff = conversation.query("#applied-diff")
        await wait_until(pilot, lambda: any(d.display for d in diff))  # the diff came in
        await pilot.pause()

        def marked_in_view() -> bool:
            marked = conversation.query(".-found").first()
            return conversation.region.overlaps(marked.region) and marked.region.height > 0

        await wait_until(pilot, marked_in_view)


async def test_a_task_typed_right_after_ctrl_t_in_the_browser_goes_to_the_highlighted_job(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial in tmux: ctrl+t on a highlighted job, then a task typed at
    once ("Audit calc.py…"): its letters ran the browser's keys (i opened the inbox), and the
    composer's line read "Follow-up in:" with no title (the job's run waits for input)."""
    waiting = await runtime.start("summarise")
    await runtime.wait(waiting.id, timeout=10)
    app = make_app(runtime, workspace)
    async with app.run_test(size=WIDE) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        send_burst(app, ["ctrl+t", *"Audit calc.py"])  # all queued before ctrl+t is handled
        await wait_until(
            pilot,
            lambda: app.screen is not screen or screen.composer.input.text == "Audit calc.py",
        )
        assert app.screen is screen  # no inbox
        assert app.focused is screen.composer.input
        assert screen.composer.follow_up_job_id == waiting.job_id
        assert "↪ Follow-up in: summarise  (ctrl+t" in screen_text(app)


async def test_ctrl_t_on_another_job_names_that_job_and_leaves_the_first_its_draft(
    runtime: Runtime, workspace: Path
) -> None:
    """ctrl+t in the browser gave the composer the highlighted job but not its title: the line
    still named the job opened before, while the message would go to the other one, and so
    would the words typed for the first."""
    await _two_finished_jobs(runtime)
    app = make_app(runtime, workspace)
    async with app.run_test(size=WIDE) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        tree = screen.job_tree
        first, other = tree.job_ids  # "list the TODOs" (the newest, on top), "summarise …"
        await pilot.press("enter")
        await wait_until(pilot, lambda: screen.composer.follow_up_job_id == first)
        await pilot.press("ctrl+t", *"for the first job", "escape")
        await wait_until(pilot, lambda: app.focused is tree)
        tree.move_cursor(tree.job_node(other))
        await pilot.press("ctrl+t")
        await wait_until(pilot, lambda: screen.composer.follow_up_job_id == other)
        assert app.focused is screen.composer.input
        assert "↪ Follow-up in: summarise this project" in screen_text(app)
        assert screen.composer.input.text == ""
        await pilot.press("ctrl+q")
    assert await composer_text(runtime.store, first) == "for the first job"
    assert await composer_text(runtime.store, other) == ""


async def test_ctrl_t_on_another_jobs_row_opens_that_jobs_conversation_and_enter_posts_there(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial: job A opened, Esc, the cursor on job B without Enter, ctrl+t:
    the conversation still showed A while the box said "Follow-up in: B" and Enter posted
    into B; nothing said the reply went elsewhere than what was read."""
    await _two_finished_jobs(runtime)
    app = make_app(runtime, workspace)
    async with app.run_test(size=WIDE) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        tree = screen.job_tree
        first, other = tree.job_ids
        (first_run,) = await runtime.job_runs(first)
        (other_run,) = await runtime.job_runs(other)
        await pilot.press("enter")
        await wait_until(pilot, lambda: screen.conversation.run_id == first_run.id)
        tree.move_cursor(tree.job_node(other))
        await pilot.press("ctrl+t")
        await wait_until(pilot, lambda: screen.conversation.run_id == other_run.id)
        assert screen.selected_job is not None and screen.selected_job.id == other
        assert screen.composer.follow_up_job_id == other
        assert app.focused is screen.composer.input  # the keys stay in the box
        await pilot.press(*"and the tests", "enter")
        await wait_until(pilot, lambda: screen.conversation.run_id not in (other_run.id, None))
        runs = await runtime.job_runs(other)
        assert [run.input for run in runs] == [
            "summarise this project and then some more words",
            "and the tests",
        ]
        assert screen.conversation.run_id == runs[-1].id


async def _an_older_and_a_newer_job(runtime: Runtime) -> tuple[Run, Run]:
    older = await runtime.start("summarise this project")
    await finish_run(runtime, older.id)
    newer = await runtime.start("list the TODOs")
    await finish_run(runtime, newer.id)
    return older, newer


async def _cursor_on_the_older_jobs_run(
    pilot: Pilot[object], screen: MainScreen, older: Run, newer: Run
) -> None:
    """The newer job on screen, the browser's cursor on the older job's run row (unfolded)."""
    await wait_until(pilot, lambda: screen.composer.follow_up_job_id == newer.job_id)
    tree = screen.job_tree
    tree.focus()
    older_row = tree.job_node(older.job_id)
    assert older_row is not None
    older_row.expand()
    await wait_until(pilot, lambda: tree.run_node(older.id) is not None)
    tree.move_cursor(tree.run_node(older.id))


async def test_ctrl_t_on_a_runs_row_follows_up_that_runs_job(
    runtime: Runtime, workspace: Path
) -> None:
    """A run's row, unfolded under its job, is highlighted as much as the job's own: ctrl+t
    on it followed up the job on screen instead (or, with none, said "Select a job first")."""
    older, newer = await _an_older_and_a_newer_job(runtime)
    app = make_app(runtime, workspace, open_job=newer.job_id)
    async with app.run_test(size=WIDE) as pilot:
        screen = main_screen(app)
        await _cursor_on_the_older_jobs_run(pilot, screen, older, newer)
        await pilot.press("ctrl+t")
        await wait_until(pilot, lambda: app.focused is screen.composer.input)
        assert screen.composer.follow_up_job_id == older.job_id
        assert "↪ Follow-up in: summarise this project" in screen_text(app)


async def test_x_on_a_runs_row_archives_that_runs_job_not_the_one_on_screen(
    runtime: Runtime, workspace: Path
) -> None:
    older, newer = await _an_older_and_a_newer_job(runtime)
    app = make_app(runtime, workspace, open_job=newer.job_id)
    async with app.run_test(size=WIDE) as pilot:
        screen = main_screen(app)
        await _cursor_on_the_older_jobs_run(pilot, screen, older, newer)
        await pilot.press("x")
        await wait_until(pilot, lambda: any("Archived" in t for t in notifications(app)))
    assert (await runtime.get_job(older.job_id)).archived
    assert not (await runtime.get_job(newer.job_id)).archived


async def _streaming_in_the_tui(
    pilot: Pilot[Any], screen: MainScreen, task: str = "summarise this project"
) -> Run:
    """``task`` sent from the composer, until the status line counts its streamed text: the
    run (the demo model at a crawl keeps it streaming its plan for a while)."""
    await pilot.press(*task, "enter")
    await wait_until(pilot, lambda: screen.status.streamed_chars > 0)
    run = screen.status.run
    assert run is not None
    return run


async def _streaming_under_the_cursor(
    pilot: Pilot[Any], screen: MainScreen
) -> tuple[Run, BrowserDetail]:
    """A task streaming in the TUI with the browser's cursor on its run: the run, the detail."""
    run = await _streaming_in_the_tui(pilot, screen)
    tree = screen.job_tree
    await wait_until(pilot, lambda: tree.run_node(run.id) is not None)
    tree.move_cursor(tree.run_node(run.id))
    return run, screen.query_one(BrowserDetail)


async def test_a_streaming_run_shows_its_live_token_estimate_and_updated_now_in_the_browser(
    db_path: Path, workspace: Path
) -> None:
    """Found by a new-user trial: while a run streamed, its row and the detail said "tok 0"
    and "updated 6m ago"; only the status line had the live estimate."""
    runtime = await open_runtime(db_path, workspace, chunk_delay=0.5)
    try:
        app = make_app(runtime, workspace, hide_ages=False)
        async with app.run_test(size=WIDE) as pilot:
            screen = main_screen(app)
            run = await _streaming_in_the_tui(pilot, screen)
            tree = screen.job_tree
            await wait_until(pilot, lambda: tree.run_node(run.id) is not None)
            run_row, job_row = tree.run_node(run.id), tree.job_node(run.job_id)
            assert run_row is not None and job_row is not None
            tree.move_cursor(run_row)
            detail = screen.query_one(BrowserDetail)
            await wait_until(pilot, lambda: " · ~" in rendered(detail))
            for row in (run_row, job_row):
                figures = tree.row_text(row).split()  # no cost column: the demo is free
                assert figures[-2] == "now", figures
                assert figures[-1].startswith("~") and figures[-1] != "~0", figures
            assert "running · updated now · ~" in rendered(detail)
            estimate = int(rendered(detail).split("~")[1].split()[0])
            assert 0 < estimate * 4 <= screen.status.streamed_chars
    finally:
        await runtime.close()


def _tokens_and_cost(status_text: str) -> list[str]:
    """The tokens and the cost as the status line shows them (["~16", "$0.0000"])."""
    parts = status_text.split(" │ ")
    [count] = [part.removesuffix(" tok") for part in parts if part.endswith(" tok")]
    [money] = [part for part in parts if part.startswith("$")]
    return [count, money]


async def test_the_row_of_the_run_on_screen_shows_the_status_lines_figures_as_it_streams(
    db_path: Path, workspace: Path
) -> None:
    """Found by a new-user trial: one screen read "~125" on a run's row and "~238" on its
    status line. The rows kept a count of their own over their own copy of the run, which a
    page of the job's runs read before a step was committed put back. The row shows the
    status line's figures, and a late page never puts back an older copy of a run."""
    first_call, second_call = asyncio.Event(), asyncio.Event()
    runtime, provider, tool = await _held_step_runtime(db_path, workspace, first_call, second_call)
    try:
        tool.release.set()
        run = await runtime.start("fetch it")
        read_before_its_steps = await runtime.get_run(run.id)
        app = make_app(runtime, workspace, open_job=run.job_id)
        async with app.run_test(size=WIDE) as pilot:
            screen = main_screen(app)
            status, tree = screen.status, screen.job_tree
            await wait_until(pilot, lambda: status.working)
            first_call.set()
            await wait_until(
                pilot, lambda: len(provider.requests) == 2 and status.streamed_chars > 0
            )
            await wait_until(pilot, lambda: tree.run_node(run.id) is not None)
            # A page of the job's runs read before its first step came late.
            screen.post_message(RunsLoaded(run.job_id, [read_before_its_steps]))
            await pilot.pause()
            row = tree.run_node(run.id)
            assert row is not None
            assert tree.row_text(row).split()[-2:] == _tokens_and_cost(status.text)
            assert "~" in status.text  # an estimate, the same on both
            second_call.set()
            await wait_until(pilot, lambda: "completed" in status.text)
            assert tree.row_text(row).split()[-2:] == _tokens_and_cost(status.text)
            assert "~" not in status.text  # the counted figures, the same on both
    finally:
        await runtime.close()


async def test_the_detail_under_the_browser_says_the_status_lines_figure_with_each_delta(
    db_path: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by a new-user trial: while a run streamed, the detail said "~530 tok · $0.00" and
    the status line "~582 tok" (the detail was drawn a tick behind the status line)."""
    monkeypatch.setattr(job_tree, "LIVE_TICK", 24 * 3600.0)  # no tick: the deltas must do it
    runtime = await open_runtime(db_path, workspace, chunk_delay=0.05)
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=(120, 40)) as pilot:
            screen = main_screen(app)
            run, detail = await _streaming_under_the_cursor(pilot, screen)
            status = screen.status

            def figures() -> tuple[str, str]:
                [shown] = [
                    p for p in rendered(detail).replace("\n", " · ").split(" · ") if "tok" in p
                ]
                return shown.split()[0], _tokens_and_cost(rendered(status))[0]

            start, compared = status.streamed_chars, 0
            for more in (40, 80, 120):  # ten tokens more each time, several deltas apart
                await wait_until(pilot, lambda more=more: status.streamed_chars >= start + more)
                assert status.run is not None
                if status.run.usage.total_tokens != run.usage.total_tokens:
                    break  # the provider counted: the estimate starts again
                in_detail, in_status = figures()
                assert in_detail.startswith("~") and in_detail == in_status
                compared += 1
            assert compared
    finally:
        await runtime.close()


async def test_a_run_working_in_another_process_reads_updated_now_here_with_its_counted_tokens(
    db_path: Path, workspace: Path
) -> None:
    """Found by a new-user trial: a run streaming in one agent-tui read "now ~2.4k" in its
    browser and "25s 0" in another one's. It works now, in both: its rows read "now" in every
    window. The tokens are the counted ones, as `agent-tui show` prints them, where its text
    does not stream (it is not on screen here): no estimate, no "~"."""
    gate = asyncio.Event()
    provider = ScriptedProvider([Turn("working on it " * 20, gate=gate)])
    elsewhere = await open_scripted(provider, db_path, workspace)
    runtime = await open_runtime(db_path, workspace)
    try:
        run = await elsewhere.start("a long task")
        await asyncio.wait_for(provider.started.wait(), timeout=30)
        app = make_app(runtime, workspace, hide_ages=False)
        async with app.run_test(size=WIDE) as pilot:
            screen = main_screen(app)
            tree = screen.job_tree
            await wait_for_browser(pilot, app)
            screen.load_runs(run.job_id)
            await wait_until(pilot, lambda: tree.run_node(run.id) is not None)
            job_row, run_row = tree.job_node(run.job_id), tree.run_node(run.id)
            assert job_row is not None and run_row is not None
            tree.move_cursor(job_row)
            tree.now = time.time() + 25  # its row was last updated 25 s ago
            for row in (job_row, run_row):
                assert tree.row_text(row).split()[-2:] == ["now", "0"]  # free: no cost column
            assert "updated now · 0 tokens" in tree.detail_text()
            gate.set()

            def shown_state() -> RunState | None:
                node = tree.run_node(run.id)
                data = node.data if node is not None else None
                return data.run.state if isinstance(data, RunEntry) else None

            await wait_until(pilot, lambda: shown_state() is RunState.COMPLETED)
            ended_row = tree.run_node(run.id)
            assert ended_row is not None
            tree.now = time.time() + 25
            assert tree.row_text(ended_row).split()[-3] == "25s"  # done: its age again
    finally:
        await runtime.close()
        await elsewhere.close()


async def test_a_streaming_runs_deltas_redraw_its_row_at_most_once_a_tick(
    db_path: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Streaming throughput has a budget (DESIGN §13): the rows count every delta but are drawn
    with the first piece and then at most once a ``LIVE_TICK``, not once a delta."""
    monkeypatch.setattr(job_tree, "LIVE_TICK", 24 * 3600.0)  # no tick during the test
    runtime = await open_runtime(db_path, workspace, chunk_delay=0.5)
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=WIDE) as pilot:
            screen = main_screen(app)
            run = await _streaming_in_the_tui(pilot, screen)
            tree = screen.job_tree
            await wait_until(pilot, lambda: tree.run_node(run.id) is not None)
            run_row = tree.run_node(run.id)
            assert run_row is not None
            await wait_until(pilot, lambda: "~" in tree.row_text(run_row))
            shown = tree.row_text(run_row)
            redrawn: list[str] = []
            redraw = tree._redraw_rows
            monkeypatch.setattr(tree, "_redraw_rows", lambda r, j: redrawn.append(r))
            counted = screen.status.streamed_chars
            for delta in range(1, 201):
                tree.show_streamed(run, counted + 40 * delta)  # as the status line counts
            assert redrawn == []  # 200 deltas, no redraw of the rows
            monkeypatch.setattr(tree, "_redraw_rows", redraw)
            tree._show_live()  # the tick
            assert tree.row_text(run_row) != shown  # counted: the tick shows it
    finally:
        await runtime.close()


async def test_a_streaming_runs_count_is_drawn_once_a_spinner_turn_in_the_status_line_and_detail(
    db_path: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A frame draws every widget in the rectangle around all that changed: the status line
    (the screen's width, at the bottom) redrawn at each delta put the whole screen in every
    frame of a stream, the browser and the composer too. While the spinner turns, a delta only
    counts; the spinner's next turn draws the count, in the status line and in the browser's
    detail together (they show the same estimate)."""
    runtime = await open_runtime(db_path, workspace, chunk_delay=0.5)
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=(120, 40)) as pilot:
            screen = main_screen(app)
            run, detail = await _streaming_under_the_cursor(pilot, screen)
            status = screen.status
            await wait_until(pilot, lambda: status.working and " · ~" in rendered(detail))
            assert status.run is not None
            drawn: list[str] = []
            update = status.update
            monkeypatch.setattr(status, "update", lambda text="", **kw: drawn.append(str(text)))
            shown_in_detail = rendered(detail)
            for _ in range(200):  # deltas between two turns of the spinner
                status.streamed(run.id, 40)
            assert drawn == []
            assert rendered(detail) == shown_in_detail
            monkeypatch.setattr(status, "update", update)
            status._spin()  # the spinner's turn
            in_detail = [p for p in rendered(detail).split(" · ") if p.startswith("~")]
            assert in_detail and in_detail[0].split()[0] == _tokens_and_cost(rendered(status))[0]
    finally:
        await runtime.close()


async def _started_elsewhere(db_path: Path, workspace: Path, task: str) -> str:
    """``task`` run to its end by another agent-tui on the same database; its job's id."""
    elsewhere = await open_runtime(db_path, workspace)
    try:
        run = await elsewhere.start(task)
        await finish_run(elsewhere, run.id)
        return run.job_id
    finally:
        await elsewhere.close()


async def _tab_to_the_browser(pilot: Pilot[Any], screen: MainScreen) -> Job | None:
    """Tab from the composer, as a person goes to the browser: the job under its cursor."""
    await pilot.press("tab")
    await wait_until(pilot, lambda: screen.app.focused is screen.job_tree)
    return screen.job_tree.cursor_job()


async def test_a_job_started_elsewhere_takes_the_cursor_that_waits_on_the_newest_job(
    db_path: Path, workspace: Path
) -> None:
    """Found by a new-user trial: a second agent-tui, launched and untouched, was sent a job by
    the first; Tab from its composer landed on the job below it, not on the newest one."""
    runtime = await open_runtime(db_path, workspace)
    try:
        await finish_run(runtime, (await runtime.start("the older job")).id)
        app = make_app(runtime, workspace)
        async with app.run_test(size=WIDE) as pilot:
            screen = main_screen(app)
            tree = screen.job_tree
            await wait_until(pilot, lambda: tree.cursor_node is not None)
            newer = await _started_elsewhere(db_path, workspace, "the newer job")
            await wait_until(pilot, lambda: _job_order(tree)[:1] == [newer])
            job = await _tab_to_the_browser(pilot, screen)
            assert job is not None and job.id == newer
    finally:
        await runtime.close()


async def test_on_an_empty_database_the_first_job_started_elsewhere_gets_the_cursor(
    db_path: Path, workspace: Path
) -> None:
    """The same trial: on a database with no job at launch, Tab found no cursor at all."""
    runtime = await open_runtime(db_path, workspace)
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=WIDE) as pilot:
            screen = main_screen(app)
            await wait_until(pilot, lambda: screen._recovery_reported)  # its first page, empty
            job_id = await _started_elsewhere(db_path, workspace, "the first job")
            await wait_until(pilot, lambda: _job_order(screen.job_tree) == [job_id])
            job = await _tab_to_the_browser(pilot, screen)
            assert job is not None and job.id == job_id
    finally:
        await runtime.close()


async def test_a_cursor_the_person_moved_stays_on_its_row_when_a_job_comes_from_elsewhere(
    db_path: Path, workspace: Path
) -> None:
    runtime = await open_runtime(db_path, workspace)
    try:
        await _two_finished_jobs(runtime)
        app = make_app(runtime, workspace)
        async with app.run_test(size=WIDE) as pilot:
            screen = main_screen(app)
            tree = screen.job_tree
            await wait_for_browser(pilot, app)
            await wait_until(pilot, lambda: len(_job_order(tree)) == 2)
            older = _job_order(tree)[1]
            await pilot.press("down", "shift+tab")  # back to the composer
            await wait_until(pilot, lambda: app.focused is screen.composer.input)
            newer = await _started_elsewhere(db_path, workspace, "the newer job")
            await wait_until(pilot, lambda: _job_order(tree)[:1] == [newer])
            job = await _tab_to_the_browser(pilot, screen)
            assert job is not None and job.id == older
    finally:
        await runtime.close()


async def test_a_job_titled_with_square_brackets_is_shown_as_typed_not_read_as_markup(
    runtime: Runtime, workspace: Path
) -> None:
    """A prompt with brackets that read as markup ("[/usr]" closes a tag never opened) made the
    browser raise MarkupError: the app quit at every start while that job was in the database.
    Others lost their brackets ("a [b] c" showed "a  c") or turned into emoji (":smile:")."""
    earlier = "fix the [/usr] path"
    run = await runtime.start(earlier)
    await finish_run(runtime, run.id)
    app = make_app(runtime, workspace)
    async with app.run_test(size=WIDE) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        typed = "keep a [b] c and :smile: as typed"
        screen.composer.focus_input()
        assert screen.composer.follow_up_job_id is None  # a new job
        await pilot.press(*typed, "enter")
        tree = screen.job_tree
        await wait_until(pilot, lambda: len(tree._jobs) == 2)
        await pilot.pause()
        rows = [tree.row_text(node) for node in tree._visible_nodes()]
        assert any(earlier in row for row in rows), rows
        assert any(typed[:30] in row for row in rows), rows
        assert app.is_running
