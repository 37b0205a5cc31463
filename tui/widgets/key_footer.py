"""The footer: Textual's, fitted to its width (DESIGN §12: it shows the keys that work where the
focus is). Keys that do nothing right now are left out rather than dimmed; when the rest do not
fit, the keys that have shorter words (``ShortKeys``) take them first, then the least specific
ones (the app's, then the screen's) give way whole, never cut mid-label, and the help key stays,
so nothing runs into the palette key on the right.

Its keys are our own ``FooterKey`` (Textual's lives in a private module): named alike, so the
rules Textual's ``Footer`` has for its keys (compact spacing, the palette key's border) style
these too, and drawn alike."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.events import Resize
from textual.reactive import reactive
from textual.widget import Widget
from textual.widgets import Footer

from tui.widgets.sized_by_layout import SizedByLayout

if TYPE_CHECKING:
    from textual.screen import Screen

KEPT_ACTIONS = frozenset({"help", "app.help"})
"""Shown whatever the width: the way to every other key."""
PALETTE_WIDTH = 11
"""``▏^p palette`` in the compact style (its border, key, space, label)."""


class ShortKeys:
    """A widget whose keys have shorter descriptions too, for a footer too narrow for the
    full ones: at 80 columns an approval's "r Deny with reason" gave way whole (a new-user
    trial). The full words stay the key's tooltip."""

    SHORT_DESCRIPTIONS: ClassVar[Mapping[str, str]] = {}
    """By action: the description a narrow footer shows instead."""


class FooterKey(SizedByLayout, Widget):
    """One key of the footer: its key and what it does; a click presses the key."""

    ALLOW_SELECT = False
    COMPONENT_CLASSES: ClassVar[set[str]] = {"footer-key--key", "footer-key--description"}
    DEFAULT_CSS = """
    FooterKey {
        width: auto;
        height: 1;
        text-wrap: nowrap;
        background: $footer-item-background;
        .footer-key--key {
            color: $footer-key-foreground;
            background: $footer-key-background;
            text-style: bold;
            padding: 0 1;
        }
        .footer-key--description {
            padding: 0 1 0 0;
            color: $footer-description-foreground;
            background: $footer-description-background;
        }
        &:hover { color: $footer-key-foreground; background: $block-hover-background; }
        &.-disabled { text-style: dim; }
        &.-compact {
            .footer-key--key { padding: 0; }
            .footer-key--description { padding: 0 0 0 1; }
        }
    }
    """

    compact = reactive(True)

    def __init__(
        self,
        key: str,
        key_display: str,
        description: str,
        action: str,
        *,
        disabled: bool = False,
        tooltip: str = "",
        classes: str = "",
    ) -> None:
        # Compact, as ``compact`` starts: its watcher then finds the class there on mount
        # instead of restyling each key before the first frame.
        classes = f"{classes} -compact"
        super().__init__(classes=f"{classes} -disabled" if disabled else classes)
        self.key = key
        self.key_display = key_display
        self.description = description
        self.action = action
        self._disabled = disabled
        self.set_reactive(Widget.shrink, False)
        if tooltip:
            self.tooltip = tooltip

    def render(self) -> Text:
        def padded(text: str, part: str) -> tuple[str, Style]:
            padding = self.get_component_styles(part).padding
            return (
                " " * padding.left + text + " " * padding.right,
                self.get_component_rich_style(part),
            )

        if self.description:
            label = Text.assemble(
                padded(self.key_display, "footer-key--key"),
                padded(self.description, "footer-key--description"),
            )
        else:
            label = Text.assemble(
                (self.key_display, self.get_component_rich_style("footer-key--key"))
            )
        label.stylize_before(self.rich_style)
        return label

    def on_mouse_down(self) -> None:
        if self._disabled:
            self.app.bell()
        else:
            self.app.simulate_key(self.key)

    def watch_compact(self, compact: bool) -> None:
        self.set_class(compact, "-compact")

    def show_key(self, key: _Key) -> None:
        """Show ``key`` instead (a key that is not the palette's)."""
        self.key, self.key_display, self.description = key.key, key.display, key.description
        self.action = key.action
        self._disabled = key.disabled
        self.set_class(key.disabled, "-disabled")
        self.tooltip = key.tooltip or None
        self.refresh(layout=True)


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


def _key_widget(key: _Key) -> FooterKey:
    widget = FooterKey(
        key.key,
        key.display,
        key.description,
        key.action,
        disabled=key.disabled,
        tooltip=key.tooltip,
        classes="-command-palette" if key.palette else "",
    )
    return widget if key.palette else widget.data_bind(compact=Footer.compact)


@dataclass(frozen=True)
class _Key:
    key: str
    display: str
    description: str
    action: str
    tooltip: str
    palette: bool = False
    """The command palette's key: at the right, styled apart, never compacted."""
    disabled: bool = False


