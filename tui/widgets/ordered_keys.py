"""Keys in a text field act in the order they were typed.

A text field inserts a printable key's character as its key event reaches it, but its editing
keys (Backspace, Delete, arrows, Home, ctrl+w…) are bindings, and Textual runs a widget's
bindings only once the key event has bubbled up to the app. When keys arrive in a burst (a
fast typist while the app is busy, keys sent by tmux), every character of the burst lands
before any of its Backspaces: a new-user trial typed ``/foo bar``, Enter, eight Backspaces and
``explain`` and got ``/foo barexpla``. ``run_own_binding`` runs the field's own binding for the
key at once, on the field, in order with the characters; bindings of the screen and app (and
priority ones, which Textual runs before the field sees the key) are left as they were.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

from textual.binding import Binding

from tui.widgets.one_line_input import OneLineInput

if TYPE_CHECKING:
    from textual import events
    from textual.widget import Widget


@cache
def _own_actions(widget_type: type[Widget]) -> dict[str, str]:
    """Key → action of the non-priority bindings a widget class declares (its own and its
    bases', a subclass's winning)."""
    actions: dict[str, str] = {}
    for cls in reversed(widget_type.__mro__):
        declared = cls.__dict__.get("BINDINGS", ())
        for binding in Binding.make_bindings(declared):
            if not binding.priority:
                actions[binding.key] = binding.action
    return actions


async def run_own_binding(widget: Widget, event: events.Key) -> bool:
    """Run ``widget``'s own binding for ``event``'s key now; whether one ran (the key is then
    used up)."""
    action = _own_actions(type(widget)).get(event.key)
    if action is None:
        return False
    if not await widget.app.run_action(action, widget):
        return False
    event.stop()
    event.prevent_default()
    return True


class OrderedInput(OneLineInput):
    """An ``Input`` whose editing keys act in the order they were typed (and that keeps all of
    a paste: ``OneLineInput``)."""

    async def _on_key(self, event: events.Key) -> None:
        await run_own_binding(self, event)
