"""Huge runs and long jobs (DESIGN §12, §13): a run opens at its tail; scrolling up loads older
messages and the job's earlier root runs from the database, and however far one scrolls, the
number of mounted message widgets stays under a fixed bound."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.actions import SkipAction
from textual.widgets import Markdown, OptionList

from runtime.events import RunNoted
from runtime.models import (
    Role,
    TextBlock,
    ToolCallState,
    ToolResultBlock,
    ToolUseBlock,
)
from runtime.store.base import NewMessage, NewToolCall, ToolStateChange
from runtime.store.migrations import migrate
from runtime.store.stored_content import register_functions
from runtime.transcript_pages import ItemKey, Keyed
from tests.store.helpers import running_run
from tests.tui.helpers import make_app, open_runtime, screen_text, wait_for_browser
from tui.screens.main import MainScreen
from tui.widgets.conversation import Conversation, Pager
from tui.widgets.frozen_markdown import FrozenMarkdown
from tui.widgets.message_view import MessageView
from tui.widgets.stream_text import StreamText
from tui.widgets.tool_call_view import ToolCallView

MESSAGES = 3000
WINDOW = 100
PAGE = 50
SIZE = (100, 30)
BOUND = WINDOW + PAGE
"""The window, plus one page loaded before the far end is unmounted."""


def fill_job(db_path: Path, workspace: Path, runs: list[int], *, apart: float = 0.0) -> list[str]:
    """One job with a root run per entry of ``runs`` (that many messages each, created in that
    order, ``apart`` seconds from one another), written through the store's real schema; the
    runs' ids, oldest first. Message texts say "Run R message N." so a test can tell which are
    mounted."""
    conn = sqlite3.connect(db_path, isolation_level=None)
    migrate(conn, path=str(db_path))
    conn.execute("BEGIN")
    run_ids = [f"run{index + 1}" for index in range(len(runs))]
    conn.execute(
        "INSERT INTO jobs (id, title, workspace, agent, created_at, updated_at,"
        " latest_root_run_id, latest_run_state) VALUES ('job1', 'A very long job', ?, 'default',"
        " 1700000000, 1700000000, ?, 'completed')",
        (str(workspace), run_ids[-1]),
    )
    for index, (run_id, count) in enumerate(zip(run_ids, runs, strict=True)):
        created = 1700000000 + index
        conn.execute(
            "INSERT INTO runs (id, job_id, agent, model, state, revision, input, max_steps,"
            " created_at, updated_at) VALUES (?, 'job1', 'default', 'demo', 'completed', 3,"
            " 'x', 50, ?, ?)",
            (run_id, created, created),
        )
        rows = []
        for position in range(count):
            role = "user" if position % 2 == 0 else "assistant"
            text = f"Run {index + 1} message {position}. " + "Words that fill a line. " * (
                position % 4
            )
            content = json.dumps([{"type": "text", "text": text}])
            at = created + position * apart
            rows.append((f"{run_id}-m{position}", run_id, "job1", position, role, content, at))
        conn.executemany(
            "INSERT INTO messages (id, run_id, job_id, position, role, content, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
    conn.execute("COMMIT")
    conn.close()
    return run_ids


@pytest.fixture
async def db_path(tmp_path: Path) -> Path:
    return tmp_path / "big.db"


async def wait_until(condition: Callable[[], object], timeout: float = 120) -> None:
    """Let the app run (and paint at its own pace) until ``condition()`` holds."""
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.02)


async def _open_at_tail(app: Any, run_id: str, *, page: int, last: int) -> Conversation:
    """Open ``run_id`` on the main screen, ``page`` messages a page, and wait for its tail:
    the message at position ``last``."""
    screen = app.screen
    assert isinstance(screen, MainScreen)
    conversation = screen.conversation
    conversation.page = page
    screen.open_run(run_id)
    await wait_until(lambda: conversation.last_position == last)
    return conversation


REPRESS_AFTER = 0.3
"""Seconds before Home or End is pressed again when the last press brought nothing."""


async def press_until(
    conversation: Conversation, press: Callable[[], None], changed: Callable[[], bool]
) -> None:
    """Press Home or End (``press``) until ``changed()`` holds with no page loading, pressing
    again when a press brought nothing, as a person does: once nothing loads, the view is not
    scrolling, and REPRESS_AFTER has gone by. (Pressed every 20 ms, a loaded machine's next
    frame came after the next press, so each press restarted the smooth scroll from where the
    last one stood: the view never left the bottom.) Fails with what the window looked like
    after 120 s."""
    animator = conversation.app.animator
    pressed_at = -REPRESS_AFTER
    try:
        async with asyncio.timeout(120):
            while True:
                idle = not conversation.page_loading
                if idle and changed():
                    return
                now = time.monotonic()
                scrolling = animator.is_being_animated(conversation, "scroll_y")
                if idle and not scrolling and now - pressed_at >= REPRESS_AFTER:
                    pressed_at = now
                    with contextlib.suppress(SkipAction):  # nothing to scroll: the key goes on
                        press()
                await asyncio.sleep(0.02)
    except TimeoutError:
        c = conversation
        state = {
            "has_older": c.has_older,
            "has_newer": c.has_newer,
            "loading": c.page_loading,
            "scroll_y": c.scroll_y,
            "max_scroll_y": c.max_scroll_y,
            "virtual": c.virtual_size,
            "size": c.size,
            "groups": len(c._groups),
            "first": c.first_position,
            "last": c.last_position,
        }
        raise AssertionError(f"the window never moved: {state}") from None


async def older_page(conversation: Conversation) -> None:
    """Press Home until an older page came in, or until the view learnt that nothing older is
    left: when the page before was the last one and full, only the next look finds nothing,
    and then the first item stays the same (waiting for it to change waited forever)."""
    first = conversation.first_key
    await press_until(
        conversation,
        conversation.action_scroll_home,
        lambda: conversation.first_key != first or not conversation.has_older,
    )


async def newer_page(conversation: Conversation) -> None:
    """Press End until a newer page came in, or until the view learnt that it is at the tail
    (see ``older_page``: a full last page, then a look that finds nothing)."""
    last = conversation.last_key
    await press_until(
        conversation,
        conversation.action_scroll_end,
        lambda: conversation.last_key != last or not conversation.has_newer,
    )


def _static_text(widget: object) -> str:
    from textual.widgets import Static

    return str(widget.render()) if isinstance(widget, Static) else ""


def _mounted(conversation: Conversation) -> int:
    return len(conversation.query(MessageView))


async def _mounted_once_trimmed(conversation: Conversation) -> int:
    """The message widgets mounted once the window's last trim has finished removing what it
    trimmed (a removal completes a moment after the page settles): every one left belongs to
    a group the conversation keeps."""

    def removed_all() -> bool:
        kept = {widget for group in conversation._groups for widget in group.widgets}
        return set(conversation.query(MessageView)) <= kept

    await wait_until(removed_all)
    return _mounted(conversation)


async def _scroll_to_top(conversation: Conversation, most: list[int]) -> None:
    """Scroll to the top of what is mounted until nothing older is left; ``most`` gets the
    largest number of message widgets mounted on the way."""
    for _ in range(10_000):  # a bound: each step loads a page
        if not conversation.has_older and not conversation.page_loading:
            return
        await older_page(conversation)
        most.append(await _mounted_once_trimmed(conversation))
        assert most[-1] <= BOUND


def _light(view: MessageView) -> bool:
    if view.role is Role.USER:
        return not view.query(FrozenMarkdown) and len(view.query(StreamText)) >= 1
    return len(view.query(FrozenMarkdown)) == 1


@pytest.mark.timeout(900)
async def test_scrolling_up_through_3000_messages_keeps_the_mounted_widgets_bounded(
    db_path: Path, workspace: Path
) -> None:
    (run_id,) = fill_job(db_path, workspace, [MESSAGES])
    runtime = await open_runtime(db_path, workspace)
    try:
        app = make_app(runtime, workspace, window=WINDOW)
        async with app.run_test(size=SIZE):
            conversation = await _open_at_tail(app, run_id, page=PAGE, last=MESSAGES - 1)
            # It opens at the tail, with one page mounted, settled messages as light widgets.
            assert conversation.has_older
            assert _mounted(conversation) <= PAGE
            # Each is drawn once: an answer as one FrozenMarkdown, what a person wrote as
            # plain text only (no Markdown widget of either kind).
            await wait_until(
                lambda: all(_light(view) for view in conversation.message_views if view.is_mounted)
            )
            assert not conversation.query(Markdown)
            await wait_until(
                lambda: conversation.max_scroll_y > 0 and conversation.is_vertical_scroll_end
            )

            most: list[int] = []
            await _scroll_to_top(conversation, most)
            assert conversation.first_position == 0
            assert not conversation.has_older
            assert conversation.message_views[0].text.startswith("Run 1 message 0.")
            # The newest messages were unmounted on the way up; the window moved with the view.
            assert conversation.has_newer
            last = conversation.last_position
            assert last is not None and last < MESSAGES - 1
            assert max(most) > PAGE  # more than a page was mounted at times: the bound held
            assert len(most) > MESSAGES // (2 * PAGE)
            shown = [view.position for view in conversation.message_views]
            assert shown == sorted(shown) and shown[0] == 0

            # And back down a few pages: newer pages load, the oldest are unmounted again.
            for _ in range(5):
                await newer_page(conversation)
                # The oldest are unmounted as the page settles (removal finishes a moment later).
                await wait_until(lambda: _mounted(conversation) <= BOUND)
            assert conversation.has_older
            assert conversation.first_position is not None and conversation.first_position > 0
            positions = [view.position for view in conversation.message_views]
            assert positions == sorted(positions)
            # Memory stays bounded too: the widgets unmounted on the way keep no drawn lines
            # alive (Textual's styles caches outlive their widgets: see forget_drawn_lines).
            assert _lines_kept_by_gone_widgets(app) <= GONE_LINES
    finally:
        await runtime.close()


async def test_message_widgets_unmounted_by_the_window_are_freed_without_waiting_for_the_collector(
    db_path: Path, workspace: Path
) -> None:
    """Unmounted widgets are reference cycles: left to Python's own full collections, a scroll
    up a long run piled them up (and a collection then stalled the app for hundreds of ms).
    With the collector's own cadence switched off, what the window unmounts is still freed."""
    import gc

    (run_id,) = fill_job(db_path, workspace, [800])
    runtime = await open_runtime(db_path, workspace)
    try:
        app = make_app(runtime, workspace, window=WINDOW)
        async with app.run_test(size=SIZE):
            conversation = await _open_at_tail(app, run_id, page=PAGE, last=799)
            gc.disable()
            try:
                for _ in range(10):
                    await older_page(conversation)
                    await _mounted_once_trimmed(conversation)
                first = conversation.first_position
                assert first is not None and first < 800 - 10 * PAGE
                mounted = {id(view) for view in conversation.query(MessageView)}
                alive_but_gone = [
                    view
                    for view in gc.get_objects()
                    if isinstance(view, MessageView) and id(view) not in mounted
                ]
            finally:
                gc.enable()
            # About 400 were unmounted; what is left waits for the next page's collection
            # (fewer than a page) or is in the layout kept from before the last trim (a page).
            assert len(alive_but_gone) <= 2 * PAGE, len(alive_but_gone)
            del alive_but_gone
    finally:
        await runtime.close()