class KeyFooter(Footer):
    _shown: tuple[_Key, ...] | None = None
    _recomposing: asyncio.Lock | None = None
    """The keys composed last; a change of bindings that leaves them the same mounts nothing."""

    # Textual calls Footer's own handlers too (each class's in the MRO): no super() here.
    def on_mount(self) -> None:
        self.app.screen_change_signal.subscribe(self, self._screen_changed)

    def on_unmount(self) -> None:
        self.app.screen_change_signal.unsubscribe(self)

    def _screen_changed(self, _screen: object) -> None:
        """A screen came over this footer's or went: the keys shown may be that screen's."""
        if self.is_attached and self._bindings_ready:
            self.call_after_refresh(self.recompose)

    def _keys_screen(self) -> Screen[object]:
        """The screen whose keys are shown: this footer's, or the screen over it while that
        one has no footer of its own (the command palette). Keys follow focus: with the
        palette open, the main screen's keys (tab Pane, esc Leave) did nothing there, but a
        new-user trial read them under the palette."""
        own = self.screen
        top = self.app.screen
        if top is own or own not in self.app.screen_stack or top.query(Footer):
            return own
        return top

    def _keys(self) -> tuple[_Key, ...]:
        keys_screen = self._keys_screen()
        active_bindings = keys_screen.active_bindings
        palette_key = self.app.COMMAND_PALETTE_BINDING
        show_palette = (
            self.show_command_palette
            and self.app.ENABLE_COMMAND_PALETTE
            and keys_screen is self.screen  # over the palette (or a screen), ^p does nothing
        )
        shown: dict[str, Binding] = {}
        extras: dict[str, Binding] = {}
        shorter: dict[str, str] = {}
        for key, (node, binding, enabled, _tooltip) in active_bindings.items():
            if key == palette_key or not binding.show or not enabled:
                continue
            if isinstance(node, ShortKeys) and binding.action in node.SHORT_DESCRIPTIONS:
                shorter.setdefault(binding.action, node.SHORT_DESCRIPTIONS[binding.action])
            # A widget's key for one of the screen's actions (``screen.…``: the browser's f, e,
            # x) comes after the screen's and the app's own, as room allows: with them first,
            # an 80-column footer had no room left for "i Inbox" while a run waited.
            (extras if binding.action.startswith("screen.") else shown).setdefault(
                binding.action, binding
            )
        for action, binding in extras.items():
            shown.setdefault(action, binding)
        width = self.size.width or self.app.size.width
        palette = active_bindings.get(palette_key) if show_palette else None
        if palette is not None:
            width -= PALETTE_WIDTH
        displays = {action: self.app.get_key_display(binding) for action, binding in shown.items()}
        entries = [(action, displays[action], b.description) for action, b in shown.items()]
        fitted = fit_keys(entries, width)
        if any(entry not in fitted for entry in entries if entry[0] in shorter):
            # A key with shorter words would give way: all such keys take them.
            fitted = fit_keys(
                [
                    (action, shown_as, shorter.get(action, words))
                    for action, shown_as, words in entries
                ],
                width,
            )
        keys = []
        for action, display, description in fitted:
            binding = shown[action]
            full = binding.description if description != binding.description else ""
            keys.append(_Key(binding.key, display, description, action, binding.tooltip or full))
        if palette is not None:
            keys.append(
                _Key(
                    palette.binding.key,
                    self.app.get_key_display(palette.binding),
                    palette.binding.description,
                    palette.binding.action,
                    palette.binding.tooltip or palette.binding.description,
                    palette=True,
                    disabled=not palette.enabled,
                )
            )
        return tuple(keys)

    def bindings_changed(self, screen: Screen[object]) -> None:
        """The keys are shown again as soon as the screen's bindings change, not after the
        next frame as Textual's footer does: that made every change of keys a frame of its
        own, a tick or two after the frame of whatever changed them (a run that ends: its
        last words, then its keys). ``recompose`` shows them in place and mounts nothing when
        they are the same."""
        self._bindings_ready = True
        if not screen.app.app_focus:
            return
        if self.is_attached and screen is self.screen:
            self.call_later(self.recompose)

    async def recompose(self) -> None:
        """Mount the keys again only when they changed: the bindings change at every focus
        move and state change (eight times as a run starts), and each recompose mounted and
        styled a dozen widgets and laid the screen out again. One at a time: a resize and a
        change of bindings ask at once, and one that read the keys while the other was still
        mounting would leave keys twice or out of order."""
        if self._recomposing is None:
            self._recomposing = asyncio.Lock()
        async with self._recomposing:
            if self._bindings_ready and self.is_attached:
                keys = self._keys()
                if keys == self._shown and self.children:
                    return
                if await self._show_in_place(keys):
                    return
            await super().recompose()

    async def _show_in_place(self, keys: tuple[_Key, ...]) -> bool:
        """Show ``keys`` with the key widgets already mounted (their labels changed), mounting
        or removing only the difference in number. The keys change at a run's start and end
        and at focus moves; composing them all again mounted and styled five to ten widgets
        each time (their own messages alone took 10 ms over a run that streamed a 1 MB
        answer, in the frames after Enter and after the end). False when the palette key
        changed (it is styled apart): then all are composed again."""
        shown = self._shown
        if not shown or not self.children:
            return False
        palette_before = [key for key in shown if key.palette]
        palette_now = [key for key in keys if key.palette]
        if palette_before != palette_now:
            return False
        widgets = list(self.query_children(FooterKey))
        palette = [w for w in widgets if w.has_class("-command-palette")]
        widgets = [w for w in widgets if w not in palette]
        was = [key for key in shown if not key.palette]
        wanted = [key for key in keys if not key.palette]
        if len(widgets) != len(was):
            return False  # not what was composed last: start again
        self._shown = keys
        for widget, before, key in zip(widgets, was, wanted, strict=False):
            if key != before:
                widget.show_key(key)
        if len(widgets) > len(wanted):
            await self.remove_children(widgets[len(wanted) :])
        elif len(wanted) > len(widgets):
            added = [_key_widget(key) for key in wanted[len(widgets) :]]
            if palette:
                await self.mount_all(added, before=palette[0])
            else:
                await self.mount_all(added)
        return True

    def compose(self) -> ComposeResult:
        if not self._bindings_ready:
            return
        self._shown = self._keys()
        for key in self._shown:
            yield _key_widget(key)

    _fitted_width = 0

    def on_resize(self, event: Resize) -> None:
        if self._bindings_ready and event.size.width != self._fitted_width:
            self._fitted_width = event.size.width
            self.call_after_refresh(self.recompose)
