"""Short forms of ages, token counts and costs, shared by the command line and the app.
(No Textual here: the headless commands import it.)"""

from __future__ import annotations


def format_age(seconds: float) -> str:
    """``42s``, ``5m``, ``3h``, ``2d``."""
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{int(seconds)}s"
    if seconds < 3600:
        return f"{int(seconds // 60)}m"
    if seconds < 86400:
        return f"{int(seconds // 3600)}h"
    return f"{int(seconds // 86400)}d"


def format_tokens(count: int) -> str:
    """``950``, ``1.2k``, ``3.4M``."""
    if count < 1000:
        return str(count)
    if count < 1_000_000:
        return f"{count / 1000:.1f}k"
    return f"{count / 1_000_000:.1f}M"