GONE_LINES = 400
"""Lines drawn by widgets no longer mounted that may stay alive (other parts of the screen, a
prompt or the footer, are replaced as the test goes): without forget_drawn_lines, scrolling
through 3,000 messages leaves thousands."""


def _lines_kept_by_gone_widgets(app: Any) -> int:
    import gc

    from textual._styles_cache import StylesCache
    from textual.widget import Widget

    mounted = {
        id(widget._styles_cache)
        for screen in app.screen_stack
        for widget in screen.walk_children(Widget, with_self=True)
    }
    gc.collect()
    return sum(
        len(cache._cache)
        for cache in gc.get_objects()
        if isinstance(cache, StylesCache) and id(cache) not in mounted
    )


@pytest.mark.timeout(600)
async def test_scrolling_up_shows_the_jobs_earlier_root_runs_under_their_headers(
    db_path: Path, workspace: Path
) -> None:
    *_, third = fill_job(db_path, workspace, [120, 90, 200])
    runtime = await open_runtime(db_path, workspace)
    try:
        app = make_app(runtime, workspace, window=40)
        async with app.run_test(size=SIZE):
            conversation = await _open_at_tail(app, third, page=20, last=199)
            assert "── run 1" not in screen_text(app)  # opened at the tail: nothing older yet
            await wait_until(
                lambda: conversation.max_scroll_y > 0 and conversation.is_vertical_scroll_end
            )

            seen: set[str] = set()
            most: list[int] = []
            for _ in range(10_000):
                if not conversation.has_older and not conversation.page_loading:
                    break
                await older_page(conversation)
                text = screen_text(app)
                seen.update(line for line in text.splitlines() if line.startswith("── "))
                most.append(await _mounted_once_trimmed(conversation))
            assert max(most) <= 40 + 20
            # The earlier root runs came in order above the shown one, under their headers.
            headers = sorted(seen)
            assert any(h.startswith("── run 1 · default · demo · completed") for h in headers)
            assert any(h.startswith("── follow-up 2 · default · demo · completed") for h in headers)
            assert any(h.startswith("── follow-up 3 · default · demo") for h in headers)
            children = list(conversation.children)
            header = next(c for c in children if "── run 1" in _static_text(c))
            assert children.index(header) < children.index(conversation.message_views[0])
            prompts = [v.text for v in conversation.message_views]
            assert prompts[0].startswith("Run 1 message 0.")
            assert all(p.startswith("Run 1 ") for p in prompts[:10])
            assert not conversation.has_older
            assert conversation.has_newer  # the shown run's tail was unmounted on the way up

            # Back down to the tail: the shown run's last message is mounted again.
            for _ in range(10_000):
                if not conversation.has_newer and not conversation.page_loading:
                    break
                await newer_page(conversation)
            assert conversation.last_position == 199
            assert conversation.message_views[-1].text.startswith("Run 3 message 199.")
    finally:
        await runtime.close()


