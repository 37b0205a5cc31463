"""The conversation of one run, in its job, as a bounded window of mounted widgets (DESIGN §12).

What a pane shows for a run is a sequence of transcript items (``runtime.transcript_pages``): a
fork's inherited history, the job's earlier root runs under their headers, then the run's own
header, messages and partial answer. ``load`` mounts the tail of it, following the tail (an
anchored scroll); the pager gives the rest a page at a time: older items as the view nears the
top of what is mounted, newer ones as it nears the bottom. After each page, items far out of
view at the other end are unmounted, so however far one scrolls, at most about ``window``
items (plus one page) are widgets. A run of 10,000 messages opens with one page mounted.

Messages are light widgets (``MessageView``: Markdown blocks rendered once; a message that
streams renders only its open block again). While the view follows the tail the oldest items
are unmounted as new ones arrive. When the tail itself was unmounted (scrolled far up), live
messages are not drawn: committed ones load from the database when scrolled back down, and
what streamed of an unfinished one is kept as text and shown again at the tail.

A run's notes (``run_noted``: instructions used, phase moves, compactions) are lines among its
messages: each goes before the first mounted message that came after it, or at the tail when
none did and the tail is mounted; a note whose place is not mounted waits until it is (it goes
and comes back with the message after it).
"""

from __future__ import annotations

import gc
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Protocol, Unpack

from textual import on
from textual.app import ComposeResult
from textual.await_remove import AwaitRemove
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.geometry import Size
from textual.message import Message as TextualMessage
from textual.widget import Widget
from textual.widgets import Static
from textual.worker import Worker, WorkerState

from runtime.kinds import Role, ToolCallState
from runtime.textsafe import terminal_safe_line
from tui.widgets._options import WidgetOptions
from tui.widgets.sized_by_layout import SizedByLayout

if TYPE_CHECKING:
    from runtime.events import RunNoted
    from runtime.models import Message, ToolCall
    from runtime.transcript import PartialAnswer, TranscriptItem
    from runtime.transcript_pages import ItemKey, Keyed
    from tui.widgets.message_view import MessageView
    from tui.widgets.tool_call_view import ToolCallView


def _message_view() -> type[MessageView]:
    """The message widget, imported when the first message is shown: it brings Markdown
    (markdown-it, Pygments), which the first frame does not need (DESIGN §13)."""
    from tui.widgets.message_view import MessageView

    return MessageView


WINDOW = 100
"""About the most items kept mounted at once (more only while they are all near the view)."""
PAGE = 40
"""Items loaded at a time: the tail when a run opens, then older or newer pages."""

OLDER_TEXT = "↑ older messages load as you scroll up"
NEWER_TEXT = "↓ newer messages load as you scroll down"


class Pager(Protocol):
    """Where the conversation finds the items it has not mounted (``TranscriptPager``)."""

    @property
    def run_segment(self) -> int: ...

    async def before(self, key: ItemKey | None, limit: int) -> list[Keyed]: ...

    async def after(self, key: ItemKey, limit: int) -> list[Keyed]: ...


@dataclass
class _Group:
    """The widgets of one item (a message with its tool calls, a header, …), or of live tool
    calls; ``key`` None: a message still streaming, never unmounted from the middle."""

    key: ItemKey | None
    message_id: str | None = None
    position: int | None = None
    """For a message of the shown run: its position."""
    widgets: list[Widget] = field(default_factory=list)
    created_at: float | None = None
    """For a committed message of the shown run: its time (where the run's notes go)."""

    @property
    def live(self) -> bool:
        return self.key is None and self.message_id is not None


class _PageLoaded(TextualMessage, bubble=False):
    def __init__(self, generation: int, *, older: bool, items: list[Keyed], limit: int) -> None:
        super().__init__()
        self.generation = generation
        self.older = older
        self.items = items
        self.limit = limit


PIN_SECONDS = 1.5
"""How long an item opened at stays at the view's top while the content above it grows."""


