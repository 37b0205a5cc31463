"""The conversation of one run: a bounded window of mounted message widgets, streaming at the
tail, older messages asked for when scrolled to the top, the tail followed only while at the
bottom (an anchored scroll)."""

from __future__ import annotations

from collections.abc import Sequence

from textual.containers import VerticalScroll
from textual.message import Message as TextualMessage
from textual.widget import Widget
from textual.widgets import Static

from runtime.events import RunNoted
from runtime.models import Message, Role, ToolCall, ToolCallState
from runtime.textsafe import terminal_safe_line
from runtime.transcript import (
    ForkOrigin,
    PartialAnswer,
    RunHeader,
    TranscriptItem,
    TranscriptMessage,
)
from tui.widgets.message_view import MessageView
from tui.widgets.tool_call_view import ToolCallView

WINDOW = 100
"""Most message widgets kept mounted at once."""


class Conversation(VerticalScroll):
    DEFAULT_CSS = """
    Conversation { background: $background; padding: 0 1; }
    Conversation > .empty { color: $text-muted; padding: 1 2; }
    Conversation > .older { color: $text-muted; text-align: center; }
    Conversation > .run-header { color: $text-muted; text-style: bold; margin: 0 0 1 0; }
    Conversation > .fork-origin { color: $warning; margin: 0 0 1 0; }
    Conversation > .inherited { opacity: 70%; }
    Conversation > .partial-label { color: $warning; text-style: italic; }
    Conversation > .run-note { color: $text-muted; text-style: italic; margin: 0 0 1 0; }
    """

    class OlderWanted(TextualMessage):
        """Scrolled to the top while older messages exist in the database."""

        def __init__(self, run_id: str, before_position: int) -> None:
            super().__init__()
            self.run_id = run_id
            self.before_position = before_position

    def __init__(self, *, window: int = WINDOW, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.window = window
        self.run_id: str | None = None
        self.has_older = False
        self._loading_older = False
        self._messages: dict[str, MessageView] = {}
        self._tools: dict[str, ToolCallView] = {}
        self._tool_calls: dict[str, ToolCall] = {}
        self._message_times: list[tuple[float, MessageView]] = []
        """Each mounted message view with its message's time, in order (where notes go)."""
        self._note_seqs: set[int] = set()

    # --- whole-run loading -----------------------------------------------------------------------
    async def show_empty(self, text: str) -> None:
        self.run_id = None
        await self._clear()
        await self.mount(Static(text, classes="empty", markup=False))

    async def load(
        self,
        run_id: str,
        messages: list[Message],
        tool_calls: list[ToolCall],
        *,
        has_older: bool,
        context: Sequence[TranscriptItem] = (),
        partial: PartialAnswer | None = None,
    ) -> None:
        """``context``: the job's items before this run (``runtime.transcript.run_context``),
        shown only when the run's first message is loaded; ``partial``: its partial answer."""
        self.run_id = run_id
        await self._clear()
        self._tool_calls = {call.id: call for call in tool_calls}
        self.has_older = has_older
        widgets: list[Widget] = []
        if has_older:
            widgets.append(Static("↑ older messages load as you scroll up", classes="older"))
        else:
            widgets.extend(_context_widgets(context))
        for message in messages:
            widgets.extend(self._widgets_for(message))
        if partial is not None:
            widgets.extend(_partial_widgets(partial))
        await self.mount_all(widgets)
        self.scroll_end(animate=False, immediate=True)
        self.anchor()
        self.call_after_refresh(self._want_older)

    async def _clear(self) -> None:
        self._message_times.clear()
        self._note_seqs.clear()
        self._messages.clear()
        self._tools.clear()
        self._tool_calls.clear()
        self._loading_older = False
        await self.remove_children()

    def _widgets_for(self, message: Message) -> list[Widget]:
        widgets: list[Widget] = []
        if message.role is Role.TOOL:
            for block in message.tool_results:
                tool_view = self._tools.get(block.tool_call_id)
                if tool_view is not None:
                    tool_view.set_result(
                        block.content, is_error=block.is_error, images=block.images
                    )
            return widgets
        view = MessageView.from_message(message)
        view.display = bool(message.text or view.thinking_text) or message.role is Role.USER
        self._messages[message.id] = view
        self._message_times.append((message.created_at, view))
        widgets.append(view)
        for use in message.tool_uses:
            widgets.append(self._tool_view(use.tool_call_id, use.name, use.input))
        return widgets

    def _tool_view(
        self, tool_call_id: str, name: str, arguments: dict[str, object]
    ) -> ToolCallView:
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

    # --- live updates --------------------------------------------------------------------------
    async def noted(self, note: RunNoted) -> None:
        """A ``run_noted`` event of the run on screen, as it happens: one line at the tail."""
        if note.run_id != self.run_id or note.seq in self._note_seqs:
            return
        self._note_seqs.add(note.seq)
        await self.mount(_note_widget(note))

    async def insert_notes(self, notes: Sequence[RunNoted]) -> None:
        """The run's notes read from the database: each before the first message that came
        after it (none older than the oldest message loaded, when older ones are not)."""
        oldest = self._message_times[0][0] if self._message_times and self.has_older else None
        for note in sorted(notes, key=lambda n: n.seq):
            if note.run_id != self.run_id or note.seq in self._note_seqs:
                continue
            if oldest is not None and note.created_at < oldest:
                continue
            self._note_seqs.add(note.seq)
            after = [(at, v) for at, v in self._message_times if at > note.created_at and v.parent]
            if after:
                await self.mount(_note_widget(note), before=min(after, key=lambda p: p[0])[1])
            else:
                await self.mount(_note_widget(note))

    async def delta(self, message_id: str, offset: int, text: str, *, thinking: bool) -> None:
        view = self._messages.get(message_id)
        if view is None:
            # Built with its first piece: a big one is sealed at once instead of being streamed
            # into a Markdown widget and then replaced.
            first = text if not thinking and offset == 0 else ""
            view = MessageView(
                message_id=message_id, role=Role.ASSISTANT, position=None, text=first
            )
            self._messages[message_id] = view
            await self.mount(view)
            self._trim()
            if first:
                return
        if view.committed:
            return
        if thinking:
            view.append_thinking(text)
        else:
            await view.append_text(offset, text)

    async def committed(self, message: Message) -> None:
        view = self._messages.get(message.id)
        if view is not None:
            await view.commit(message)
            new_tools = [
                self._tool_view(use.tool_call_id, use.name, use.input)
                for use in message.tool_uses
                if use.tool_call_id not in self._tools
            ]
            if new_tools:
                await self.mount_all(new_tools, after=view)
            return
        widgets = self._widgets_for(message)
        if widgets:
            await self.mount_all(widgets)
            self._trim()

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
            view = self._tool_view(tool_call_id, name, dict(arguments or {}))
            view.state = state
            await self.mount(view)
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

    # --- the window ----------------------------------------------------------------------------
    @property
    def message_views(self) -> list[MessageView]:
        return list(self.query_children(MessageView))

    @property
    def first_position(self) -> int | None:
        positions = [v.position for v in self._messages.values() if v.position is not None]
        return min(positions) if positions else None

    def _trim(self) -> None:
        """Unmount the oldest messages beyond the window while following the tail."""
        if not self.is_anchored:
            return
        views = self.message_views
        excess = len(views) - self.window
        if excess <= 0:
            return
        doomed: list[Widget] = []
        keep_from = views[excess]
        for child in self.children:
            if child is keep_from:
                break
            doomed.append(child)
            if isinstance(child, MessageView):
                self._messages.pop(child.message_id, None)
            elif isinstance(child, ToolCallView):
                self._tools.pop(child.tool_call_id, None)
        self.has_older = True
        self.remove_children(doomed)
        self.mount(Static("↑ older messages load as you scroll up", classes="older"), before=0)

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        self._want_older()

    def _want_older(self) -> None:
        """At the top (or the window does not fill the view) with older messages: ask."""
        if self.scroll_y <= 0 and self.has_older and not self._loading_older and self.run_id:
            first = self.first_position
            if first is not None and first > 0:
                self._loading_older = True
                self.post_message(self.OlderWanted(self.run_id, first))

    async def prepend(self, run_id: str, messages: list[Message], *, has_older: bool) -> None:
        self._loading_older = False
        if run_id != self.run_id:
            return
        for marker in self.query_children(".older"):
            await marker.remove()
        widgets: list[Widget] = []
        if has_older:
            widgets.append(Static("↑ older messages load as you scroll up", classes="older"))
        for message in messages:
            widgets.extend(self._widgets_for(message))
        self.has_older = has_older
        if not widgets:
            return
        before_height = self.virtual_size.height
        await self.mount_all(widgets, before=0)

        def keep_place() -> None:
            grown = self.virtual_size.height - before_height
            self.scroll_to(y=self.scroll_y + max(grown, 0), animate=False, immediate=True)
            self._want_older()

        self.call_after_refresh(keep_place)


def _context_widgets(items: Sequence[TranscriptItem]) -> list[Widget]:
    """Read-only widgets for the job's earlier items: fork origin, run headers, messages."""
    widgets: list[Widget] = []
    for item in items:
        if isinstance(item, ForkOrigin):
            text = f"↳ {item.short_label()} — the history it inherited, dimmed:"
            widgets.append(Static(text, classes="fork-origin", markup=False))
        elif isinstance(item, RunHeader):
            widgets.append(Static(f"── {item.label()}", classes="run-header", markup=False))
        elif isinstance(item, TranscriptMessage):
            message = item.message
            if message.role is Role.TOOL:
                continue
            if message.text or message.role is Role.USER:
                view = MessageView.from_message(message)
                if item.inherited:
                    view.add_class("inherited")
                widgets.append(view)
            if message.tool_uses:
                names = ", ".join(use.name for use in message.tool_uses)
                widgets.append(Static(f"  ⚙ {names}", classes="run-header", markup=False))
        elif isinstance(item, PartialAnswer):
            widgets.extend(_partial_widgets(item))
    return widgets


def sub_run_widgets(items: Sequence[TranscriptItem]) -> list[Widget]:
    """A sub-run's items, read-only, for the fold under the delegation block that made it."""
    return _context_widgets(items)


def _partial_widgets(partial: PartialAnswer) -> list[Widget]:
    view = MessageView(
        message_id=f"partial:{partial.run.id}:{partial.message_id}",
        role=Role.ASSISTANT,
        position=-1,
        text=partial.text,
    )
    return [view, Static(f"⚠ {partial.label()}", classes="partial-label", markup=False)]


_NOTE_MARKS = {"instructions": "§", "phase": "◆", "compaction": "⇲"}


def _note_widget(note: RunNoted) -> Static:
    mark = _NOTE_MARKS.get(note.note, "·")
    return Static(f"{mark} {terminal_safe_line(note.text)}", classes="run-note", markup=False)
