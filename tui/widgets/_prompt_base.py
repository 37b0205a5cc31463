"""What every inline prompt posts when a person answers it, and how it settles.

A prompt that comes while the person types takes no answer from the keys already typing: for
half a second after it docks (``SettlingPrompt``; ``Settings.prompt_settle_seconds``), a
printable key at it is not an answer but text, handed back to the message box
(``KeyBeforeSettled``), and the prompt waits over the box as it does for a message being
typed. Its keys line shows once it takes answers. (Docked at once, it took them: a new-user
trial's "hello there" and Enter, typed as a write's approval came, denied it, and the words
were gone; a "y", "a" or "A" among them would have allowed it, "A" for good. A person who
reads a prompt and answers it takes longer than half a second.)"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from textual.containers import Vertical
from textual.message import Message as TextualMessage
from textual.timer import Timer

if TYPE_CHECKING:
    from textual import events
    from textual.widget import Widget

    from runtime.models import InputRequest


class PromptAnswered(TextualMessage):
    def __init__(self, request: InputRequest, value: Any) -> None:
        super().__init__()
        self.request = request
        self.value = value


class KeyAfterAnswer(TextualMessage):
    """A key that reached a prompt after it was answered: typed on at once, it was meant for
    what comes next, the message box (it went into the answer field on its way out, lost)."""

    def __init__(self, key: str, character: str | None) -> None:
        super().__init__()
        self.key = key
        self.character = character


def forward_once_answered(widget: Widget, answered: bool, event: events.Key) -> bool:
    """Once its prompt is answered, ``widget`` passes ``event`` on to the screen (to the
    message box) instead of taking it; whether it did."""
    if not answered:
        return False
    event.stop()
    event.prevent_default()
    widget.post_message(KeyAfterAnswer(event.key, event.character))
    return True


class KeyBeforeSettled(TextualMessage):
    """A printable key (or a paste: ``pasted``) reached ``prompt`` before it settled: typing
    begun as it came, not an answer. The screen puts it in the message box and lets the prompt
    wait there."""

    def __init__(
        self, prompt: Widget, key: str, character: str | None, *, pasted: str | None = None
    ) -> None:
        super().__init__()
        self.prompt = prompt
        self.key = key
        self.character = character
        self.pasted = pasted


class SettlingPrompt(Vertical):
    """A prompt that takes answers only once settled (see the module's docstring). Its
    ``.prompt-keys`` line, which says its keys, is hidden (its room kept) until then."""

    settled = True
    """Its keys answer it. A prompt not yet docked by the screen has nothing to wait for."""
    _settle_timer: Timer | None = None

    def start_settling(self, seconds: float) -> None:
        """Docked with the keys: they answer it ``seconds`` from now."""
        self.hold()
        if seconds <= 0:
            self._settle()
            return
        self._settle_timer = self.set_timer(seconds, self._settle)

    def hold(self) -> None:
        """Not answered by keys until settled again (it waits over the box)."""
        if self._settle_timer is not None:
            self._settle_timer.stop()
            self._settle_timer = None
        self.settled = False
        self._keys_line_shown(False)
        self.refresh_bindings()

    def _settle(self) -> None:
        self._settle_timer = None
        self.settled = True
        self._keys_line_shown(True)
        self.refresh_bindings()  # the footer shows the answer keys from now on

    def _keys_line_shown(self, shown: bool) -> None:
        from textual.widgets import Static

        for line in self.query(".prompt-keys").results(Static):
            line.styles.visibility = "visible" if shown else "hidden"

    def held_as_typing(self, event: events.Key) -> bool:
        """Before it settled, a printable key is passed to the screen as typing, and Enter,
        which would send or choose, does nothing; once the screen hid it for the typing, every
        key that still reaches it goes on to the box. Whether ``event`` was taken so."""
        if self.settled and self.display:
            return False
        if self.display:
            if event.key == "enter":
                event.stop()
                event.prevent_default()
                return True
            if event.character is None or not event.character.isprintable():
                return False  # Esc, Tab, arrows: not text, and they answer nothing
        event.stop()
        event.prevent_default()
        self.post_message(KeyBeforeSettled(self, event.key, event.character))
        return True

    def pasted_as_typing(self, event: events.Paste, *, always: bool = False) -> bool:
        """A paste before it settled (or ``always``: a prompt with no field for it) is for the
        message box, as typed keys are; whether ``event`` was taken so."""
        if self.settled and self.display and not always:
            return False
        event.stop()
        event.prevent_default()
        self.post_message(KeyBeforeSettled(self, "", None, pasted=event.text))
        return True