class Conversation(SizedByLayout, VerticalScroll):
    DEFAULT_CSS = """
    Conversation { background: $background; padding: 0 1; }
    Conversation > .empty { color: $text-muted; padding: 1 2; }
    Conversation > .older, Conversation > .newer { color: $text-muted; text-align: center; }
    Conversation > .run-header { color: $text-muted; text-style: bold; margin: 0 0 1 0; }
    Conversation > .fork-origin { color: $warning; margin: 0 0 1 0; }
    Conversation > .inherited { opacity: 70%; }
    Conversation > .partial-label { color: $warning; text-style: italic; }
    Conversation > .run-note { color: $text-muted; text-style: italic; margin: 0 0 1 0; }
    Conversation > .-found { border-left: thick $warning; }
    Conversation > ToolCallView.-found { border-left: wide $warning; }
    """

    class Jumped(TextualMessage):
        """The first (or last) page of what the pane shows, for a jump to the start (the end).
        The screen hands it back (``show_jump``) from its own queue, where the run's live
        events are applied: the window is replaced between two of them, never during one."""

        def __init__(self, generation: int, *, start: bool, items: list[Keyed], limit: int) -> None:
            super().__init__()
            self.generation = generation
            self.start = start
            self.items = items
            self.limit = limit

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+home", "jump(True)", "First message of the run", show=False),
        Binding("ctrl+end", "jump(False)", "Last message (then follow the run)", show=False),
    ]

    def __init__(
        self, *, window: int = WINDOW, page: int = PAGE, **kwargs: Unpack[WidgetOptions]
    ) -> None:
        super().__init__(**kwargs)
        self.window = max(1, window)
        self.page = max(1, min(page, window))
        self.pager: Pager | None = None
        self.run_id: str | None = None
        self.workspace: str | None = None
        """The shown job's folder: a person's message that invoked one of its skills reads as
        typed (``/name args``)."""
        self.has_older = False
        self.has_newer = False
        self._generation = 0
        self._loading = False
        self._pinned: Widget | None = None
        """An item opened at (a search hit, a checkpoint's step) kept at the view's top while
        what loads just after grows the content above it (``PIN_SECONDS``)."""
        self._groups: list[_Group] = []
        self._messages: dict[str, MessageView] = {}
        self._tools: dict[str, ToolCallView] = {}
        self._tool_calls: dict[str, ToolCall] = {}
        self._stash: dict[str, list[str]] = {}
        """What streamed of unfinished messages while the tail was not mounted."""
        self._notes: dict[int, RunNoted] = {}
        """Every note of the shown run known so far, by its event seq."""
        self._note_views: dict[int, _NoteLine] = {}
        """The notes mounted now."""
        self._unmounted_since_collection = 0
        """Items unmounted since the last garbage collection this pane asked for."""
        self._older_marker = Static(OLDER_TEXT, classes="older", markup=False)
        self._newer_marker = Static(NEWER_TEXT, classes="newer", markup=False)

    def compose(self) -> ComposeResult:
        self._show_markers()
        yield self._older_marker
        yield self._newer_marker

    # --- whole-run loading -----------------------------------------------------------------------
    async def show_empty(self, text: str) -> None:
        self.run_id = None
        self.pager = None
        await self._clear()
        await self.mount(Static(text, classes="empty", markup=False), before=self._newer_marker)

    async def load(
        self,
        run_id: str,
        items: Sequence[Keyed],
        tool_calls: list[ToolCall],
        *,
        has_older: bool,
        pager: Pager | None = None,
        has_newer: bool = False,
        found: ItemKey | None = None,
        found_words: Sequence[str] = (),
        at_top: bool = False,
    ) -> None:
        """Show ``items`` (what the pane shows for the run, from ``pager``): the tail, followed
        as it grows; with ``found``, a window around that item (a search hit), scrolled to it
        and marked (a hit in tool results: the call whose result has ``found_words``, its
        result unfolded); with ``at_top``, from the top. Older (and newer) items load from
        ``pager`` as the view nears an end."""
        self.run_id = run_id
        await self._clear()
        self.pager = pager
        self._tool_calls = {call.id: call for call in tool_calls}
        self.has_older = has_older
        self.has_newer = has_newer
        widgets: list[Widget] = []
        for key, item in items:
            widgets.extend(self._add_group(key, item, at_end=True))
        self._show_markers()
        await self.mount_all(widgets, before=self._newer_marker)
        target = None
        if found is not None:
            target = self._found_result(items, found, found_words) or self._found_widget(found)
        if at_top:
            self.anchor(False)
            self.scroll_home(animate=False, immediate=True)
            self.call_after_refresh(self._want_more)
            return
        if target is None:
            self.scroll_end(animate=False, immediate=True)
            self.anchor()
            self.call_after_refresh(self._want_more)
            return
        target.add_class("-found")
        self.anchor(False)

        def show_found() -> None:
            self.scroll_to_widget(target, animate=False, top=True, immediate=True)
            self._want_more()

        self.call_after_refresh(show_found)
        # What comes in just after (a write's applied diff, read from the store, above the
        # item) pushed it below the view (a trial's marked step was off screen): for a moment
        # the view keeps the item at its top as the content above it grows.
        self._pinned = target
        self.set_timer(PIN_SECONDS, self._unpin)

    def _unpin(self) -> None:
        self._pinned = None

    def _scroll_update(self, virtual_size: Size) -> None:
        """Textual calls this from the screen's layout when the pane's size or scrollable
        height changed (each flush of a streaming answer), and it repaints the scroll bars
        there. That layout repaints the pane's whole region in the same frame (its geometry
        changed), the bars included, drawn afresh (the repaint emptied their cache); the
        repaint they also queued drew them again, identical, in a frame of their own a tick
        later: 1-5 ms per flush here, and the last frame of a finished answer came ~35 ms
        after the answer was on screen."""
        super()._scroll_update(virtual_size)
        for bar in (self._vertical_scrollbar, self._horizontal_scrollbar):
            if bar is not None and bar.is_mounted:
                bar._repaint_required = False

    def _overflow_by(self, view: MessageView) -> None:
        """``view`` (a streaming answer) grew, not laid out since: when it now overflows the
        pane, the vertical scroll bar is shown at once, so that the layout that places the
        view places the bar too. Textual shows the bar once a layout has found the content
        overflowing: in a second layout and frame, drawing the whole pane again, and the
        bar's first size in a third (~12 ms in all, as a 1 MB answer opened)."""
        if self.show_vertical_scrollbar or self.styles.overflow_y != "auto":
            return
        height = self.container_size.height
        if not height:
            return
        if view.size:
            top = view.virtual_region_with_margin.y
        else:  # below what was laid out before it (the pane's virtual height is its own)
            top = max(
                (
                    w.virtual_region_with_margin.bottom
                    for w in self.children
                    if w is not view and w.display and w.size
                ),
                default=0,
            )
        if top + view.least_rows > height:
            self.show_vertical_scrollbar = True
            self.vertical_scrollbar.display = True

    def watch_virtual_size(self, size: Size) -> None:
        pinned = self._pinned
        if pinned is not None and pinned.is_attached:
            self.call_after_refresh(
                self.scroll_to_widget, pinned, animate=False, top=True, immediate=True
            )

    def _found_result(
        self, items: Sequence[Keyed], key: ItemKey, words: Sequence[str]
    ) -> Widget | None:
        """For a hit in a tool message: the call (shown with the message before) whose result
        has the words found, its result unfolded (a hit in a folded result showed nothing of
        what was searched for)."""
        from runtime.transcript import TranscriptMessage

        message = next(
            (
                item.message
                for item_key, item in items
                if item_key == key
                and isinstance(item, TranscriptMessage)
                and item.run.id == self.run_id
            ),
            None,
        )
        if message is None or message.role is not Role.TOOL:
            return None
        views = [
            self._tools[block.tool_call_id]
            for block in message.tool_results
            if block.tool_call_id in self._tools
        ]
        lowered = [word.casefold() for word in words if word]
        for view in views:
            text = (view.error if view.error is not None else view.result or "").casefold()
            if not lowered or any(word in text for word in lowered):
                view.unfold_result()
                return view
        return None

    def _found_widget(self, key: ItemKey) -> Widget | None:
        """What shows the item at ``key``: its first widget; for a tool message (its results
        are shown in the calls of the message before it), that message's."""
        groups = [group for group in self._groups if group.key is not None and group.key <= key]
        for group in reversed(groups):
            if group.widgets:
                return group.widgets[0]
        return None

    async def _clear(self) -> None:
        self._generation += 1
        self._pinned = None
        self._groups.clear()
        self._messages.clear()
        self._tools.clear()
        self._tool_calls.clear()
        self._stash.clear()
        self._notes.clear()
        self._note_views.clear()
        self._loading = False
        self.has_older = self.has_newer = False
        self._show_markers()
        markers = (self._older_marker, self._newer_marker)
        await self.remove_children(
            forget_drawn_lines([child for child in self.children if child not in markers])
        )

    def _show_markers(self) -> None:
        self._older_marker.display = self.has_older
        self._newer_marker.display = self.has_newer

    @property
    def _run_segment(self) -> int:
        return self.pager.run_segment if self.pager is not None else 0

    def _add_group(self, key: ItemKey, item: TranscriptItem, *, at_end: bool) -> list[Widget]:
        """The widgets for ``item``, registered as a group at the end or the start."""
        from runtime.transcript import TranscriptMessage

        group = _Group(key)
        if isinstance(item, TranscriptMessage) and item.run.id == self.run_id:
            message = item.message
            if message.id in self._messages:
                return []
            group.message_id, group.position = message.id, message.position
            group.created_at = message.created_at
            group.widgets = self._run_message_widgets(message)
        else:
            group.widgets = _context_widgets(item, self.workspace)
        if at_end:
            self._groups.append(group)
        else:
            self._groups.insert(0, group)
        return list(group.widgets)

    def _run_message_widgets(self, message: Message) -> list[Widget]:
        """A message of the shown run: its view and its tool calls (results fill them in)."""
        if message.role is Role.TOOL:
            for block in message.tool_results:
                tool_view = self._tools.get(block.tool_call_id)
                if tool_view is not None:
                    tool_view.set_result(
                        block.content, is_error=block.is_error, images=block.images
                    )
            return []
        view = _message_view().from_message(message, workspace=self.workspace)
        view.display = bool(message.text or view.thinking_text) or message.role is Role.USER
        self._messages[message.id] = view
        widgets: list[Widget] = [view]
        for use in message.tool_uses:
            widgets.append(self._tool_view(use.tool_call_id, use.name, use.input))
        return widgets

    def _tool_view(
        self, tool_call_id: str, name: str, arguments: dict[str, object]
    ) -> ToolCallView:
        from tui.widgets.tool_call_view import ToolCallView  # not for the first frame

        call = self._tool_calls.get(tool_call_id)
        view = ToolCallView(
            tool_call_id=tool_call_id,
            name=name,
            arguments=dict(arguments),
            state=call.state if call else ToolCallState.PENDING,
            result=call.result if call else None,
            error=call.error if call else None,
            child_run_id=call.child_run_id if call else None,
        )
        self._tools[tool_call_id] = view
        return view

    def _group_of(self, message_id: str) -> _Group | None:
        for group in reversed(self._groups):
            if group.message_id == message_id:
                return group
        return None

    # --- live updates --------------------------------------------------------------------------
    @property
    def following(self) -> bool:
        """Whether the view follows the tail (anchored at the bottom, the tail mounted)."""
        return self._anchored and not self._anchor_released and not self.has_newer

    async def noted(self, note: RunNoted) -> None:
        """A ``run_noted`` event of the run on screen, as it happens: one line at the tail (kept
        for later when the tail is not mounted)."""
        if note.run_id != self.run_id or note.seq in self._notes:
            return
        self._notes[note.seq] = note
        if self.has_newer:
            return  # placed when the tail is mounted again
        await self._mount_note(note, before=None)

    async def insert_notes(self, notes: Sequence[RunNoted]) -> None:
        """The run's notes read from the database: each before the first message that came
        after it (those whose place is not mounted wait until it is)."""
        for note in notes:
            if note.run_id == self.run_id and note.seq not in self._notes:
                self._notes[note.seq] = note
        await self._place_notes()

    async def _place_notes(self) -> None:
        """Mount each known note whose place is in the window: before the first mounted message
        of the run that came after it, provided the message before that one is mounted too (or
        nothing older is left to load); at the tail when no message came after it and the tail
        is mounted."""
        waiting = sorted(
            (note for seq, note in self._notes.items() if seq not in self._note_views),
            key=lambda note: note.seq,
        )
        for note in waiting:
            earlier = not self.has_older
            later: _Group | None = None
            for group in self._groups:
                if group.created_at is None:
                    continue
                if group.created_at <= note.created_at:
                    earlier = True
                else:
                    later = group
                    break
            if not earlier:
                continue  # its place is above what is mounted
            if later is not None:
                await self._mount_note(note, before=later)
            elif not self.has_newer:
                await self._mount_note(note, before=None)

    async def _mount_note(self, note: RunNoted, *, before: _Group | None) -> None:
        """Mount ``note`` before ``before``'s widgets (it belongs to that group then, and is
        unmounted with it), or at the tail with the last group."""
        line = _NoteLine(note)
        self._note_views[note.seq] = line
        anchor = (
            next((w for w in before.widgets if w.is_attached), None) if before is not None else None
        )
        if before is not None and anchor is not None:
            before.widgets.insert(0, line)
            await self.mount(line, before=anchor)
            return
        if self._groups:
            self._groups[-1].widgets.append(line)
        else:
            self._groups.append(_Group(None, None, None, [line]))
        await self.mount(line, before=self._newer_marker)

    async def delta(self, message_id: str, offset: int, text: str, *, thinking: bool) -> None:
        view = self._messages.get(message_id)
        if view is None and self.has_newer:
            # The tail is not mounted: keep the text for when it is.
            if not thinking:
                parts = self._stash.setdefault(message_id, [])
                if offset == sum(map(len, parts)):
                    parts.append(text)
            return
        if view is None:
            # Built with what streamed while the tail was not mounted, else with its first
            # piece: a big one is sealed at once instead of being streamed into a Markdown
            # widget and then replaced.
            stashed = "".join(self._stash.pop(message_id, []))
            if not (stashed or text):
                return  # a look for a stash another piece has taken already
            first = stashed or (text if not thinking and offset == 0 else "")
            view = _message_view()(
                message_id=message_id, role=Role.ASSISTANT, position=None, text=first
            )
            self._messages[message_id] = view
            self._groups.append(_Group(None, message_id, None, [view]))
            # One layout places the view, its Markdown part rendered before it, and the scroll
            # bar when the view overflows the pane (none of it laid out in between).
            with self.app.batch_update():
                await self.mount(view, before=self._newer_marker)
                view.render_ahead(self.scrollable_content_region.width)
                self._overflow_by(view)
            self._trim_soon()
            if first and not stashed:
                return
        if view.committed:
            return
        if thinking:
            view.append_thinking(text)
        elif self.show_vertical_scrollbar:
            await view.append_text(offset, text)
        else:
            with self.app.batch_update():  # the piece and a scroll bar it needs: one layout
                await view.append_text(offset, text)
                self._overflow_by(view)

    async def committed(self, message: Message) -> None:
        from runtime.transcript_pages import ItemKey  # a run's pages: not for the first frame

        self._stash.pop(message.id, None)
        view = self._messages.get(message.id)
        if view is not None:
            await view.commit(message)
            if self._messages.get(message.id) is not view:
                return  # emptied meanwhile (a new job, another run): its blocks go with it
            group = self._group_of(message.id)
            if group is not None:
                group.key = ItemKey(self._run_segment, message.position)
                group.position = message.position
                group.created_at = message.created_at
            new_tools = [
                self._tool_view(use.tool_call_id, use.name, use.input)
                for use in message.tool_uses
                if use.tool_call_id not in self._tools
            ]
            if new_tools:
                if group is not None:
                    group.widgets.extend(new_tools)
                await self.mount_all(new_tools, after=view)
            return
        if self.has_newer:
            return  # loads from the database when the tail is mounted again
        key = ItemKey(self._run_segment, message.position)
        # Live (the run on screen): drawn as the streamed ones are, whichever came first.
        widgets = self._run_message_widgets(message)
        self._groups.append(
            _Group(key, message.id, message.position, widgets, created_at=message.created_at)
        )
        if widgets:
            await self.mount_all(widgets, before=self._newer_marker)
            self._trim_soon()

    def shown_chars(self, run_id: str, message_id: str) -> int | None:
        """How much of an uncommitted answer of the run on screen this pane shows (streamed
        live, or read as its partial answer); None when it shows none of it."""
        if run_id != self.run_id:
            return None
        view = self._messages.get(message_id)
        if view is None:
            reopened = f"partial:{run_id}:{message_id}"
            views = self.query(_message_view())
            view = next((v for v in views if v.message_id == reopened), None)
        return None if view is None else view.streamed_chars

    async def run_stopped(self, label: str) -> None:
        """The run on screen stopped (cancelled, failed) with an answer streamed and never
        committed: it is marked as reopening the run marks it (found by a new-user trial: after
        Esc, the text stood there like a finished answer until the run was opened again)."""
        for view in list(self._messages.values()):
            if view.committed or not (view.text.strip() or view.thinking_text.strip()):
                continue
            group = self._group_of(view.message_id)
            if group is None or any(w.has_class("partial-label") for w in group.widgets):
                continue
            mark = Static(f"⚠ {label}", classes="partial-label", markup=False)
            await view.settle_partial()
            if self._messages.get(view.message_id) is not view:
                return  # emptied meanwhile (a new job, another run): nothing left to mark
            group.widgets.append(mark)
            await self.mount(mark, after=view)

    async def tool_state(
        self,
        tool_call_id: str,
        name: str,
        state: ToolCallState,
        *,
        arguments: dict[str, object] | None,
        result: str | None,
        error: str | None,
    ) -> None:
        view = self._tools.get(tool_call_id)
        if view is None:
            if self.has_newer:
                return
            view = self._tool_view(tool_call_id, name, dict(arguments or {}))
            view.state = state
            if self._groups and self._groups[-1].message_id is not None:
                self._groups[-1].widgets.append(view)
            else:
                self._groups.append(_Group(None, None, None, [view]))
            await self.mount(view, before=self._newer_marker)
            if self._tools.get(tool_call_id) is not view:
                # Emptied as it mounted (a new job opened: a worker of the screen): the block
                # went before its parts came, with the run this state was for.
                return
        view.update_state(
            state, arguments=dict(arguments) if arguments else None, result=result, error=error
        )

    def tool_progress(
        self, tool_call_id: str, progress: float, total: float | None, message: str | None
    ) -> None:
        view = self._tools.get(tool_call_id)
        if view is not None and view.is_mounted:
            view.progress(progress, total, message)

    def tool_view(self, tool_call_id: str) -> ToolCallView | None:
        return self._tools.get(tool_call_id)

    def open_tools(self) -> dict[str, tuple[str, ToolCallState]]:
        """The tool calls shown that are pending or running: id → (tool name, state)."""
        return {
            tool_call_id: (view.tool_name, view.state)
            for tool_call_id, view in self._tools.items()
            if not view.state.is_terminal
        }

    # --- the window ----------------------------------------------------------------------------
    @property
    def message_views(self) -> list[MessageView]:
        return list(self.query_children(_message_view()))

    @property
    def page_loading(self) -> bool:
        """Whether a page of older or newer items is being loaded (not ``loading``: that is
        Textual's reactive for a widget's loading indicator)."""
        return self._loading

    @property
    def first_position(self) -> int | None:
        """The first mounted message position of the shown run."""
        positions = [group.position for group in self._groups if group.position is not None]
        return min(positions) if positions else None

    @property
    def last_position(self) -> int | None:
        positions = [group.position for group in self._groups if group.position is not None]
        return max(positions) if positions else None

    @property
    def first_key(self) -> ItemKey | None:
        return next((group.key for group in self._groups if group.key is not None), None)

    @property
    def last_key(self) -> ItemKey | None:
        keys = [group.key for group in self._groups if group.key is not None]
        return keys[-1] if keys else None

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        self._want_more()

    def action_scroll_home(self) -> None:
        self._pinned = None  # the person scrolls: the view is theirs
        try:
            super().action_scroll_home()
        finally:
            self._want_more()  # already at the top (no scroll, so no watch): Home loads more

    def action_scroll_end(self) -> None:
        self._pinned = None
        try:
            super().action_scroll_end()
        finally:
            self._want_more()

    def action_jump(self, start: bool) -> None:
        """To the first (or last) message of the run, however far: Home and End move a page of
        the window at a time (as its pages load), ctrl+Home and ctrl+End go all the way."""
        self._pinned = None
        more = self.has_older if start else self.has_newer
        if self.pager is None or self.run_id is None or not more:
            if start:
                self.scroll_home(animate=False)
            else:
                self.scroll_end(animate=False)
                self.anchor()
            return
        from runtime.transcript_pages import HEADER, ItemKey  # not for the first frame

        pager, generation, limit = self.pager, self._generation, self.page
        self._loading = True

        async def fetch() -> None:
            if start:
                items = await pager.after(ItemKey(0, HEADER - 1), limit)
            else:
                items = await pager.before(None, limit)
            self.post_message(self.Jumped(generation, start=start, items=items, limit=limit))

        self.run_worker(fetch(), group="conversation-page", exit_on_error=False)

    async def show_jump(self, message: Jumped) -> None:
        if message.generation != self._generation or self.run_id is None:
            self._loading = False
            return
        # What streams meanwhile is kept (as when the tail is trimmed) and shown again at the
        # tail; the committed messages come from the store.
        stash = dict(self._stash)
        for group in self._groups:
            view = self._messages.get(group.message_id or "") if group.live else None
            if view is not None and not view.committed and view.text:
                stash[view.message_id] = [view.text]
        full = len(message.items) >= message.limit
        items = sorted(message.items, key=lambda pair: pair[0])
        await self.load(
            self.run_id,
            items,
            list(self._tool_calls.values()),
            has_older=full and not message.start,
            has_newer=full and message.start,
            pager=self.pager,
            at_top=message.start,
        )
        self._stash = stash
        if not message.start:
            self._reached_tail()

    def _want_more(self) -> None:
        """Near the top (or bottom) of what is mounted, with more in the database: load it."""
        if self._loading or self.pager is None or self.run_id is None or not self.is_mounted:
            return
        margin = max(self.size.height, 1)
        if len(self._groups) >= self.window + self.page and self.virtual_size.height <= 3 * margin:
            return  # a window too small for the view: more would only unmount what is seen
        if self.has_older and self.scroll_y <= margin:
            self._fetch(older=True, key=self.first_key)
            return
        if self.has_newer and self.scroll_y >= self.max_scroll_y - margin:
            last = self.last_key
            if last is not None:
                self._fetch(older=False, key=last)

    def _fetch(self, *, older: bool, key: ItemKey | None) -> None:
        assert self.pager is not None
        self._loading = True
        pager, generation, limit = self.pager, self._generation, self.page

        async def fetch() -> None:
            if older:
                items = await pager.before(key, limit)
            else:
                assert key is not None
                items = await pager.after(key, limit)
            self.post_message(_PageLoaded(generation, older=older, items=items, limit=limit))

        self.run_worker(fetch(), group="conversation-page", exit_on_error=False)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker.group == "conversation-page" and event.state is WorkerState.ERROR:
            self._loading = False
            self.notify(f"Could not load messages: {event.worker.error}", severity="error")

    @on(_PageLoaded)
    async def _page_loaded(self, message: _PageLoaded) -> None:
        if message.generation != self._generation:
            return  # another run was loaded meanwhile
        items = sorted(message.items, key=lambda pair: pair[0])
        full = len(items) >= message.limit
        widgets: list[Widget] = []
        if message.older:
            first = self.first_key
            items = [pair for pair in items if first is None or pair[0] < first]
            self.has_older = full
            for key, item in reversed(items):
                widgets[:0] = self._add_group(key, item, at_end=False)
        else:
            last = self.last_key
            items = [pair for pair in items if last is None or pair[0] > last]
            self.has_newer = full
            for key, item in items:
                widgets.extend(self._add_group(key, item, at_end=True))
        self._show_markers()
        keep = self._first_widget() if message.older else None
        keep_y = keep.virtual_region_with_margin.y if keep is not None else 0
        if widgets:
            if message.older:
                await self.mount_all(widgets, after=self._older_marker)
            else:
                await self.mount_all(widgets, before=self._newer_marker)
        if self._notes:
            await self._place_notes()

        def settle() -> None:
            if keep is not None:
                # Content grew above the view: move down by as much, so the view stays put.
                self._keep_place(keep, keep_y)
            self._trim(from_end=message.older)
            if not self.has_newer and not message.older:
                self._reached_tail()
            self._loading = False
            self._want_more()

        self.call_after_refresh(settle)

    def _first_widget(self) -> Widget | None:
        for group in self._groups:
            for widget in group.widgets:
                if widget.is_attached:
                    return widget
        return None

    def _reached_tail(self) -> None:
        """The tail is mounted again: show what streamed meanwhile and follow it."""
        # Each is shown from its stash by the first of this look and the message's next
        # piece, whichever comes first (a piece first used to start it where it was).
        for message_id in list(self._stash):
            self.call_later(self.delta, message_id, 0, "", thinking=False)
        if self.scroll_y >= self.max_scroll_y - 1:
            self.anchor()

    def _trim_soon(self) -> None:
        if len(self._groups) > self.window:
            self.call_after_refresh(self._trim, from_end=False)

    def _trim(self, *, from_end: bool) -> None:
        """Unmount items beyond the window that are far out of view: the newest ones
        (``from_end``, after loading older ones) or the oldest ones."""
        excess = len(self._groups) - self.window
        if excess <= 0 or (from_end and self.following):
            return
        margin = max(self.size.height, 1)
        top, bottom = self.scroll_y - margin, self.scroll_y + self.size.height + margin
        # Beyond the window plus a page, groups go even when near the view: a fixed bound.
        hard = len(self._groups) - (self.window + self.page)
        doomed: list[_Group] = []
        for group in reversed(self._groups) if from_end else self._groups:
            if len(doomed) >= excess:
                break
            span = _span(group)
            near = len(doomed) >= hard
            if from_end:
                if group.key is None or (near and span is not None and span[0] <= bottom):
                    break
            elif group.key is None or (near and span is not None and span[1] >= top):
                break
            doomed.append(group)
        if not doomed:
            return
        from tui.widgets.tool_call_view import ToolCallView

        removed: list[Widget] = []
        for group in doomed:
            self._groups.remove(group)
            removed.extend(group.widgets)
            if group.message_id is not None:
                self._messages.pop(group.message_id, None)
            for widget in group.widgets:
                if isinstance(widget, ToolCallView):
                    self._tools.pop(widget.tool_call_id, None)
                elif isinstance(widget, _NoteLine):
                    self._note_views.pop(widget.seq, None)
        if from_end:
            self.has_newer = True
            self.anchor(False)
        else:
            self.has_older = True
            kept = self._first_widget()
            if kept is not None and not self.following:
                # Content above the view goes away: move up by as much, so the view stays put.
                kept_y = kept.virtual_region_with_margin.y
                self.call_after_refresh(self._keep_place, kept, kept_y)
        self._show_markers()
        removing = self.remove_children(forget_drawn_lines(removed))
        self._unmounted_since_collection += len(doomed)
        if self._unmounted_since_collection >= self.page:
            self._unmounted_since_collection = 0
            self.call_later(_collect_once_removed, removing)

    def _keep_place(self, kept: Widget, kept_y: int) -> None:
        if kept.is_attached:
            moved = kept.virtual_region_with_margin.y - kept_y
            if moved:
                self.scroll_to(
                    y=max(0, self.scroll_y + moved), animate=False, immediate=True, force=True
                )
        self._want_more()


