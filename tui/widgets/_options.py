"""The keyword arguments every Textual widget takes, typed, for widgets that pass them on."""

from __future__ import annotations

from typing import TypedDict


class WidgetOptions(TypedDict, total=False):
    """``name``, ``id``, ``classes`` and ``disabled``, as ``Widget.__init__`` takes them."""

    name: str | None
    id: str | None
    classes: str | None
    disabled: bool