def _note_place(conversation: Conversation, text: str) -> tuple[int, int | None] | None:
    """How many lines show ``text`` among the mounted children, and the position of the message
    view right after the first one (None: nothing after it); None when none shows it."""
    children = list(conversation.children)
    found = [i for i, child in enumerate(children) if text in _static_text(child)]
    if not found:
        return None
    after = [c for c in children[found[0] + 1 :] if isinstance(c, MessageView)]
    return len(found), (after[0].position if after else None)


@pytest.mark.timeout(600)
async def test_a_long_runs_notes_sit_before_the_first_later_message_wherever_the_window_is(
    db_path: Path, workspace: Path
) -> None:
    (run_id,) = fill_job(db_path, workspace, [300], apart=1.0)
    start = 1700000000.0
    runtime = await open_runtime(db_path, workspace)
    try:
        for at, text in ((start + 5.5, "phase: plan → build"), (start + 289.5, "compacted")):
            note = RunNoted(job_id="job1", run_id=run_id, note="phase", text=text, created_at=at)
            await runtime.store.record_note(run_id, token=None, note=note)
        app = make_app(runtime, workspace, window=60)
        async with app.run_test(size=SIZE):
            conversation = await _open_at_tail(app, run_id, page=30, last=299)
            # The late note is in the tail, before message 290; the early one's place is not
            # mounted, so it is not shown (not at the top of the window either).
            await wait_until(lambda: _note_place(conversation, "◆ compacted") is not None)
            assert _note_place(conversation, "◆ compacted") == (1, 290)
            assert _note_place(conversation, "plan → build") is None
            await wait_until(
                lambda: conversation.max_scroll_y > 0 and conversation.is_vertical_scroll_end
            )

            await _scroll_to_top(conversation, [])
            assert conversation.first_position == 0
            assert _note_place(conversation, "◆ phase: plan → build") == (1, 6)
            assert conversation.has_newer
            assert _note_place(conversation, "compacted") is None  # unmounted with its message

            for _ in range(10_000):
                if not conversation.has_newer and not conversation.page_loading:
                    break
                await newer_page(conversation)
            assert conversation.last_position == 299
            # Back at the tail: the late note is there again, once, in its place.
            assert _note_place(conversation, "◆ compacted") == (1, 290)
    finally:
        await runtime.close()


