"""A question docked under the conversation before a destructive action: y confirms (or the
question's own extra keys, such as the key that asked it), anything else (n, Esc, any other key)
keeps things as they are."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar

from textual import events
from textual.binding import Binding, BindingType
from textual.message import Message as TextualMessage
from textual.widget import Widget
from textual.widgets import Static


class ConfirmBar(Static, can_focus=True):
    # For the footer, which showed the screen's keys instead (esc Interrupt, n New job) while
    # the bar asked; the bar itself answers every key (``on_key``).
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Yes"),
        Binding("n", "answer(False)", "No"),
        Binding("escape", "answer(False)", "No", show=False),
    ]

    DEFAULT_CSS = """
    ConfirmBar { height: auto; border: round $error; padding: 0 1; background: $surface;
                 color: $text; text-style: bold; }
    """

    class Closed(TextualMessage):
        def __init__(self, bar: ConfirmBar, *, confirmed: bool) -> None:
            super().__init__()
            self.bar = bar
            self.confirmed = confirmed

    def __init__(
        self,
        question: str,
        on_confirm: Callable[[], object],
        *,
        returning_to: Widget | None = None,
        declined: str = "Nothing was cancelled.",
        about_run: str | None = None,
        also_yes: Sequence[str] = (),
        stops_run: bool = False,
        settle_seconds: float = 0.0,
    ) -> None:
        """``about_run``: the run the question is about, when the question no longer stands
        once that run's state changes (the screen then takes the question away).
        ``also_yes``: keys that confirm besides y (``d`` again, after ``d`` asked).
        ``stops_run``: y stops the run on screen ("Cancel the run?"; the status line says so
        while the question has the keys). ``settle_seconds``: asked as a message was sent
        from the box, the question takes no answer from keys typed on for so long: a printable
        one closes it unanswered (no) and goes, with those after it, to the box (a trial's
        "yes and more", typed on after Enter, cancelled a run with its "y")."""
        yes = " / ".join([*also_yes, "y"])
        super().__init__(f"{question}   {yes} yes · n / Esc no", markup=False, id="confirm")
        self.yes_keys = frozenset({"y", *also_yes})
        self.on_confirm = on_confirm
        self.about_run = about_run
        self.stops_run = stops_run
        self.returning_to = returning_to
        """The widget focused before the question, focused again once it is answered."""
        self.declined = declined
        """What the screen says when the answer is no."""
        self.settle_seconds = settle_seconds
        self._settled = settle_seconds <= 0

    _answered = False

    def on_mount(self) -> None:
        if not self._settled:
            self.set_timer(self.settle_seconds, self._settle)

    def _settle(self) -> None:
        self._settled = True

    def on_key(self, event: events.Key) -> None:
        event.stop()
        event.prevent_default()
        typed_on = self.settle_seconds > 0 and (
            self._answered
            or (not self._settled and event.character is not None and event.character.isprintable())
        )
        if typed_on:
            # For the box, in order (the screen posts it there): typing went on after Enter.
            from tui.widgets._prompt_base import KeyAfterAnswer

            self.post_message(KeyAfterAnswer(event.key, event.character))
            self.action_answer(False)
            return
        self.action_answer(event.key in self.yes_keys)

    def action_answer(self, confirmed: bool) -> None:
        if self._answered:
            return  # once: a key may reach both its binding and ``on_key``
        self._answered = True
        if confirmed:
            self.on_confirm()
        self.post_message(self.Closed(self, confirmed=confirmed))

    async def close(self, *, confirmed: bool) -> None:
        """For the screen that heard ``Closed``: the bar goes, the focus goes back where it
        was, and a no is said."""
        back, app = self.returning_to, self.app
        await self.remove()
        if back is not None and back.is_mounted:
            back.focus()
        if not confirmed:
            app.notify(self.declined, severity="information")
