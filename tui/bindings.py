"""The keys that work everywhere (``AgentTuiApp.BINDINGS``), in a module of their own: the help
screen lists them without importing the app, which imports the screens."""

from __future__ import annotations

from textual.binding import Binding, BindingType

APP_BINDINGS: list[BindingType] = [
    Binding("ctrl+q", "quit", "Quit", priority=True),
    Binding(
        "ctrl+c",
        "copy_or_interrupt",
        "Copy / interrupt",
        show=False,
        priority=True,
        tooltip="Copy the selection; else interrupt the run; twice within 2 s: quit",
    ),
    Binding("f1", "help", "Help", priority=True),
    Binding("question_mark", "help", "Help", show=False),
]
