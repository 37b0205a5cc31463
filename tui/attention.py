"""Getting a person's attention when a run needs them: the terminal bell and a desktop
notification through the terminal (OSC 9, understood by iTerm2, WezTerm, kitty, Windows
Terminal, foot…; OSC 777, understood by rxvt-unicode, VTE terminals such as GNOME Terminal,
Ghostty…). ``[defaults] notify`` chooses: "bell", "desktop", "both" (the default) or "off".

Under tmux, OSC 9 / 777 reach the outer terminal only with ``set -g allow-passthrough on`` and
a wrapped sequence; the bell goes through as a tmux alert (``monitor-bell``)."""

from __future__ import annotations

import re
from typing import Any, Literal

NotifyMode = Literal["bell", "desktop", "both", "off"]
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _clean(text: str, *, limit: int = 200) -> str:
    """One line with no control characters (an ESC or BEL would end the sequence early)."""
    return " ".join(_CONTROL.sub(" ", text).split())[:limit]


def desktop_sequences(title: str, body: str) -> str:
    """OSC 9 (body only: the terminal names the app) and OSC 777 (title and body)."""
    title, body = _clean(title), _clean(body)
    return (
        f"\x1b]9;{title}: {body}\x07"
        f"\x1b]777;notify;{title.replace(';', ',')};{body.replace(';', ',')}\x07"
    )


def write_to_terminal(app: Any, data: str) -> bool:
    """Write raw escape sequences to the terminal; False when there is none (headless).

    Textual 8.2.8 has no public API for this: ``App.bell`` itself writes through the private
    ``App._driver.write``. This is the only place agent-tui does the same; tests check that the
    bytes reach a real pty (tests/tui/test_attention.py)."""
    driver = getattr(app, "_driver", None)
    if app.is_headless or driver is None:
        return False
    driver.write(data)
    return True


def alert(app: Any, mode: str, title: str, body: str) -> None:
    """Ring and/or notify as ``mode`` says ("bell", "desktop", "both" or "off")."""
    if mode in ("bell", "both"):
        app.bell()
    if mode in ("desktop", "both"):
        write_to_terminal(app, desktop_sequences(title, body))