def _span(group: _Group) -> tuple[int, int] | None:
    """The rows a group takes in the conversation's content, or None when nothing shows."""
    regions = [w.virtual_region_with_margin for w in group.widgets if w.display]
    regions = [region for region in regions if region.height]
    if not regions:
        return None
    return min(r.y for r in regions), max(r.bottom for r in regions)


def _context_widgets(item: TranscriptItem, workspace: str | None) -> list[Widget]:
    """Read-only widgets for an item outside the shown run: fork origin, run headers, earlier
    runs' messages, partial answers. A tool call whose record came with the message (the
    pager's context) is a block as the shown run's are, dimmed: its state, its arguments, its
    result folded; the others (a sub-run's fold) are named on one line."""
    from runtime.transcript import ForkOrigin, PartialAnswer, RunHeader

    if isinstance(item, ForkOrigin):
        text = f"↳ {item.short_label()} — the history it inherited, dimmed:"
        return [Static(text, classes="fork-origin", markup=False)]
    if isinstance(item, RunHeader):
        return [Static(f"── {item.label()}", classes="run-header", markup=False)]
    if isinstance(item, PartialAnswer):
        return _partial_widgets(item)
    message = item.message
    widgets: list[Widget] = []
    if message.role is Role.TOOL:
        return widgets
    if message.text or message.role is Role.USER:
        view = _message_view().from_message(message, workspace=workspace)
        if item.inherited:
            view.add_class("inherited")
        widgets.append(view)
    records = {call.id: call for call in item.tool_calls}
    unrecorded = [use for use in message.tool_uses if use.tool_call_id not in records]
    for use in message.tool_uses:
        call = records.get(use.tool_call_id)
        if call is not None:
            widgets.append(_context_tool_view(call, inherited=item.inherited))
    if unrecorded:
        names = ", ".join(use.name for use in unrecorded)
        widgets.append(Static(f"  ⚙ {names}", classes="run-header", markup=False))
    return widgets


