"""Text that is safe to show in a terminal: control characters made visible.

Model text, tool output, file contents and file names can hold escape sequences that a terminal
would obey: ``ESC ]0;…BEL`` retitles the window, ``ESC [2J`` clears the screen, ``ESC ]52;c;…``
writes the clipboard, a bare ``CR`` or backspaces overwrite what was shown. ``terminal_safe``
replaces every such character by a visible stand-in (``ESC`` → ``␛``, ``BEL`` → ``␇``, C1 controls
by their 7-bit form, ``U+009B`` → ``␛[``; bidirectional overrides by ``⟨U+202E⟩``), so
``ESC ]0;title BEL`` shows as ``␛]0;title␇``. Newlines and tabs are kept; ``CR LF`` becomes
``LF``. It works character by character, so a sequence split across streamed pieces is
neutralised as well as a whole one.

JSON output does not go through here: ``json.dumps`` escapes C0 controls itself, and JSON stays
exact.
"""

from __future__ import annotations

__all__ = ["terminal_safe", "terminal_safe_line", "terminal_safe_title"]


def _build_table() -> dict[int, str]:
    table: dict[int, str] = {}
    for code in range(0x20):
        if code in (0x09, 0x0A):  # tab, newline: kept
            continue
        table[code] = chr(0x2400 + code)  # the Control Pictures block: ␀ … ␟ (␛ for ESC)
    table[0x7F] = "␡"
    for code in range(0x80, 0xA0):
        table[code] = "␛" + chr(code - 0x40)  # C1 controls: their 7-bit ESC form
    for code in (*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C):
        table[code] = f"⟨U+{code:04X}⟩"  # bidirectional controls (reordering what is shown)
    return table


_TABLE = _build_table()
_LINE_TABLE = {**_TABLE, 0x0A: "␊", 0x09: " "}


def terminal_safe(text: str) -> str:
    """``text`` with every control character a terminal would act on made visible; newlines
    and tabs kept."""
    if text.isprintable():
        return text  # the common case: nothing to replace (no newline, no tab either)
    return text.replace("\r\n", "\n").translate(_TABLE)


def terminal_safe_line(text: str) -> str:
    """Like ``terminal_safe`` for text that must stay on one line (a title, a file name):
    newlines are shown as ``␊`` and tabs become spaces."""
    if text.isprintable():
        return text
    return text.replace("\r\n", "\n").translate(_LINE_TABLE)


def terminal_safe_title(text: str) -> str:
    """A title (a job's, a run's task) on one line: every run of whitespace, newlines included,
    as one space, and what is left made safe as by ``terminal_safe_line``. A title written over
    several lines read ``# Skill: explain␊␊S…`` in a row of the browser."""
    return terminal_safe_line(" ".join(text.split()))
