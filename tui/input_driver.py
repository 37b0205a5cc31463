"""Keys reach the app a turn of the event loop sooner.

Textual's terminal driver reads keys (and mouse events) on a thread of its own and hands each
to the event loop as a coroutine (``asyncio.run_coroutine_threadsafe(app._post_message(...))``):
one turn of the loop makes a task of it, the next runs that task, which puts the key in the
app's queue, and a third turn has the app take it. ``MessagePump.post_message`` is thread-safe
(from another thread it queues the message with ``call_soon_threadsafe``): the key is in the
app's queue after one turn, and the app takes it on the next. While ten runs stream flat out, a
turn of the loop is ~2 ms (a step of each run in turn), and a key goes through 7-8 of them
before its echo is drawn.

It also says when a person's input came (``InputNoting.note_input``): keys, pastes, clicks and
wheel turns, not mouse moves. While such input waits, the runs streaming in the program give the
event loop up more often (``Runtime.give_way_to_input``).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from textual import events
from textual.app import App
from textual.drivers.linux_driver import LinuxDriver
from textual.message import Message

_DELIBERATE = (
    events.Key,
    events.Paste,
    events.MouseDown,
    events.MouseScrollDown,
    events.MouseScrollUp,
)
"""What a person does on purpose and waits to see drawn (a mouse move is not)."""


@runtime_checkable
class InputNoting(Protocol):
    def note_input(self) -> None:
        """Called on the input thread as a person's input arrives."""


class KeysFirstDriver(LinuxDriver):
    """Textual's driver for Linux and macOS terminals, posting what it reads straight to the
    app's queue."""

    def __init__(
        self,
        app: App[Any],
        *,
        debug: bool = False,
        mouse: bool = True,
        size: tuple[int, int] | None = None,
    ) -> None:
        super().__init__(app, debug=debug, mouse=mouse, size=size)
        self.target = app
        self._noting = app if isinstance(app, InputNoting) else None

    def send_message(self, message: Message) -> None:
        """Called on the input thread, for each key or mouse event read."""
        if self._noting is not None and isinstance(message, _DELIBERATE):
            self._noting.note_input()
        self.target.post_message(message)