def _context_tool_view(call: ToolCall, *, inherited: bool) -> ToolCallView:
    """A tool call of a run shown as context: as it ended, read-only (nothing updates it)."""
    from tui.widgets.tool_call_view import ToolCallView  # not for the first frame

    view = ToolCallView(
        tool_call_id=call.id,
        name=call.name,
        arguments=dict(call.arguments),
        state=call.state,
        result=call.result,
        error=call.error,
        child_run_id=call.child_run_id,
        context=True,
    )
    if inherited:
        view.add_class("inherited")
    return view


def sub_run_widgets(items: Sequence[TranscriptItem], workspace: str | None) -> list[Widget]:
    """A sub-run's items, read-only, for the fold under the delegation block that made it."""
    widgets: list[Widget] = []
    for item in items:
        widgets.extend(_context_widgets(item, workspace))
    return widgets


def _partial_widgets(partial: PartialAnswer) -> list[Widget]:
    from tui.widgets.message_view import partial_markdown  # with the message widget

    view = _message_view()(
        message_id=f"partial:{partial.run.id}:{partial.message_id}",
        role=Role.ASSISTANT,
        position=-1,
        text=partial_markdown(partial.text),
        thinking=partial.thinking,
    )
    return [view, Static(f"⚠ {partial.label()}", classes="partial-label", markup=False)]


