"""One user or assistant message: Markdown (streamed as it arrives), thinking collapsed.

Textual's Markdown makes a widget per block, which costs about a millisecond or two each: fine
for ordinary answers, far too slow for huge ones. So the first ``MARKDOWN_CHARS`` of a message
are Markdown (streamed with MarkdownStream); anything beyond is shown as plain text in segments
of ``PLAIN_CHARS`` (only the tail segment changes while text streams), which keeps a 1 MB
answer within the UI budget."""

from __future__ import annotations

import contextlib

from rich.markdown import Markdown as RichMarkdown
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widget import MountError
from textual.widgets import Collapsible, Markdown, Static
from textual.widgets.markdown import MarkdownStream

from runtime.models import Message, Role, ThinkingBlock

MARKDOWN_CHARS = 8000
"""The Markdown part ends at the first paragraph break (outside code fences) after this."""
PLAIN_CHARS = 8000
"""Plain-text segments end at the first line break after this many characters."""
PLAIN_REFRESH = 0.15


def _fences_balanced(text: str) -> bool:
    return sum(1 for line in text.splitlines() if line.lstrip().startswith("```")) % 2 == 0


def markdown_cut(text: str) -> int | None:
    """Where the Markdown part of ``text`` ends, or None when all of it is Markdown."""
    if len(text) <= MARKDOWN_CHARS:
        return None
    cut = text.find("\n\n", MARKDOWN_CHARS)
    while cut != -1 and not _fences_balanced(text[:cut]):
        cut = text.find("\n\n", cut + 2)
    return None if cut == -1 else cut + 2


def plain_segments(text: str) -> list[str]:
    segments: list[str] = []
    start = 0
    while len(text) - start > PLAIN_CHARS:
        cut = text.find("\n", start + PLAIN_CHARS)
        if cut == -1:
            break
        segments.append(text[start : cut + 1])
        start = cut + 1
    segments.append(text[start:])
    return segments


def _thinking_of(message: Message) -> str:
    return "\n\n".join(
        "(redacted thinking)" if block.redacted else block.thinking
        for block in message.content
        if isinstance(block, ThinkingBlock)
    )


class MessageView(Vertical):
    DEFAULT_CSS = """
    MessageView { height: auto; margin: 0 0 1 0; }
    MessageView.-user { border-left: thick $primary; background: $boost; padding: 0 1; }
    MessageView.-assistant { padding: 0 1; }
    MessageView > Markdown { margin: 0; padding: 0; background: transparent; }
    MessageView Collapsible { background: transparent; border: none; padding: 0; }
    MessageView .thinking-text { color: $text-muted; text-style: italic; }
    MessageView > .plain { color: $text; }
    """

    def __init__(
        self, *, message_id: str, role: Role, position: int | None, text: str = ""
    ) -> None:
        super().__init__(classes=f"-{role.value}")
        self.message_id = message_id
        self.role = role
        self.position = position
        self.text = text
        self.thinking_text = ""
        self.committed = position is not None
        self._stream: MarkdownStream | None = None
        self._markdown_text = ""
        self._plain_flush_scheduled = False
        self._plain_tail: str | None = None
        """Text of the last plain segment; None while the message is still all Markdown."""
        self._streamed = 0
        self._gap = False

    @classmethod
    def from_message(cls, message: Message) -> MessageView:
        view = cls(
            message_id=message.id, role=message.role, position=message.position, text=message.text
        )
        view.thinking_text = _thinking_of(message)
        return view

    def compose(self) -> ComposeResult:
        with Collapsible(title="Thinking", collapsed=True, id="thinking") as thinking:
            thinking.display = bool(self.thinking_text)
            yield Static(self.thinking_text, classes="thinking-text", markup=False)
        yield from self._body(self.text)

    def _body(self, text: str) -> list[Markdown | Static]:
        cut = markdown_cut(text)
        self._markdown_text = text if cut is None else text[:cut]
        self._plain_tail = None
        if cut is None:
            return [Markdown(self._markdown_text, classes="segment")]
        widgets: list[Markdown | Static] = [self._frozen_markdown(self._markdown_text)]
        if cut is not None:
            segments = plain_segments(text[cut:])
            widgets += [Static(segment, classes="plain", markup=False) for segment in segments]
            self._plain_tail = segments[-1]
        return widgets

    async def append_text(self, offset: int, text: str) -> None:
        """Append a streamed piece; pieces already seen are skipped, a gap is healed on commit."""
        if offset > self._streamed:
            self._gap = True
        elif offset < self._streamed:
            text = text[self._streamed - offset :]
        if not text:
            return
        self._streamed = max(self._streamed, offset) + len(text)
        self.text += text
        if self._plain_tail is None:
            joined = self._markdown_text + text
            cut = markdown_cut(joined)
            if cut is None:
                self._markdown_text = joined
                await self._write_markdown(text)
                return
            self._markdown_text = joined[:cut]
            if self._stream is not None:
                await self._stream.stop()
                self._stream = None
            # One widget instead of a widget per block: layout stays cheap as the text grows.
            await self.remove_children(".segment")
            await self.mount(self._frozen_markdown(self._markdown_text))
            self._plain_tail = ""
            await self.mount(Static("", classes="plain", markup=False))
            text = joined[cut:]
        await self._write_plain(text)

    @staticmethod
    def _frozen_markdown(text: str) -> Static:
        return Static(RichMarkdown(text), classes="segment frozen")

    async def _write_markdown(self, text: str) -> None:
        if not text:
            return
        if self._stream is None:
            self._stream = Markdown.get_stream(self.query_one(Markdown))
        await self._stream.write(text)

    async def _write_plain(self, text: str) -> None:
        """Plain text is shown at most every ``PLAIN_REFRESH`` seconds: each refresh re-wraps
        the tail segment and re-arranges the conversation, the main cost of a huge answer."""
        assert self._plain_tail is not None
        self._plain_tail += text
        if not self._plain_flush_scheduled:
            self._plain_flush_scheduled = True
            self.set_timer(PLAIN_REFRESH, self._flush_plain)

    async def _flush_plain(self) -> None:
        self._plain_flush_scheduled = False
        if self._plain_tail is None or not self.is_mounted:
            return
        segments = plain_segments(self._plain_tail)
        plains = list(self.query_children(".plain").results(Static))
        plains[-1].update(segments[0])
        if len(segments) > 1:
            await self.mount_all(
                [Static(segment, classes="plain", markup=False) for segment in segments[1:]]
            )
        self._plain_tail = segments[-1]

    def append_thinking(self, text: str) -> None:
        self.thinking_text += text
        thinking = self.query_one("#thinking", Collapsible)
        thinking.display = True
        thinking.query_one(Static).update(self.thinking_text)

    async def on_unmount(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            # Whatever was still pending has nowhere to go once the widget is gone.
            with contextlib.suppress(MountError):
                await stream.stop()

    async def commit(self, message: Message) -> None:
        """The durable message is authoritative over whatever streamed."""
        self.position = message.position
        self.committed = True
        if self._stream is not None:
            await self._stream.stop()
            self._stream = None
        if self._plain_tail is not None:
            await self._flush_plain()
        final = message.text
        if self._gap or final != self.text:
            self.text = final
            await self.remove_children(".segment, .plain")
            await self.mount_all(self._body(final))
        thinking = _thinking_of(message)
        if thinking and thinking != self.thinking_text:
            self.thinking_text = ""
            self.append_thinking(thinking)
        self.display = bool(final or thinking) or self.role is not Role.ASSISTANT
