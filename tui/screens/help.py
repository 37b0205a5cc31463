"""Help: every key binding of the app, the main screen and the inline prompts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

KEY_NAMES = {
    "question_mark": "?",
    "slash": "/",
    "escape": "esc",
    "right_square_bracket": "]",
    "left_square_bracket": "[",
    "space": "space",
}


def key_name(keys: str) -> str:
    """Keys as a person types them: ``right_square_bracket`` → ``]``, ``enter,space`` →
    ``enter / space``."""
    return " / ".join(KEY_NAMES.get(key, key) for key in keys.split(","))


def _rows(bindings: list[BindingType]) -> list[tuple[str, str]]:
    rows = []
    for binding in bindings:
        if isinstance(binding, Binding):
            what = binding.tooltip or binding.description or binding.action
            if (key_name(binding.key), what) not in rows:  # one key, two actions alike (R)
                rows.append((key_name(binding.key), what))
        elif isinstance(binding, tuple):
            rows.append((key_name(binding[0]), binding[2] if len(binding) > 2 else binding[1]))
    return rows


def _composer_rows() -> list[tuple[str, str]]:
    from tui.widgets.composer import Composer

    return [
        ("enter", "Send (queued while the job's run works)"),
        ("ctrl+j / \\ enter", "New line (shift+enter, alt+enter: if the terminal tells)"),
        ("↑ / ↓", "Earlier prompts (at the first / last line)"),
        ("↑ on an empty box", "Take the last queued message back to edit"),
        ("/", "The command menu (the commands below; Tab or Enter completes)"),
        ("@", "Attach a workspace file (fuzzy; Tab or Enter takes it)"),
        ("//text", "Send a message that starts with /"),
        ("ctrl+u / ctrl+k", "Delete to the start / end of the typed line"),
        ("ctrl+a / ctrl+e", "To the start / end of the typed line (home / end: of the row)"),
        *_rows(Composer.BINDINGS),
    ]


def _command_rows() -> list[tuple[str, str]]:
    """Each built-in command with what it does: the help named them only (a new-user trial
    looked here for what /compact and /context do)."""
    from tui.widgets.composer import SLASH_COMMANDS

    # Capitalised as the keys' rows are (the menu beside the box shows them in lower case).
    return [
        (f"/{c.name} {c.argument}".strip(), c.help[:1].upper() + c.help[1:]) for c in SLASH_COMMANDS
    ]


def _search_rows() -> list[tuple[str, str]]:
    from tui.widgets.search_results import SearchResults

    return [
        ("type", "The hits show as you type (from 2 characters)"),
        ("↓ in the field", "Into the hits shown"),
        ("enter in the field", "Search now (even 1 character), into the hits"),
        *((f"{key} on a hit", what) for key, what in _rows(SearchResults.BINDINGS)),
        ("↑ on the first hit", "Back to the field, the words kept"),
        ("esc", "Close the search"),
    ]


def help_sections() -> list[tuple[str, list[tuple[str, str]]]]:
    from tui.bindings import APP_BINDINGS
    from tui.screens.inbox import InboxScreen
    from tui.screens.main import MainScreen
    from tui.screens.permissions import PermissionsScreen
    from tui.screens.report import ReportScreen
    from tui.widgets.approval_prompt import ApprovalPrompt
    from tui.widgets.conversation import Conversation
    from tui.widgets.elicitation_form import ElicitationForm
    from tui.widgets.job_tree import JobTree
    from tui.widgets.tool_call_view import ToolCallView

    return [
        ("Everywhere", [*_rows(APP_BINDINGS), ("ctrl+p", "Command palette")]),
        (
            "Main screen (letters only where no text is typed: browser, conversation)",
            _rows(MainScreen.BINDINGS),
        ),
        ("Composer", _composer_rows()),
        ("Commands (typed in the composer)", _command_rows()),
        ("Approval prompt", _rows(ApprovalPrompt.BINDINGS)),
        (
            "Question prompt",
            [
                ("type, enter", "The answer field has focus: type and send"),
                ("1–9, enter", "Choose an option (its number alone; at once if no field)"),
                ("esc", "Leave the prompt (the run keeps waiting)"),
            ],
        ),
        (
            "Form",
            [
                *_rows(ElicitationForm.BINDINGS),
                ("enter", "Submit (in a text field); open a drop-down, take its choice"),
                ("↑ ↓ / space", "Move in a list of choices / tick or untick one"),
            ],
        ),
        ("Tool call", _rows(ToolCallView.BINDINGS)),
        (
            "Conversation",
            [
                ("home / end", "Top / bottom of what is loaded; there, the next page"),
                *_rows(Conversation.BINDINGS),
            ],
        ),
        (
            "Browser",
            [
                ("enter", "Open (on a checkpoint: that step, marked)"),
                ("space", "Expand / collapse"),
                ("↑ ↓", "Move"),
                *_rows(JobTree.BINDINGS),
            ],
        ),
        ("Search (/)", _search_rows()),
        ("Inbox (i)", [("enter", "Open the run that waits"), *_rows(InboxScreen.BINDINGS)]),
        ("Permissions (/permissions)", _rows(PermissionsScreen.BINDINGS)),
        (
            "Report (/context)",
            [
                # Three rows: on one, the keys were longer than KEY_WIDTH, and cut.
                ("↑ ↓", "Scroll"),
                ("pgup / pgdn", "A page up / down (space: down too)"),
                ("home / end", "Top / bottom"),
                *_rows(ReportScreen.BINDINGS),
            ],
        ),
    ]


KEY_WIDTH = 24
"""The keys' column, its two spaces of indent included: a key longer is cut (``…``)."""


def _grid(rows: list[tuple[str, str]]) -> Table:
    """Keys and what they do in two columns: a long description wraps within its own column
    (as plain text it wrapped back under the keys)."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column(width=KEY_WIDTH, no_wrap=True)
    grid.add_column(ratio=1)
    for key, what in rows:
        grid.add_row(Text("  " + key), Text(what))
    return grid


class HelpScreen(ModalScreen[None]):
    CSS_PATH = "help.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,f1,question_mark", "close", "Close help")
    ]

    def __init__(self, workspace_commands: Sequence[tuple[str, str]] = ()) -> None:
        """``workspace_commands``: this workspace's skills, custom commands and MCP prompts
        (``/name ARGS``, what it does), listed after the keys."""
        super().__init__()
        self.workspace_commands = list(workspace_commands)

    def compose(self) -> ComposeResult:
        sections = help_sections()
        if self.workspace_commands:
            sections.append(("This workspace's commands", self.workspace_commands))
        with Vertical(id="help-box"):
            yield Static("Keys", id="help-title")
            with VerticalScroll(id="help-body"):
                for title, rows in sections:
                    yield Static(title, classes="help-section")
                    yield Static(_grid(rows), classes="help-rows")
            yield Static("Esc to close", id="help-keys")
        # Its own keys at the bottom: the main screen's footer showed through the overlay with
        # keys that do not work here (esc Interrupt, n New job while Esc closes the help).
        from tui.widgets.key_footer import KeyFooter

        yield KeyFooter()

    def action_close(self) -> None:
        self.dismiss(None)
