"""One layout per change for the widgets a streamed answer grows.

Textual's layout sets each widget's ``virtual_size`` while it arranges the screen
(``Widget._size_updated``), after it has already placed every widget at its new size. On
``Widget`` that attribute is a reactive declared with ``layout=True``, so the assignment asks
for the screen to be laid out and painted again: a second layout that finds the same
arrangement. While an answer streams, every piece grew the text, its message, and the
conversation's scrollable height, so each piece cost two layouts and two full frames (the
second one, a tick later, 4-8 ms of re-rendering what was already on screen).

A widget whose virtual size only the layout itself computes (a container, or a widget sized by
the height of its content) can take the value without asking for more: the arrangement that
set it is the one on screen. A widget that sets its own virtual size (Textual's ``ScrollView``
family: the text area, logs, data tables) needs the second layout and keeps Textual's
declaration.
"""

from __future__ import annotations

from textual.geometry import Size
from textual.reactive import Reactive


class SizedByLayout:
    """Mix in before the widget class: ``class StreamText(SizedByLayout, Widget)``."""

    virtual_size: Reactive[Size] = Reactive(Size(0, 0), layout=False, repaint=False)
    """Set by the layout that placed the widget; no layout or repaint follows from it."""
