"""The permissions screen: every rule with the file it is saved in, searchable, revocable.

Revoking removes the rule from its file; every run of this process reads the files again before
its next decision (``runtime.permissions.current_permissions``), so the next tool call asks again.
``d`` asks first (a question docked under the list: ``d`` again or ``y`` revokes), and ``u`` puts
a revoked rule back. A rule takes one row, cut with an ellipsis; the highlighted one is marked
with ``›`` (not by colour alone) and shown whole in the detail line under the list.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from runtime.errors import AgentTuiError
from runtime.permissions import PermissionRule, list_rules, restore_rule, revoke_rule
from tui.widgets._format import short
from tui.widgets.confirm_bar import ConfirmBar

KIND_LABELS = {"allow": "allow", "ask": "ask  ", "deny": "deny "}
MARKER = "› "
"""Before the highlighted rule: seen without colour (a monochrome terminal, a colour-blind
person), where the highlight's background alone was not."""


def _home_relative(path: Path) -> str:
    try:
        return "~/" + str(path.relative_to(Path.home()))
    except ValueError:
        return str(path)


class PermissionsScreen(ModalScreen[None]):
    CSS_PATH = "permissions.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close"),
        Binding("d,delete", "revoke", "Revoke rule"),
        Binding("u", "undo", "Undo revoke"),
        Binding("slash", "search", "Search", key_display="/"),
        Binding("ctrl+r", "reload", "Reload files"),
    ]

    def __init__(self, workspace: Path) -> None:
        super().__init__(id="permissions")
        self.workspace = workspace
        self.rules: list[PermissionRule] = []
        self.shown: list[PermissionRule] = []
        self.problem: str | None = None
        self.revoked: list[PermissionRule] = []
        """The rules revoked here, last one last, each with the position it had in its file:
        ``u`` puts them back there, one a press."""
        self._pattern_width = 10
        self._marked: int | None = None
        """The row that carries the marker (the highlighted rule's)."""

    def compose(self) -> ComposeResult:
        with Vertical(id="permissions-box"):
            yield Static("Permissions — rules for tool calls", id="permissions-title")
            yield Input(placeholder="/ filter rules by tool, kind or file", id="permissions-search")
            yield OptionList(id="permissions-list")
            yield Static("", id="permissions-detail", markup=False)
            # What d or u just did, and how to undo it: here, not in a toast, which stayed up
            # on the main screen after Esc, where u means something else (a new-user trial).
            said = Static("", id="permissions-said", markup=False)
            said.display = False
            yield said
            yield Static("", id="permissions-status", markup=False)  # it quotes an error
            yield Static("d revoke · / search · ctrl+r reload · esc close", id="permissions-keys")
        # Its own keys at the bottom: the main screen's showed through, with keys that do not
        # work here (a new-user trial).
        from tui.widgets.key_footer import KeyFooter

        yield KeyFooter()

    def on_mount(self) -> None:
        self.action_reload()
        self.query_one(OptionList).focus()

    def action_reload(self) -> None:
        try:
            self.rules = list_rules(self.workspace)
            self.problem = None
        except AgentTuiError as exc:
            self.rules = []
            self.problem = str(exc)
        self._show()

    def _show(self) -> None:
        if not self.is_attached:  # a filter change that arrived after the screen closed
            return
        needle = self.query_one("#permissions-search", Input).value.strip().lower()
        options = self.query_one(OptionList)
        highlighted = options.highlighted
        options.clear_options()
        self.shown = [
            rule
            for rule in self.rules
            if not needle
            or needle in f"{rule.kind} {rule.pattern} {rule.source} {rule.path}".lower()
        ]
        width = max((len(rule.pattern) for rule in self.shown), default=10)
        self._pattern_width = min(max(width, 10), 40)
        self._marked = None
        options.add_options(
            Option(self._row(rule, marked=False), id=str(index))
            for index, rule in enumerate(self.shown)
        )
        if not self.shown:
            empty = "No rule matches the filter." if needle else "No permission rules saved."
            options.add_option(Option(empty, disabled=True))
        elif highlighted is not None:
            options.highlighted = min(highlighted, len(self.shown) - 1)
        else:
            options.highlighted = 0
        self._mark(options.highlighted)
        status = self.query_one("#permissions-status", Static)
        if self.problem:
            status.update(f"⚠ {self.problem}")
        else:
            status.update(
                f"{len(self.shown)} of {len(self.rules)} rule(s). Read-only tools allow and "
                "writes and shell ask unless a rule says otherwise; deny wins."
            )

    def _row(self, rule: PermissionRule, *, marked: bool) -> Content:
        """One row (the list cuts it with an ellipsis; the detail line has it whole). Plain
        content: a pattern's brackets are not markup."""
        where = "workspace" if rule.source == "workspace" else "user     "
        return Content(
            f"{MARKER if marked else '  '}{KIND_LABELS[rule.kind]}  "
            f"{short(rule.pattern, 40):<{self._pattern_width}}  {where}  "
            f"{_home_relative(rule.path)}"
        )

    def _mark(self, index: int | None) -> None:
        """The marker moves to row ``index``, and the detail line shows that rule whole."""
        options = self.query_one(OptionList)
        previous = self._marked
        if previous is not None and previous != index and previous < len(self.shown):
            options.replace_option_prompt_at_index(
                previous, self._row(self.shown[previous], marked=False)
            )
        detail = self.query_one("#permissions-detail", Static)
        if index is None or index >= len(self.shown):
            self._marked = None
            detail.update("")
            return
        rule = self.shown[index]
        if previous != index:
            options.replace_option_prompt_at_index(index, self._row(rule, marked=True))
        self._marked = index
        where = "the user config" if rule.source == "user" else "the workspace config"
        detail.update(
            f"{MARKER}{rule.kind} {rule.pattern}   in {where}: {_home_relative(rule.path)}"
        )

    @on(OptionList.OptionHighlighted, "#permissions-list")
    def _highlighted(self, event: OptionList.OptionHighlighted) -> None:
        self._mark(event.option_index)

    @on(Input.Changed, "#permissions-search")
    def _filter(self) -> None:
        self._show()

    @on(Input.Submitted, "#permissions-search")
    def _filter_done(self) -> None:
        self.query_one(OptionList).focus()

    def action_search(self) -> None:
        self.query_one("#permissions-search", Input).focus()

    async def action_revoke(self) -> None:
        """Ask first, under the list: a new-user trial pressed d by mistake, and nothing said
        the rule could come back."""
        options = self.query_one(OptionList)
        index = options.highlighted
        if index is None or index >= len(self.shown):
            self.notify("No rule selected.", severity="warning")
            return
        rule = self.shown[index]
        for old in self.query(ConfirmBar):
            await old.remove()
        bar = ConfirmBar(
            f"Revoke {rule.kind} {rule.pattern} from {_home_relative(rule.path)}?",
            lambda: self._revoke(rule),
            returning_to=options,
            declined="Kept: the rule stays in its file.",
            also_yes=("d",),
        )
        await self.query_one("#permissions-box", Vertical).mount(bar, after=options)
        bar.focus()

    async def on_confirm_bar_closed(self, message: ConfirmBar.Closed) -> None:
        message.stop()
        await message.bar.close(confirmed=message.confirmed)

    def _revoke(self, rule: PermissionRule) -> None:
        options = self.query_one(OptionList)
        try:
            removed = revoke_rule(rule)
        except (AgentTuiError, OSError) as exc:
            self.notify(f"Could not revoke: {exc}", severity="error")
            return
        if removed is not None:
            self.revoked.append(removed)
            self._say(
                f"Rule revoked: {rule.kind} {short(rule.pattern, 40)}. u puts it back; the next"
                " call asks again."
            )
            self.refresh_bindings()
        else:
            self.notify("That rule was already gone from its file.", severity="warning")
        self.action_reload()
        options.focus()

    def _say(self, text: str) -> None:
        """What was just done, on the line under the list (it goes with the screen)."""
        said = self.query_one("#permissions-said", Static)
        said.update(text)
        said.display = True

    def action_undo(self) -> None:
        if not self.revoked:
            self.notify("Nothing revoked here to put back.", severity="warning")
            return
        rule = self.revoked.pop()
        try:
            restore_rule(rule)
        except (AgentTuiError, OSError) as exc:
            self.revoked.append(rule)
            self.notify(f"Could not put it back: {exc}", severity="error")
            return
        self._say(
            f"Rule restored: {rule.kind} {short(rule.pattern, 40)}, back in"
            f" {_home_relative(rule.path)}."
        )
        self.action_reload()
        if rule in self.shown:  # highlighted where it stood before it was revoked
            self.query_one(OptionList).highlighted = self.shown.index(rule)
        self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "undo":
            return bool(self.revoked)  # shown (and working) once something was revoked
        return True

    def action_close(self) -> None:
        search = self.query_one("#permissions-search", Input)
        if self.focused is search:
            # Esc in the filter leaves the filter (kept) for the list; a second Esc closes
            # (it closed the whole screen at once: a new-user trial).
            self.query_one(OptionList).focus()
            return
        self.dismiss(None)