class _Failing:
    """The run's real pager, whose ``after`` fails while ``failing`` (the disk failing, say)."""

    def __init__(self, pager: Pager) -> None:
        self.pager = pager
        self.failing = True
        self.failures = 0

    @property
    def run_segment(self) -> int:
        return self.pager.run_segment

    async def before(self, key: ItemKey | None, limit: int) -> list[Keyed]:
        return await self.pager.before(key, limit)

    async def after(self, key: ItemKey, limit: int) -> list[Keyed]:
        if self.failing:
            self.failures += 1
            raise OSError("disk I/O error")
        return await self.pager.after(key, limit)


async def test_end_pressed_at_the_bottom_of_the_window_loads_the_newer_messages(
    db_path: Path, workspace: Path
) -> None:
    # Loading newer messages failed while the view sat at the bottom of what is mounted: the
    # view cannot scroll further, so only End pressed again can bring them.
    (run,) = fill_job(db_path, workspace, [200])
    runtime = await open_runtime(db_path, workspace)
    try:
        app = make_app(runtime, workspace, window=40)
        async with app.run_test(size=SIZE):
            conversation = await _open_at_tail(app, run, page=20, last=199)
            screen = app.screen
            await wait_until(
                lambda: conversation.max_scroll_y > 0 and conversation.is_vertical_scroll_end
            )
            while conversation.has_older and (conversation.last_position or 0) > 150:
                await older_page(conversation)
            assert conversation.has_newer
            assert conversation.pager is not None
            failing = _Failing(conversation.pager)
            conversation.pager = failing
            last = conversation.last_key
            async with asyncio.timeout(60):
                while not (
                    failing.failures
                    and not conversation.page_loading
                    and conversation.is_vertical_scroll_end
                ):
                    if not conversation.page_loading:
                        conversation.scroll_end(animate=False, immediate=True)
                    await asyncio.sleep(0.02)
            assert conversation.last_key == last and conversation.has_newer
            assert app.screen is screen  # the failure is a notice; nothing else moved

            failing.failing = False
            conversation.action_scroll_end()
            await wait_until(
                lambda: conversation.last_key != last and not conversation.page_loading, timeout=30
            )
            assert (conversation.last_position or 0) > 139
    finally:
        await runtime.close()


