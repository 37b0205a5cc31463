"""No per-row bookkeeping when a tall widget grows.

Whenever a widget is asked to draw again whole (it grew, or was refreshed), Textual empties its
cache of drawn lines and then marks each row of its height dirty, one number per row in a set
(``Widget._set_dirty``, ``StylesCache.set_dirty``). With the cache empty, every row is drawn
afresh anyway, so the marks change nothing; but a streaming answer's plain tail and its message
are as tall as the answer: 20,000 rows for 1 MB, marked two or three times per flush (0.2 ms
each, 7-10 ms over the answer, growing with it).

``TallWidget`` makes its cache skip the marks while it holds no drawn line. What is drawn is the
same: a line is drawn when it is dirty or not in the cache, and with the cache empty no line is
in it. This reaches into Textual 8.2.8's private styles cache (the widget's ``_styles_cache``,
its ``_cache`` and ``set_dirty``): ``tests/tui/test_streaming.py`` checks that a growing answer
keeps few marks and draws what Textual's own cache draws.
"""

from __future__ import annotations

from typing import Any

from textual.geometry import Region
from textual.widget import Widget


class TallWidget(Widget):
    """Mix in before the widget class: ``class StreamText(SizedByLayout, TallWidget, Widget)``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        cache = self._styles_cache
        set_dirty = cache.set_dirty

        def set_few_dirty(*regions: Region) -> None:
            if regions and not cache._cache:
                return  # nothing drawn is kept: every line is drawn afresh anyway
            set_dirty(*regions)

        cache.set_dirty = set_few_dirty  # type: ignore[method-assign]
