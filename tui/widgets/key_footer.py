"""The footer: Textual's, fitted to its width (DESIGN §12: it shows the keys that work where the
focus is). Keys that do nothing right now are left out rather than dimmed; when the rest do not
fit, the least specific ones (the app's, then the screen's) give way whole, never cut mid-label,
and the help key stays, so nothing runs into the palette key on the right."""

from __future__ import annotations

from collections.abc import Iterable

from textual.app import ComposeResult
from textual.binding import Binding
from textual.events import Resize
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

KEPT_ACTIONS = frozenset({"help", "app.help"})
"""Shown whatever the width: the way to every other key."""
PALETTE_WIDTH = 11
"""``▏^p palette`` in the compact style (its border, key, space, label)."""


def _width(key_display: str, description: str) -> int:
    """A compact footer key's cells: key, space, description and its right margin."""
    return len(key_display) + (1 + len(description) if description else 0) + 1


def fit_keys(keys: Iterable[tuple[str, str, str]], width: int) -> list[tuple[str, str, str]]:
    """The (action, key display, description) triples that fit in ``width`` cells, in their
    order of precedence (the focused widget's first); kept actions always, first served."""
    entries = list(keys)
    budget = width
    chosen: set[int] = set()
    for index, (action, display, description) in enumerate(entries):
        if action in KEPT_ACTIONS:
            chosen.add(index)
            budget -= _width(display, description)
    for index, (_, display, description) in enumerate(entries):
        if index in chosen:
            continue
        cost = _width(display, description)
        if cost <= budget:
            chosen.add(index)
            budget -= cost
    return [entry for index, entry in enumerate(entries) if index in chosen]


class KeyFooter(Footer):
    def compose(self) -> ComposeResult:
        if not self._bindings_ready:
            return
        active_bindings = self.screen.active_bindings
        palette_key = self.app.COMMAND_PALETTE_BINDING
        show_palette = self.show_command_palette and self.app.ENABLE_COMMAND_PALETTE
        shown: dict[str, Binding] = {}
        for key, (_, binding, enabled, _tooltip) in active_bindings.items():
            if key == palette_key or not binding.show or not enabled:
                continue
            shown.setdefault(binding.action, binding)
        width = self.size.width or self.app.size.width
        palette = active_bindings.get(palette_key) if show_palette else None
        if palette is not None:
            width -= PALETTE_WIDTH
        displays = {action: self.app.get_key_display(binding) for action, binding in shown.items()}
        fitted = fit_keys(
            ((action, displays[action], b.description) for action, b in shown.items()), width
        )
        for action, display, description in fitted:
            binding = shown[action]
            yield FooterKey(
                binding.key,
                display,
                description,
                action,
                tooltip=binding.tooltip,
            ).data_bind(compact=Footer.compact)
        if palette is not None:
            yield FooterKey(
                palette.binding.key,
                self.app.get_key_display(palette.binding),
                palette.binding.description,
                palette.binding.action,
                classes="-command-palette",
                disabled=not palette.enabled,
                tooltip=palette.binding.tooltip or palette.binding.description,
            )

    _fitted_width = 0

    def on_resize(self, event: Resize) -> None:
        if self._bindings_ready and event.size.width != self._fitted_width:
            self._fitted_width = event.size.width
            self.call_after_refresh(self.recompose)