async def test_a_search_hit_opens_its_run_at_the_message_found_not_at_the_tail(
    db_path: Path, workspace: Path
) -> None:
    (run,) = fill_job(db_path, workspace, [400])
    text = "Run 1 message 37. The **pelican** nests here, `far` above the tail."
    conn = sqlite3.connect(db_path, isolation_level=None)
    register_functions(conn)  # the search index's triggers call them
    conn.execute(
        "UPDATE messages SET content = ? WHERE id = ?",
        (json.dumps([{"type": "text", "text": text}]), f"{run}-m37"),
    )
    conn.close()
    runtime = await open_runtime(db_path, workspace)
    try:
        app = make_app(runtime, workspace, window=WINDOW)
        async with app.run_test(size=SIZE) as pilot:
            screen = app.screen
            assert isinstance(screen, MainScreen)
            await wait_for_browser(pilot, app)
            screen.conversation.page = PAGE
            await pilot.press("slash", *"pelican", "enter")
            results = screen.query_one("#search-results", OptionList)
            await wait_until(lambda: results.display and app.focused is results)
            shown = str(results.get_option_at_index(0).prompt)
            # What a reader sees: no Markdown stars or backticks around the words.
            assert "The pelican nests" in shown and "*" not in shown
            await pilot.press("enter")
            conversation = screen.conversation

            def found() -> MessageView | None:
                views = [v for v in conversation.message_views if v.position == 37]
                return views[0] if views else None

            await wait_until(lambda: found() is not None and not conversation.page_loading, 30)
            view = found()
            assert view is not None and view.has_class("-found")

            def on_screen() -> bool:
                top = view.virtual_region.y - conversation.scroll_y
                return 0 <= top < conversation.size.height

            await wait_until(on_screen, timeout=30)
            # A window around the hit, not the tail: the newer messages load as one scrolls.
            assert conversation.has_newer and (conversation.last_position or 0) < 200
            assert conversation.first_position is not None and conversation.first_position < 37
            await newer_page(conversation)
            assert (conversation.last_position or 0) > 37 + PAGE // 2
    finally:
        await runtime.close()