_NOTE_MARKS = {"instructions": "§", "phase": "◆", "compaction": "⇲", "cut_short": "Σ"}


class _NoteLine(Static):
    """One run note: a mark and its one line."""

    def __init__(self, note: RunNoted) -> None:
        mark = _NOTE_MARKS.get(note.note, "·")
        super().__init__(
            f"{mark} {terminal_safe_line(note.text)}", classes="run-note", markup=False
        )
        self.seq = note.seq


async def _collect_once_removed(removing: AwaitRemove) -> None:
    """Free the widgets a trim unmounted, once they are gone, with a full garbage collection.

    Unmounted widgets are reference cycles (a node and its styles, its parent's lists, its
    message pump) that only the full collection frees. Left to Python's own cadence, a scroll
    up through a long run piled up a page's worth of them per Home press until a full
    collection came: each took 240-390 ms here (the stutter was plain to see), and the heap
    they had filled stayed fragmented: RSS grew by ~50 MB however far one went. Collected
    after every page unmounted, each collection takes ~50-70 ms and the growth stays under
    20 MB (measured headless, scrolling up 5,000 of 10,000 messages)."""
    await removing
    gc.collect()


def forget_drawn_lines(widgets: list[Widget]) -> list[Widget]:
    """Drop the lines ``widgets`` and their children have drawn, as they are unmounted.

    Textual 8.2.8 keeps them alive after the widgets are gone: ``StylesCache.get_inner_outer`` is
    an ``lru_cache`` (1,024 entries) on a method that is not a classmethod, so each widget's
    styles cache is a key of that module-level cache, and with it every line the widget drew.
    Scrolling up through a long run unmounts thousands of message widgets: without this, RSS
    grew by ~60 MB (tests/tui/test_window.py counts what is left). What is drawn is unchanged:
    a widget mounted again draws afresh."""
    for widget in widgets:
        for part in widget.walk_children(Widget, with_self=True):
            part._styles_cache.clear()
    return widgets
