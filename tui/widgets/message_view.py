"""One user or assistant message: Markdown (streamed as it arrives), thinking collapsed.

The first ``MARKDOWN_CHARS`` of a message (up to a paragraph break outside code fences) are
Markdown, drawn by one ``FrozenMarkdown`` widget: its complete blocks are rendered once, and
streamed text renders only the open block at the end again. Beyond that, the rest is plain text
in one ``StreamText``, which re-wraps only its last row per append and draws only the rows on
screen. No work per delta grows with the length of the message, and a huge message is three
widgets, not thousands. (Textual's Markdown widget, a widget per block, mounted every item of a
streaming list again at each write: a layout of the whole screen per frame while it streamed.)

The committed message is authoritative: if what streamed differs (dropped or merged deltas), only
the part after the longest common prefix is redrawn, a slice per event-loop turn; when it is the
same, nothing is redrawn at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Self

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.geometry import Region
from textual.strip import Strip
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import Collapsible
from textual.widgets.collapsible import CollapsibleTitle

from runtime.kinds import Role
from runtime.models import ThinkingBlock
from runtime.skills import SkillInvocation, skill_invocation, workspace_skills
from runtime.textsafe import terminal_safe
from tui.widgets.frozen_markdown import FrozenMarkdown
from tui.widgets.sized_by_layout import SizedByLayout
from tui.widgets.stream_text import StreamText
from tui.widgets.tall_widget import TallWidget

if TYPE_CHECKING:
    from runtime.models import Message

MARKDOWN_CHARS = 8000
"""While a message streams, its Markdown part ends at the first paragraph break (outside code
fences) after this."""
SETTLED_MARKDOWN_CHARS = 64 * 1024
"""A committed message is Markdown up to this (then plain text after a paragraph break): a long
answer (a review, a plan) reads as Markdown whole once it is complete, rendered block by block
after the frame; only a huge one keeps a plain tail."""
MARKDOWN_EVERY = 0.1
"""Seconds between writes of streamed text to the Markdown part: each write renders its open
block again, and lays the screen out again when that block grows by a row."""


def _fences_balanced(text: str) -> bool:
    return sum(1 for line in text.splitlines() if line.lstrip().startswith("```")) % 2 == 0


def closed_markdown(text: str) -> str:
    """An answer cut mid-way (cancelled, failed), as Markdown that reads as what it was: an
    open code block, bold or code span at the cut is closed (a trial read a raw
    ``**nothing committed is`` after Esc). Only the last paragraph is looked at: markers
    before it were closed there or are literal."""
    if not _fences_balanced(text):
        return text + ("" if text.endswith("\n") else "\n") + "```"
    last = text.rsplit("\n\n", 1)[-1]
    closing = ""
    if last.count("`") % 2:
        closing += "`"
    elif last.count("**") % 2:
        closing += "**"
    return text.rstrip() + closing if closing else text


def partial_markdown(text: str) -> str:
    """A partial answer as it is shown once its stream has ended: what the cut left open is
    closed when all of it is Markdown (see ``closed_markdown``); a longer one ends in plain
    text, where a closing marker would show as typed, so it is left as it is."""
    if markdown_cut(text, SETTLED_MARKDOWN_CHARS) is not None:
        return text
    return closed_markdown(text)


def markdown_cut(text: str, limit: int = MARKDOWN_CHARS) -> int | None:
    """Where the Markdown part of ``text`` ends (after ``limit`` characters), or None when all
    of it is Markdown."""
    if len(text) <= limit:
        return None
    cut = text.find("\n\n", limit)
    while cut != -1 and not _fences_balanced(text[:cut]):
        cut = text.find("\n\n", cut + 2)
    return None if cut == -1 else cut + 2


def common_prefix_length(a: str, b: str) -> int:
    """Length of the longest common prefix (binary search over C-speed slice comparisons)."""
    low, high = 0, min(len(a), len(b))
    if a[:high] == b[:high]:
        return high
    while low < high:  # invariant: a[:low] == b[:low] and a[:high + 1] != b[:high + 1]
        middle = (low + high + 1) // 2
        if a[low:middle] == b[low:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def _thinking_of(message: Message) -> str:
    return "\n\n".join(
        "(redacted thinking)" if block.redacted else block.thinking
        for block in message.content
        if isinstance(block, ThinkingBlock)
    )


_FILLING = (None, "1fr", "100%")


def _filled_width(width: int | None, widget: Widget) -> int | None:
    """The width of ``widget``'s content when it fills a vertical layout ``width`` wide (its
    width unset, ``1fr`` or ``100%``, unbounded); None when it may not."""
    styles = widget.styles
    if width is None or styles.min_width is not None or styles.max_width is not None:
        return None
    if (None if styles.width is None else str(styles.width)) not in _FILLING:
        return None
    return width - styles.margin.width - styles.gutter.width


def toggle_thinking(blocks: Sequence[Collapsible], focused: Widget | None) -> Collapsible | None:
    """Open (or, when all are open, close) thinking blocks: the one whose title has focus, else
    ``blocks`` (those in view). Returns the block whose title should take focus."""
    if not blocks:
        return None
    if isinstance(focused, CollapsibleTitle) and isinstance(focused.parent, Collapsible):
        chosen: Sequence[Collapsible] = [focused.parent]
    else:
        chosen = blocks
    collapse = all(not block.collapsed for block in chosen)
    for block in chosen:
        block.collapsed = collapse
    return chosen[0]


class MessageView(SizedByLayout, TallWidget, Vertical):
    # $panel, not $boost: Textual's $boost is transparent in any theme that sets its panel or is
    # light (all but textual-dark).
    DEFAULT_CSS = """
    MessageView { height: auto; margin: 0 0 1 0; }
    MessageView.-user { border-left: thick $primary; background: $panel; padding: 0 1; }
    MessageView.-assistant { padding: 0 1; }
    /* The message's own bottom margin separates it; a blank row only before a plain tail. */
    MessageView > FrozenMarkdown.-head { margin: 0 0 1 0; }
    MessageView Collapsible { background: transparent; border: none; padding: 0; }
    MessageView .thinking-text { color: $text-muted; text-style: italic; }
    MessageView .skill-text { color: $text-muted; }
    MessageView > .plain { color: $text; }
    """

    def __init__(
        self,
        *,
        message_id: str,
        role: Role,
        position: int | None,
        text: str = "",
        thinking: str = "",
        workspace: str | None = None,
    ) -> None:
        """``workspace``: the job's folder, whose skills a person's message may have invoked."""
        super().__init__(classes=f"-{role.value}")
        self.message_id = message_id
        self.role = role
        self.position = position
        self.committed = position is not None
        streamed = len(text)  # offsets of later pieces count the text as it came
        self._workspace = workspace
        skill = self._invocation(text) if role is Role.USER else None
        text, thinking = terminal_safe(text), terminal_safe(thinking)
        self._parts: list[str] = [text] if text else []
        cut = self._cut(text)
        self._markdown_text = text if cut is None else text[:cut]
        self._markdown = FrozenMarkdown(self._markdown_text, classes="segment")
        self._tail: StreamText | None = (
            None if cut is None else StreamText(text[cut:], classes="plain")
        )
        """The plain part after the Markdown one; None while the message is all Markdown."""
        self._thinking = StreamText(thinking, classes="thinking-text")
        self._pending_markdown: list[str] = []
        """Streamed text for the Markdown part, written to it at most every MARKDOWN_EVERY."""
        self._markdown_flush: Timer | None = None
        self._streamed = streamed
        self._gap = False
        self._skill_name = skill.name if skill is not None else ""
        self._skill_body: StreamText | None = None
        """A skill the person invoked: its expansion (what the model read), folded under the
        command as typed (a new-user trial read the whole body as if they had typed it)."""
        if skill is not None:
            self._tail = StreamText(terminal_safe(skill.typed), classes="plain")
            self._skill_body = StreamText(text, classes="skill-text")
        self._box_row: tuple[object, Strip] | None = None
        """One row of the message's own box and what it was drawn for (``render_lines``)."""

    def render_lines(self, crop: Region) -> list[Strip]:
        """The message's own box: its children cover the middle, so what shows of it is its
        background, side padding and left border, the same on every row (it has no top or
        bottom edge). One row is drawn and repeated. Textual draws every row again whenever
        the message grows (a new size empties a widget's drawn rows): while an answer
        streams, each flush redrew the rows on screen (1.3 ms for 33 of a 1 MB answer, in
        a frame of ~10 ms), and built the whole box's content before (its full height)."""
        styles = self.styles
        if not crop.height or styles.padding.top or styles.padding.bottom:
            return super().render_lines(crop)
        if styles.border_top[0] not in ("", "none") or styles.border_bottom[0] not in ("", "none"):
            return super().render_lines(crop)
        edges = (styles.border_left, styles.border_right, styles.padding)
        key = (crop.x, crop.width, self.size.width, self.rich_style, edges)
        if self._box_row is None or self._box_row[0] != key:
            self._box_row = (key, super().render_lines(Region(crop.x, crop.y, crop.width, 1))[0])
        return [self._box_row[1]] * crop.height

    def notify_style_update(self) -> None:
        self._box_row = None
        super().notify_style_update()

    def refresh(
        self, *regions: Region, repaint: bool = True, layout: bool = False, recompose: bool = False
    ) -> Self:
        # Asked to draw again (the app's colours or filters changed, say): the row too. A new
        # size alone does not come through here.
        if repaint:
            self._box_row = None
        return super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)

    def _cut(self, text: str) -> int | None:
        """Where the Markdown part ends. What the person typed or pasted is shown as they wrote
        it (its line breaks kept, `*` and `#` not read as Markdown), so all of it is plain."""
        if self.role is Role.USER:
            return 0
        return markdown_cut(text, SETTLED_MARKDOWN_CHARS if self.committed else MARKDOWN_CHARS)

    @classmethod
    def from_message(cls, message: Message, *, workspace: str | None = None) -> MessageView:
        return cls(
            message_id=message.id,
            role=message.role,
            position=message.position,
            text=message.text,
            thinking=_thinking_of(message),
            workspace=workspace,
        )

    def _invocation(self, text: str) -> SkillInvocation | None:
        """The skill of the job's folder ``text`` invoked, when it is exactly its expansion."""
        if self._workspace is None or not text.startswith("# Skill: "):
            return None
        return skill_invocation(text, workspace_skills(self._workspace))

    @property
    def least_rows(self) -> int:
        """A height the message has at least: its plain part's lines, and the rows of its
        Markdown part drawn so far (at the width it was drawn at)."""
        lines = self._tail.line_count if self._tail is not None else 0
        return lines + self._markdown.drawn_rows

    @property
    def streamed_chars(self) -> int:
        """How much of the message's text reached this view (as it streamed, or all of it)."""
        return self._streamed

    @property
    def text(self) -> str:
        """All of the text shown (streamed so far, or committed)."""
        if len(self._parts) > 1:
            self._parts = ["".join(self._parts)]
        return self._parts[0] if self._parts else ""

    @property
    def thinking_text(self) -> str:
        return self._thinking.text

    def compose(self) -> ComposeResult:
        if self._thinking.text:  # a streaming message gets it when its thinking arrives
            with Collapsible(title="Thinking", collapsed=True, id="thinking"):
                yield self._thinking
        self._markdown.display = bool(self._markdown_text) or self._tail is None
        self._markdown.set_class(self._tail is not None, "-head")
        if self.role is not Role.USER:  # what a person wrote is all plain: no Markdown part
            yield self._markdown
        if self._tail is not None:
            yield self._tail
        if self._skill_body is not None:
            lines = len(self._skill_body.text.splitlines())
            yield Collapsible(
                self._skill_body,
                title=f"skill: {self._skill_name} — {lines} lines",
                collapsed=True,
                id="skill-body",
            )

    async def append_text(self, offset: int, text: str) -> None:
        """Append a streamed piece; pieces already seen are skipped, a gap is healed on commit."""
        if offset > self._streamed:
            self._gap = True
        elif offset < self._streamed:
            text = text[self._streamed - offset :]
        if not text:
            return
        self._streamed = max(self._streamed, offset) + len(text)
        text = terminal_safe(text)  # control characters shown, never sent to the terminal
        self._parts.append(text)
        if self._tail is None:
            joined = self._markdown_text + text
            cut = self._cut(joined)
            if cut is None:
                self._markdown_text = joined
                await self._write_markdown(text)
                return
            # The Markdown part is complete: what it has not been given yet goes in at once,
            # the rest is plain text after it.
            self._markdown_text = joined[:cut]
            self._stop_writes()
            self._markdown.append(self._markdown_text[len(self._markdown.source) :])
            self._tail = StreamText(classes="plain")
            self._markdown.add_class("-head")
            await self.mount(self._tail, after=self._markdown)
            text = joined[cut:]
        self._tail.append(text)

    async def _write_markdown(self, text: str) -> None:
        if not text:
            return
        self._pending_markdown.append(text)
        if self._markdown_flush is None:
            self._markdown_flush = self.set_timer(MARKDOWN_EVERY, self._flush_markdown)

    def _flush_markdown(self) -> None:
        self._markdown_flush = None
        text = "".join(self._pending_markdown)
        self._pending_markdown.clear()
        self._markdown.append(text)

    def _stop_writes(self) -> None:
        """No timed write is due any more; what was waiting for one is dropped."""
        if self._markdown_flush is not None:
            self._markdown_flush.stop()
            self._markdown_flush = None
        self._pending_markdown.clear()

    def append_thinking(self, text: str) -> None:
        self._thinking.append(terminal_safe(text))
        if not self.query("#thinking"):
            # Mounted when the first thinking arrives, not with every streaming message: most
            # have none, and the block is four widgets to style and lay out. Into a view still
            # being mounted (its first piece and this one came together, a run resumed as it
            # was opened), once it is: mounting into it raised MountError.
            if self.is_mounted:
                self._mount_thinking()
            else:
                self.call_after_refresh(self._mount_thinking)

    def _mount_thinking(self) -> None:
        if self.is_mounted and not self.query("#thinking"):
            self.mount(
                Collapsible(self._thinking, title="Thinking", collapsed=True, id="thinking"),
                before=0,
            )

    def render_ahead(self, width: int) -> None:
        """A streaming answer just mounted in a container ``width`` wide: its Markdown part as
        it came with its first piece (all of it, when that piece went past it) is rendered
        now, before the layout that places it, at the width that layout will give it. Left
        to the layout, it was rendered a time budget per frame, and each frame after the
        first laid out and drew the screen again only to show it (twice for a 1 MB answer,
        ~10 ms each, while it was out of view above the tail)."""
        if self.committed or self.role is Role.USER:
            return
        width_in = _filled_width(_filled_width(width, self), self._markdown)
        if width_in is not None:
            self._markdown.render_ahead(width_in)

    def on_unmount(self) -> None:
        # Whatever was still pending has nowhere to go once the widget is gone.
        self._stop_writes()

    async def commit(self, message: Message) -> None:
        """The durable message is authoritative over whatever streamed."""
        final = terminal_safe(message.text)
        thinking = terminal_safe(_thinking_of(message))
        if self.committed and final == self.text and thinking == self._thinking.text:
            return  # shown already (read from the database, or committed twice)
        self.position = message.position
        self.committed = True
        self._flush_markdown()  # what waited for the next write is shown before it is compared
        self._stop_writes()
        if self._gap or final != self.text:
            await self._replace_text(final)
        elif self._tail is not None and self._cut(final) is None:
            await self._settle_as_markdown(final)
        if thinking and thinking != self._thinking.text:
            if not self.query("#thinking"):
                await self.mount(
                    Collapsible(self._thinking, title="Thinking", collapsed=True, id="thinking"),
                    before=0,
                )
            await self._thinking.set_text(thinking)
        self.display = bool(final or thinking) or self.role is not Role.ASSISTANT

    async def settle_partial(self) -> None:
        """The stream stopped short of a message (cancelled, failed): nothing more will come,
        so what streamed reads as a committed answer does (a new-user trial saw a raw
        ``_This is`` after Esc): Markdown up to ``SETTLED_MARKDOWN_CHARS``, plain after."""
        self._flush_markdown()
        self._stop_writes()
        if self._gap or self.role is Role.USER:
            return
        text = self.text
        cut = markdown_cut(text, SETTLED_MARKDOWN_CHARS)
        if cut is not None:
            # Longer than the settled Markdown part: it grows from the streaming head (a
            # trial read raw ``**bold**`` from 8,000 characters on after Esc on a 300 KiB
            # answer) and the plain tail keeps what is after it.
            await self._widen_head(text, cut)
            return
        closed = partial_markdown(text)
        # A short answer is all Markdown already; what the cut left open is closed all the
        # same (a trial saw a raw ``**nothing`` after Esc).
        if self._tail is not None or closed != self._markdown.source:
            await self._settle_as_markdown(closed)

    async def _widen_head(self, text: str, cut: int) -> None:
        """The Markdown part ends at ``cut`` instead (later than it does): the text between
        moves out of the plain tail into it. Its new blocks are rendered as a committed
        message's are, a time budget per frame (``FrozenMarkdown``)."""
        head = self._markdown.source
        if self._tail is None or cut <= len(head) or not text.startswith(head):
            return
        self._markdown_text = text[:cut]
        self._markdown.append(text[len(head) : cut])
        await self._tail.set_text(text[cut:])

    async def _settle_as_markdown(self, final: str) -> None:
        """The committed message is short enough to be Markdown whole: its plain tail (kept
        plain while it streamed) joins the Markdown part."""
        self._markdown_text = final
        self._markdown.set_source(final)
        self._markdown.display = True
        self._markdown.remove_class("-head")
        if self._tail is not None:
            tail, self._tail = self._tail, None
            await tail.remove()

    async def _replace_text(self, final: str) -> None:
        """Show ``final`` instead of what streamed, redrawing only from where they differ."""
        same = common_prefix_length(self.text, final)
        self._parts = [final] if final else []
        self._streamed = len(final)
        self._gap = False
        if self._skill_body is not None and self._tail is not None:
            skill = self._invocation(final)
            await self._tail.set_text(terminal_safe(skill.typed) if skill else final)
            await self._skill_body.set_text(final)
            return
        head = len(self._markdown_text)
        if self._tail is not None and same >= head:
            self._tail.truncate(same - head)
            await self._tail.extend(final[same:])
            return
        cut = self._cut(final)
        self._markdown_text = final if cut is None else final[:cut]
        self._markdown.set_source(self._markdown_text)
        self._markdown.display = bool(self._markdown_text) or cut is None
        if cut is None:
            if self._tail is not None:
                tail, self._tail = self._tail, None
                self._markdown.remove_class("-head")
                await tail.remove()
            return
        if self._tail is None:
            self._tail = StreamText(classes="plain")
            self._markdown.add_class("-head")
            await self.mount(self._tail, after=self._markdown)
        else:
            self._tail.truncate(0)
        await self._tail.extend(final[cut:])