async def test_a_search_hit_in_a_tool_result_unfolds_the_result_that_has_the_words(
    db_path: Path, workspace: Path
) -> None:
    # Tool results are shown folded; a hit inside one opened the run at the call with its
    # result still folded: nothing of what was searched for was on screen.
    runtime = await open_runtime(db_path, workspace)
    try:
        store = runtime.store
        run, token = await running_run(store, owner_id="t", input="birds", workspace=str(workspace))
        calls = [
            NewToolCall(
                id=f"call-{index}",
                provider_id=f"toolu_{index}",
                name="read_file",
                arguments={"path": name},
                idempotent=True,
                start=True,
            )
            for index, name in enumerate(["gulls.txt", "seabirds.txt"])
        ]
        first = await store.commit_assistant_message_with_calls(
            run.id,
            token=token,
            message=NewMessage(
                role=Role.ASSISTANT,
                content=[TextBlock(text="Reading both files.")]
                + [
                    ToolUseBlock(
                        id=call.provider_id,
                        tool_call_id=call.id or "",
                        name=call.name,
                        input=call.arguments,
                    )
                    for call in calls
                ],
            ),
            tool_calls=calls,
            step=1,
        )
        results = ["Gulls nest on cliffs.", "The albatross glides for days."]
        await store.commit_step_results(
            run.id,
            token=token,
            tool_changes=[
                ToolStateChange(tool_call_id=call.id, to=ToolCallState.COMPLETED, result=text)
                for call, text in zip(first.tool_calls, results, strict=True)
            ],
            message=NewMessage(
                role=Role.TOOL,
                content=[
                    ToolResultBlock(
                        tool_use_id=call.provider_id, tool_call_id=call.id, content=text
                    )
                    for call, text in zip(first.tool_calls, results, strict=True)
                ],
            ),
            checkpoint_step=1,
        )
        await store.commit_final_message(
            run.id,
            token=token,
            message=NewMessage(role=Role.ASSISTANT, content=[TextBlock(text="Two birds.")]),
            step=2,
            outcome=None,
        )
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            screen = app.screen
            assert isinstance(screen, MainScreen)
            await wait_for_browser(pilot, app)
            await pilot.press("slash", *"albatross", "enter")
            hits = screen.query_one("#search-results", OptionList)
            await wait_until(lambda: hits.display and app.focused is hits)
            await pilot.press("enter")
            conversation = screen.conversation

            def views() -> dict[str, ToolCallView]:
                return {view.tool_call_id: view for view in conversation.query(ToolCallView)}

            await wait_until(lambda: len(views()) == 2 and not conversation.page_loading, 30)
            gulls, albatross = (views()[call.id] for call in first.tool_calls)
            await wait_until(lambda: albatross.has_class("-found"))
            assert albatross.result_expanded
            assert not gulls.result_expanded  # only the result with the words
            await wait_until(lambda: "The albatross glides for days." in screen_text(app))
    finally:
        await runtime.close()


async def test_ctrl_home_and_ctrl_end_go_to_the_first_and_last_message_in_one_press(
    db_path: Path, workspace: Path
) -> None:
    # Home loads a page at a time: seven presses to the top of a long job in a trial.
    (run,) = fill_job(db_path, workspace, [400])
    runtime = await open_runtime(db_path, workspace)
    try:
        app = make_app(runtime, workspace, window=40)
        async with app.run_test(size=SIZE) as pilot:
            conversation = await _open_at_tail(app, run, page=20, last=399)
            conversation.focus()
            await pilot.press("ctrl+home")
            await wait_until(
                lambda: conversation.first_position == 0 and not conversation.page_loading,
                timeout=30,
            )
            assert conversation.has_newer and not conversation.has_older
            assert (conversation.last_position or 0) < 100
            await wait_until(lambda: conversation.scroll_y == 0, timeout=30)
            assert not conversation.following
            await pilot.press("ctrl+end")
            await wait_until(
                lambda: conversation.last_position == 399 and not conversation.page_loading,
                timeout=30,
            )
            assert conversation.has_older and not conversation.has_newer
            await wait_until(lambda: conversation.following, timeout=30)
    finally:
        await runtime.close()


async def test_a_jump_away_and_back_keeps_what_a_streaming_answer_showed(
    db_path: Path, workspace: Path
) -> None:
    (earlier,) = fill_job(db_path, workspace, [300])
    runtime = await open_runtime(db_path, workspace, chunk_delay=0.02)
    try:
        app = make_app(runtime, workspace, window=40)
        async with app.run_test(size=SIZE) as pilot:
            screen = app.screen
            assert isinstance(screen, MainScreen)
            screen.conversation.page = 20
            run = await runtime.follow_up("job1", "/stream 40")
            screen.open_run(run.id)
            conversation = screen.conversation

            def streamed() -> str:
                live = [v for v in conversation.message_views if not v.committed]
                return live[0].text if live else ""

            await wait_until(lambda: len(streamed()) > 200, timeout=30)
            assert conversation.has_older  # the earlier run's 300 messages are above
            conversation.focus()
            await pilot.press("ctrl+home")
            await wait_until(lambda: not conversation.has_older, timeout=30)
            assert conversation.first_key == ItemKey(1, -1)  # the earlier run's header
            assert not streamed()  # the answer streaming at the tail is not mounted
            await pilot.press("ctrl+end")
            await wait_until(lambda: not conversation.has_newer, timeout=30)
            await wait_until(lambda: len(streamed()) > 400, timeout=30)
            # The answer is shown from its first word, not from where the jump left it.
            assert streamed().startswith("1. The durable runtime")
            assert (await runtime.get_run(earlier)).state.value == "completed"
    finally:
        await runtime.close()
