"""The composer: a multi-line message box on Textual's ``TextArea``.

Enter sends; ctrl+J, or ``\\`` then Enter, inserts a newline in any terminal (shift+Enter and
alt+Enter too where the terminal reports them); a paste keeps every line. The
box grows with its text up to a bounded height, then scrolls. Up on the first row on screen and
Down on the last one walk through earlier prompts (elsewhere they move a row, in a wrapped line
too). ``/`` at the start opens the command menu and ``@`` the file picker; Tab or Enter takes
the highlighted entry. The menu shows over the box in the
rows the screen leaves it, and scrolls: the line being typed stays in view.

The composer addresses one target: the job on screen (a follow-up) or a new job. Messages sent
while that job's run still works wait in its queue, shown above the box; Up on an empty box takes
the last queued message back for editing. The composer only posts messages; the screen acts.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import ClassVar, Unpack

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.message import Message as TextualMessage
from textual.reactive import reactive
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import OptionList, Static, TextArea
from textual.widgets.option_list import Option
from textual.widgets.text_area import Selection

from runtime.drafts import draft_revision
from runtime.textsafe import terminal_safe_line, terminal_safe_title
from tui.widgets._format import short
from tui.widgets._options import WidgetOptions
from tui.widgets.ordered_keys import run_own_binding

MAX_LINES = 10
"""The box grows up to this many lines of text, then scrolls."""

MENU_ROWS = 12
"""The / and @ menu shows up to this many rows, fewer when the screen has less room."""

MENU_MIN_ROWS = 3
"""Rows the open menu keeps even over a tall message: the box gives them up and scrolls."""

RESOURCES_ASKED = "asking the MCP servers for their resources…"
"""The @-picker's last row while the servers' resources are being listed."""

DRAFT_SAVE_DELAY = 0.5
"""Seconds of quiet after the last edit before the draft is saved."""


@dataclass(frozen=True)
class SlashCommand:
    name: str
    argument: str
    help: str


SLASH_COMMANDS: tuple[SlashCommand, ...] = (
    SlashCommand("help", "", "every key and command"),
    SlashCommand("new", "[TASK]", "start a new job (with TASK, or type it next)"),
    SlashCommand("model", "MODEL", "the model of the next run in this job"),
    SlashCommand("agent", "NAME", "the agent of the next run in this job"),
    SlashCommand("retry", "", "retry the run on screen from its last checkpoint"),
    SlashCommand("fork", "[MESSAGE]", "fork a new job from the checkpoint on screen, with MESSAGE"),
    SlashCommand("export", "", "write this job as Markdown into .agent-tui/exports/"),
    SlashCommand("theme", "[NAME]", "switch the theme (no name: choose from a list)"),
    SlashCommand("permissions", "", "what tools may do here"),
    SlashCommand("compact", "", "summarise this job's history so far (originals are kept)"),
    SlashCommand(
        "rewind",
        "[start]",
        "put back the files this job's agent wrote, as they were at the checkpoint under the"
        " cursor, else (or with start) at the job's start",
    ),
    SlashCommand("context", "", "instructions, skills, commands, hooks and phases in effect"),
    SlashCommand("inbox", "", "every run waiting for your input"),
    SlashCommand("quit", "", "quit agent-tui (running runs stay resumable)"),
)


def parse_command(text: str) -> tuple[str, str] | None:
    """``/name argument`` → (name, argument); None when ``text`` is a message (``//x`` sends
    ``/x`` as a message, and so does text starting with a path such as ``/etc/hosts``)."""
    stripped = text.strip()
    if not stripped.startswith("/") or stripped.startswith("//"):
        return None
    head, _, rest = stripped[1:].partition(" ")
    if "\n" in head:
        head, _, more = head.partition("\n")
        rest = (more + " " + rest).strip()
    if "/" in head:
        # A path (``/etc/hosts is odd…``, pasted): no command's name has a slash in it
        # (custom commands in folders are ``folder:name``). It was refused as an unknown
        # command (a new-user trial).
        return None
    # ``/server:prompt`` keeps its case (MCP names are case-sensitive); built-ins do not care.
    return (head if ":" in head else head.lower()), rest.strip()


def _needs_argument(hint: str) -> bool:
    """Whether a command's argument hint (``TOPIC [TONE]``, ``[TASK]``) names an argument that
    must be given: a part outside square brackets."""
    return bool(re.sub(r"\[[^\]]*\]", "", hint).strip())


CommandSource = Callable[[], Iterable[SlashCommand]]
"""A provider of more slash commands for the menu (MCP prompts, custom commands): called each
time the menu is drawn, so what it returns may change (a server that comes up later)."""


def command_matches(
    prefix: str, commands: Iterable[SlashCommand] = SLASH_COMMANDS
) -> list[SlashCommand]:
    prefix = prefix.lower()
    return [command for command in commands if command.name.lower().startswith(prefix)]


def _naming_a_command(text: str) -> bool:
    """The box holds a command's name being typed: ``/`` and no space yet. Once a space follows
    the name its arguments are typed, and the menu closes (a completed ``/model `` reopened it
    on "no command starts with /model": a new-user trial)."""
    return (
        text.startswith("/")
        and not text.startswith("//")
        and not any(char.isspace() for char in text)
    )


PLACEHOLDERS = (
    "Describe a task · Enter send · ctrl+J newline · / commands · @ files",
    "Enter send · ctrl+J newline · / commands · @ files",
    "Enter send · ctrl+J newline · / commands",
    "Enter send · ctrl+J newline",
    "Enter send",
)
"""The empty box's hint, longest first: the longest that fits the box is shown (a trial found
the full one cut at "shift+Enter" at 80 columns, and at "· @" at 120). Whole phrases give way,
the keys last: the box says it takes a task by being there (and the empty conversation says it
in words), but nothing else shows how to start a new line; at 80 columns the hint that fitted
had left out "Enter send · ctrl+J newline" (a new-user trial). ctrl+J, not shift+Enter: most
terminals send shift+Enter as a plain Enter, which sends."""


def merge_texts(carried: str, draft: str) -> str:
    """Text carried by ctrl+t to a target, with that target's own saved ``draft`` under it (a
    blank line between), unless the text holds it already."""
    if not draft.strip() or draft.strip() in carried:
        return carried
    return f"{carried.rstrip()}\n\n{draft}" if carried.strip() else draft


def placeholder_for(width: int) -> str:
    return next((text for text in PLACEHOLDERS if len(text) <= width), PLACEHOLDERS[-1])


class ComposerInput(TextArea):
    """The text box. Keys that would insert or move are the TextArea's own, except these."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("shift+enter,ctrl+j,alt+enter", "newline", "Newline", show=False),
        # As ctrl+u and ctrl+k: the typed line's start and end (readline's); Home and End keep
        # the row soft wrapping made.
        Binding("ctrl+a", "cursor_typed_line_start", "Line start", show=False),
        Binding("ctrl+e", "cursor_typed_line_end", "Line end", show=False),
    ]

    class SendRequested(TextualMessage):
        pass

    def __init__(self, **kwargs: Unpack[WidgetOptions]) -> None:
        super().__init__(
            soft_wrap=True,
            tab_behavior="focus",
            show_line_numbers=False,
            highlight_cursor_line=False,
            compact=True,
            placeholder=PLACEHOLDERS[0],
            **kwargs,
        )

    def undo(self) -> None:
        self._at_the_start_then(super().undo, bool(self.history.undo_stack))

    def redo(self) -> None:
        self._at_the_start_then(super().redo, bool(self.history.redo_stack))

    def _at_the_start_then(self, change: Callable[[], None], changes: bool) -> None:
        """Undo or redo with the cursor moved first to the text's start, which every text
        has. Textual lays the box out again (its scrollbar comes or goes) before it puts the
        cursor back; the cursor left at the end of a long paste undone was past the end of
        the text, and the app quit with "ValueError: The document line index 1 is out of
        bounds" (a new-user trial: thirty lines pasted, then ctrl+z). The cursor then goes
        where the edit undone or redone had it."""
        if changes:
            self.selection = Selection.cursor((0, 0))
        change()

    def on_resize(self) -> None:
        placeholder = placeholder_for(self.content_size.width)
        if placeholder != self.placeholder:
            self.placeholder = placeholder

    @property
    def value(self) -> str:
        """The text (``Input``'s name for it, so callers need not know the widget)."""
        return self.text

    @value.setter
    def value(self, text: str) -> None:
        self.load_text(text)
        self.move_cursor(self.document.end)

    @property
    def composer(self) -> Composer | None:
        node = self.parent
        while node is not None and not isinstance(node, Composer):
            node = node.parent
        return node

    async def _on_key(self, event: events.Key) -> None:
        composer = self.composer
        if composer is None:
            return
        composer.put_back = False  # the person works in the box now
        if event.character == "?" and not self.text:
            # As in Claude Code: "?" in an empty box lists the keys (the first screen says so).
            event.stop()
            event.prevent_default()
            await self.app.run_action("help")
            return
        handled = composer.box_key(event.key)
        if handled:
            event.stop()
            event.prevent_default()
        else:
            await run_own_binding(self, event)

    def action_newline(self) -> None:
        start, end = self.selection
        self._replace_via_keyboard("\n", start, end)

    def action_cursor_typed_line_start(self) -> None:
        row, _ = self.cursor_location
        self.move_cursor((row, 0))

    def action_cursor_typed_line_end(self) -> None:
        row, _ = self.cursor_location
        self.move_cursor((row, len(self.document[row])))

    # ctrl+u and ctrl+k act on the line as typed, back to the previous newline and on to the
    # next, as in readline and Claude Code; TextArea's own act on the row soft wrapping made (a
    # new-user trial's long prompt lost only its last row to ctrl+u).
    def action_delete_to_start_of_line(self) -> None:
        row, column = self.selection.end
        if column == 0:  # at a line's start, TextArea's own: the selection, or join the lines
            super().action_delete_to_start_of_line()
        elif not self.read_only:
            self.delete(self.selection.end, (row, 0), maintain_selection_offset=False)

    def action_delete_to_end_of_line(self) -> None:
        if not self.read_only:
            row, _ = self.selection.end
            end = (row, len(self.document[row]))
            self.delete(self.selection.end, end, maintain_selection_offset=False)

    async def action_delete_to_end_of_line_or_delete_line(self) -> None:
        """To the typed line's end; at its end the next line joins it; an empty line goes."""
        row, column = self.selection.end
        line_length = len(self.document[row])
        if line_length == 0:
            action = "delete_line"
        elif self.selection.is_empty and column == line_length:
            action = "delete_right"
        else:
            action = "delete_to_end_of_line"
        await self.run_action(action)

    async def _on_paste(self, event: events.Paste) -> None:
        composer = self.composer
        if composer is not None:
            composer.put_back = False  # TextArea's own handler inserts it, after this one


class Composer(Vertical):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+t", "toggle_mode", "New job / follow-up", show=False),
    ]

    DEFAULT_CSS = f"""
    Composer {{ height: auto; border: round $primary; padding: 0 1; background: $surface; }}
    Composer:focus-within {{ border: round $accent; }}
    Composer #mode {{ color: $text-muted; }}
    Composer #mode.-follow-up {{ color: $accent; text-style: bold; }}
    Composer #queue {{ height: auto; color: $text-muted; display: none; }}
    Composer #queue.-queued {{ display: block; }}
    Composer #completions {{ height: auto; max-height: {MENU_ROWS}; border: none; padding: 0;
                             background: $panel; display: none; }}
    Composer #completions.-completing {{ display: block; }}
    Composer #error {{ height: auto; color: $text-error; display: none; }}
    Composer #error.-shown {{ display: block; }}
    Composer ComposerInput, Composer ComposerInput:focus {{
        height: auto; min-height: 1; max-height: {MAX_LINES}; border: none; padding: 0;
        background: $surface;
    }}
    """

    follow_up_job_id: reactive[str | None] = reactive(None)
    """Set: the next message continues this job. None: it starts a new job."""

    class Submitted(TextualMessage):
        """``after_command``: sent while a command sent before it was still out (the screen
        had not finished with it): it goes where the box addresses once that command has run
        (``/new``, Enter, the task, Enter in one burst: the new job), not where it addressed
        at this Enter."""

        def __init__(
            self, text: str, follow_up_job_id: str | None, *, after_command: bool = False
        ) -> None:
            super().__init__()
            self.text = text
            self.follow_up_job_id = follow_up_job_id
            self.after_command = after_command

    class CommandSubmitted(TextualMessage):
        """``typed``: the command as it was in the box, taken out at Enter; the screen hands
        it back to ``command_done`` when it has finished with the command."""

        def __init__(
            self, name: str, argument: str, follow_up_job_id: str | None, *, typed: str = ""
        ) -> None:
            super().__init__()
            self.name = name
            self.argument = argument
            self.follow_up_job_id = follow_up_job_id
            self.typed = typed

    class EmptyEnter(TextualMessage):
        """Enter in an empty box: nothing to send (a prompt waiting over the box docks)."""

    class DraftChanged(TextualMessage):
        """The unsent text of a target changed (posted after a quiet moment, or at once when
        the target changes). ``merge``: the target's saved draft was never put in the box
        (text carried there by ctrl+t, its draft still being read): it is kept under ``text``
        (``merge_texts``), not saved over. ``revision``: taken now, as the text is taken from
        the box, so a save of it landing after a later one's keeps the later text."""

        def __init__(self, job_id: str | None, text: str, *, merge: bool = False) -> None:
            super().__init__()
            self.job_id = job_id
            self.text = text
            self.merge = merge
            self.revision = draft_revision()

    class DraftWanted(TextualMessage):
        """The box addresses ``job_id`` now, empty: its saved draft goes in, if it has one
        (the screen reads it from the store). ``carried``: the box holds text carried from
        the other target; the saved draft goes in under it (``merge_draft``)."""

        def __init__(self, job_id: str | None, *, carried: bool = False) -> None:
            super().__init__()
            self.job_id = job_id
            self.carried = carried

    class FilesWanted(TextualMessage):
        """The @-picker needs the files matching ``query`` ranked."""

        def __init__(self, query: str, files: list[str]) -> None:
            super().__init__()
            self.query = query
            self.files = files

    class QueueChanged(TextualMessage):
        """The messages queued for ``job_id`` changed (the screen keeps them in the store)."""

        def __init__(self, job_id: str) -> None:
            super().__init__()
            self.job_id = job_id

    def __init__(self, **kwargs: Unpack[WidgetOptions]) -> None:
        super().__init__(**kwargs)
        self.selected_job_id: str | None = None
        self.selected_job_title: str = ""
        self.target_title: str = ""
        self.typed_ahead_for_job = False
        """Launched to open a job, which the box does not address yet: what is typed meanwhile
        is for that job (``--continue``, then "yes please" at once), and goes to it as the box
        is first addressed. Any other address first (ctrl+t, ``/new``), or the new job's draft
        coming back, and it stays the new job's."""
        self.queues: dict[str, list[str]] = {}
        """Messages waiting for the job's run to finish, oldest first."""
        self._cursor_to_show = False
        """The box was given fewer rows: once a layout has given them, the line with the
        cursor is scrolled into view (``_fit_to_room``)."""
        self.history: list[str] = []
        """Earlier prompts, oldest first."""
        self._commands_out: list[str] = []
        """Commands taken out of the box at Enter that the screen has not finished with yet
        (``command_done``), as typed."""
        self._history_index: int | None = None
        self._history_stash = ""
        self._recalled: str | None = None
        """The text ↑ or ↓ put in the box, while it is there unchanged."""
        self.next_run: dict[str | None, dict[str, str]] = {}
        """``/model`` and ``/agent`` choices for the next run of a job (None: a new job)."""
        self.command_sources: list[CommandSource] = []
        """More slash commands than the built-in ones (see ``CommandSource``)."""
        self.file_source: Callable[[], list[str] | None] = lambda: None
        """The workspace's files for the @-picker (None while they are being listed)."""
        self._menu_commands: dict[str, SlashCommand] = {}
        """The commands the open menu offers, by name."""
        self._mention_query: str | None = None
        self._completion: str | None = None
        """"slash" or "mention" while the menu is open."""
        self._mention_start: tuple[int, int] | None = None
        self._save_timer: Timer | None = None
        self._merging: str | bool | None = False
        """The target text was carried to, while its saved draft is read (``merge_draft``);
        False when none is."""
        self._merged: tuple[str | None, str] | None = None
        """The target and its own draft, as ``merge_draft`` put it under the carried text: a
        carry away from that target leaves it there (``_leave_merged``)."""
        self._merge_on_save: str | bool | None = False
        """The target whose draft's read failed: its next save keeps that draft under the
        box's text (``merge_failed``); False when none."""
        self._draft_key: str | None = None
        self._mode_shown = ""
        """What the mode line shows (set as it is composed)."""
        self._loading_draft = False
        self._error_for = ""
        """What the box held when the error line was shown: it goes when that changes."""
        self.put_back = False
        """What the box holds was put there by the app and no key was typed in it since (see
        ``mark_put_back``): a prompt that comes then takes the keys."""

    def compose(self) -> ComposeResult:
        self._mode_shown = self._mode_text()
        yield Static(self._mode_shown, id="mode", markup=False, classes=self._mode_class())
        yield Static("", id="queue", markup=False)
        # Plain options: what was typed is quoted ("no command starts with /[slug]" read
        # "/"; "/[/]" raised MarkupError).
        completions = OptionList(id="completions", markup=False)
        completions.can_focus = False
        yield completions
        yield ComposerInput(id="composer-input")
        # Under the line typed, what was wrong with it (an unknown command): a toast at the
        # top right was missed by a new-user trial, whose eyes were on the box.
        yield Static("", id="error", markup=False)

    def on_mount(self) -> None:
        # The room changes with what is around the composer too (the terminal's size, a line
        # docked over the box), which resizes no part of it: every layout of the screen asks.
        self.screen.screen_layout_refresh_signal.subscribe(self, self._screen_laid_out)

    # --- fitting the room -----------------------------------------------------------------------
    def _screen_laid_out(self, _screen: object) -> None:
        self._fit_to_room()

    def _room(self) -> int | None:
        """Rows for what the composer holds (inside its border): as many as its container may
        take (the main screen caps its bottom pane at a share of the pane above it), less the
        container's other lines (a prompt that waits, a question docked over the box). None
        while that is not known."""
        container = self.parent
        if not isinstance(container, Widget) or not isinstance(container.parent, Widget):
            return None
        above = container.parent.content_size
        if not above.height:
            return None
        limit = above.height
        if container.styles.max_height is not None:
            limit = min(limit, int(container.styles.max_height.resolve(above, self.screen.size)))
        others = sum(
            child.outer_size.height for child in container.displayed_children if child is not self
        )
        return limit - container.styles.gutter.height - others - self.styles.gutter.height

    def _fit_to_room(self) -> None:
        """Keep the line being typed on screen: the open menu takes the rows the box and the
        lines over it leave (at least ``MENU_MIN_ROWS``: the box gives them up and scrolls),
        and scrolls itself. A trial at 80x24 found the menu's 12 rows pushing the box under
        the status line."""
        if not self.is_mounted or not self.display:
            return
        room = self._room()
        if room is None:
            return
        menu = self.query_one("#completions", OptionList)
        box = self.input
        lines = sum(
            child.outer_size.height
            for child in self.displayed_children
            if child is not menu and child is not box
        )
        free = room - lines
        typed = min(max(box.wrapped_document.height, 1), MAX_LINES)
        menu_rows = 0
        if self._completion is not None:
            menu_max = max(0, min(MENU_ROWS, max(free - typed, MENU_MIN_ROWS), free - 1))
            self._set_max_height(menu, menu_max)
            width = self.content_size.width
            wanted = menu.get_content_height(self.content_size, self.screen.size, width)
            menu_rows = min(menu_max, wanted)
        box_max = max(1, min(MAX_LINES, free - menu_rows))
        if self._set_max_height(box, box_max):
            # Fewer rows: the line with the cursor stays in view.
            box.call_after_refresh(box.scroll_cursor_visible)
            self._cursor_to_show = True
        elif self._cursor_to_show:
            # Laid out at its new height now: the scroll above may have come before the layout
            # that gave it (under load the box kept its cursor under the menu).
            self._cursor_to_show = False
            box.scroll_cursor_visible()

    @staticmethod
    def _set_max_height(widget: Widget, rows: int) -> bool:
        """Whether it changed (an unchanged value lays nothing out again)."""
        current = widget.styles.max_height
        if current is not None and current.is_cells and current.value == rows:
            return False
        widget.styles.max_height = rows
        return True

    # --- target and mode ------------------------------------------------------------------------
    def _mode_text(self) -> str:
        choices = self.next_run.get(self.follow_up_job_id, {})
        extra = "".join(f" · next run: {key} {value}" for key, value in sorted(choices.items()))
        if self.follow_up_job_id is None:
            return "✚ New job" + extra + "  (/ commands · @ files)"
        title = short(terminal_safe_title(self.target_title), 44)
        return f"↪ Follow-up in: {title}{extra}  (ctrl+t or /new: new job)"

    def _mode_class(self) -> str:
        # States are classes of the line they style, not of the composer: a class of the
        # composer restyles all it holds (the text area's parts too), 2.3 ms against 0.6 ms
        # for the line, each time a new job became the target or the menu opened.
        return "-follow-up" if self.follow_up_job_id is not None else ""

    def watch_follow_up_job_id(self, old: str | None, new: str | None) -> None:
        self._refresh_mode()
        self._refresh_queue()

    def _refresh_mode(self) -> None:
        if self.is_mounted:
            mode = self.query_one("#mode", Static)
            mode.set_class(self.follow_up_job_id is not None, "-follow-up")
            text = self._mode_text()
            # An update lays the screen out again, whatever the text: the line is asked for
            # three times as a run opens, mostly with the same words.
            if text != self._mode_shown:
                self._mode_shown = text
                mode.update(text)

    def set_selected_job(self, job_id: str | None, title: str) -> None:
        """The browser's selection; a follow-up goes to it when the mode is follow-up."""
        self.selected_job_id = job_id
        self.selected_job_title = title
        if job_id is None:
            self.target(None)
        self._refresh_mode()

    def target(self, job_id: str | None, title: str | None = None, *, carry: bool = False) -> None:
        """Address the next message to ``job_id`` (None: a new job); the draft of the old target
        is saved at once and the box emptied for the new one's, which the screen asks for.
        ``carry``: the text in the box goes to the new target instead (it is moved, not copied:
        the old target keeps no draft of it)."""
        self.typed_ahead_for_job = False  # addressed now: what comes next is typed for it
        if title is not None:
            self.target_title = title
        elif job_id is not None and job_id == self.selected_job_id:
            self.target_title = self.selected_job_title
        if job_id is not None:
            self.selected_job_id = job_id
            self.selected_job_title = self.target_title
        if job_id == self.follow_up_job_id and self._draft_key == job_id:
            self._refresh_mode()
            return
        old = self._draft_key
        # The old target's own saved draft, never put in the box (its read for a carry is
        # still under way): it must be neither saved over nor deleted.
        pending = self._merge_pending(old)
        self._merging = False
        left = self._leave_merged(old) if carry else None
        text = self.input.text
        if left is not None:
            # The old target's own draft, as the box held it under what was carried there:
            # its draft again (the rest, if any, goes on).
            self._stop_save_timer()
            self.post_message(self.DraftChanged(old, left))
        elif not carry or not text:
            if pending and text:
                self._stop_save_timer()
                self.post_message(self.DraftChanged(old, text, merge=True))
            else:
                # A save still due goes to the old target now: due later, it went to the new
                # one, and the old kept what the box held before (a sent /fork came back after
                # a relaunch, and forked again: a new-user trial).
                self.flush_draft()
        else:
            self._stop_save_timer()
            if not pending:
                # Moved, not copied: the old target keeps no draft of it.
                self.post_message(self.DraftChanged(old, ""))
        self._merged = None
        self.follow_up_job_id = job_id
        self._draft_key = job_id
        self._history_index = None
        if text and carry:
            self._save_timer = self.set_timer(DRAFT_SAVE_DELAY, self.flush_draft)
        elif text:
            # Kept as the old target's draft: it must not be sent to the new one (a follow-up
            # typed for one job went out as another job's task).
            self._loading_draft = True
            self.clear_text()
        self._refresh_mode()

    def action_toggle_mode(self) -> None:
        """What is being typed changes address: a follow-up becomes a new job's task, or the
        other way round. With nothing typed, the new target's own draft comes back: the box
        stayed empty, and a new job's draft typed before an approval was answered elsewhere
        seemed lost until a relaunch (a new-user trial)."""
        if self.follow_up_job_id is None and self.selected_job_id is not None:
            self.carry_to(self.selected_job_id)
        else:
            self.carry_to(None)

    def carry_to(self, job_id: str | None, title: str | None = None) -> None:
        """Address ``job_id`` with what the box holds (ctrl+t; ``/new`` with text typed after
        its Enter; text typed before the job opened at launch): that target's own saved draft
        comes back, under the text carried."""
        before = self.follow_up_job_id
        self.target(job_id, title, carry=True)
        carried = bool(self.input.text)
        if self.follow_up_job_id != before:
            if carried:
                # The new target's own draft must not be saved over (a trial's new-job draft
                # was gone for good after a follow-up was carried there): no save until it
                # is read and put under what was carried.
                self._merging = self.follow_up_job_id
                self._stop_save_timer()
            self.post_message(self.DraftWanted(self.follow_up_job_id, carried=carried))

    def _stop_save_timer(self) -> None:
        if self._save_timer is not None:
            self._save_timer.stop()
            self._save_timer = None

    def _merge_pending(self, job_id: str | None) -> bool:
        return self._merging is not False and self._merging == job_id

    @property
    def merge_pending(self) -> bool:
        """Text was carried to the current target and its saved draft is not in the box yet
        (being read): a save now must keep that draft under the box's text."""
        return self._merge_pending(self.follow_up_job_id)

    def _leave_merged(self, job_id: str | None) -> str | None:
        """Text carried away from ``job_id`` by ctrl+t: the part of the box that is that
        target's own draft, put under carried text by ``merge_draft`` and still there
        unchanged, stays behind; the rest goes on. Returns the part left (None: none is).

        ctrl+t to a new job with a draft of its own, then ctrl+t back: the new job's draft went
        into the follow-up with what was carried, to be sent there by Enter (a trial)."""
        if self._merged is None or self._merged[0] != job_id:
            return None
        draft = self._merged[1]
        box = self.input
        text = box.text
        at = text.rfind(draft)
        if not draft.strip() or at < 0:
            return None  # edited since: all of it is the person's now, and goes
        before, after = text[:at].rstrip(), text[at + len(draft) :].strip("\n")
        rest = f"{before}\n\n{after}" if before and after.strip() else before or after
        cursor = box.cursor_location
        box.value = rest
        box.move_cursor(cursor)  # clamped to the text left
        return draft

    def merge_draft(self, job_id: str | None, draft: str) -> str | None:
        """The saved draft of the target text was carried to goes in under that text (a blank
        line between); None when the box moved on meanwhile, else what the box now holds (the
        screen saves it: the save held back since the carry)."""
        if not self._merge_pending(job_id) or self.follow_up_job_id != job_id:
            return None
        self._merging = False
        self._put_under(job_id, draft)
        return self.input.text

    def _put_under(self, job_id: str | None, draft: str) -> None:
        box = self.input
        text = box.text
        merged = merge_texts(text, draft)
        if merged != text:
            cursor = box.cursor_location
            box.value = merged
            box.move_cursor(cursor)
            self._merged = (job_id, draft)

    def merged_in_store(self, job_id: str | None, text: str, draft: str) -> None:
        """``text`` was saved as ``job_id``'s draft with ``draft`` (that target's own, never in
        the box) under it (``DraftChanged.merge``): the box shows it too, if it still holds
        ``text`` for that target (the next save, of the box, would drop it from the store)."""
        if self.follow_up_job_id == job_id and not self.merge_pending and self.input.text == text:
            self._put_under(job_id, draft)

    def merge_failed(self, job_id: str | None) -> None:
        """The read of ``job_id``'s saved draft for a carry failed (the store busy, an error):
        saves go on (they were held back, and the box's text was saved nowhere), the next one
        keeping that draft under the text in the store."""
        if not self._merge_pending(job_id):
            return
        self._merging = False
        self._merge_on_save = job_id
        self._draft_key = job_id
        self._stop_save_timer()
        if self.is_mounted:
            self._save_timer = self.set_timer(DRAFT_SAVE_DELAY, self.flush_draft)

    def choose_next(self, key: str, value: str) -> None:
        """``/model`` or ``/agent``: what the next run of the current target uses."""
        self.next_run.setdefault(self.follow_up_job_id, {})[key] = value
        self._refresh_mode()

    def take_next_run(self, job_id: str | None) -> dict[str, str]:
        choices = self.next_run.pop(job_id, {})
        self._refresh_mode()
        return choices

    # --- the text box ---------------------------------------------------------------------------
    @property
    def input(self) -> ComposerInput:
        return self.query_one("#composer-input", ComposerInput)

    def focus_input(self) -> None:
        self.input.focus()

    def restore_draft(self, job_id: str | None, text: str) -> bool:
        """Put a saved draft back, unless the person has started typing here meanwhile; whether
        it was put back."""
        if job_id != self.follow_up_job_id or self.input.text or not text:
            return False
        self.typed_ahead_for_job = False  # typed on after the draft: for the new job, with it
        self._loading_draft = True
        self.input.value = text
        self.mark_put_back()
        return True

    def mark_put_back(self) -> None:
        """What the box holds was put there by the app (a draft restored, a message kept
        while a prompt was answered, queued messages given back), not typed just now: until a
        key is typed in the box, a prompt that comes takes the keys (``put_back``)."""
        self.put_back = bool(self.input.text.strip())

    def flush_draft(self) -> None:
        if self._merging is not False:
            return  # the target's saved draft is being read: saved with it (``merge_draft``)
        if self._save_timer is not None:
            self._save_timer.stop()
            self._save_timer = None
            key = self._draft_key
            merge = self._merge_on_save is not False and self._merge_on_save == key
            self._merge_on_save = False
            self.post_message(self.DraftChanged(key, self.input.text, merge=merge))

    def clear_text(self) -> None:
        self.input.value = ""

    def show_error(self, text: str) -> None:
        """Say under the box what is wrong with what it holds, until the text changes."""
        error = self.query_one("#error", Static)
        error.update(text)
        error.add_class("-shown")
        self._error_for = self.input.text

    @property
    def error(self) -> str:
        """What the error line under the box says ("" when it is hidden)."""
        error = self.query_one("#error", Static)
        return str(error.render()) if error.has_class("-shown") else ""

    def on_text_area_changed(self, event: TextArea.Changed) -> None:
        event.stop()
        error = self.query_one("#error", Static)
        # A change still to come when the error was shown (a command given back) keeps it.
        if error.has_class("-shown") and self.input.text != self._error_for:
            error.remove_class("-shown")
        self._update_completion()
        if self._loading_draft:
            self._loading_draft = False
            return
        self._draft_key = self.follow_up_job_id
        if self._save_timer is not None:
            self._save_timer.stop()
        self._save_timer = self.set_timer(DRAFT_SAVE_DELAY, self.flush_draft)

    def box_key(self, key: str) -> bool:
        """A key pressed in the box; True when the composer used it (the box must not)."""
        box = self.input
        if key in ("enter", "tab", "up", "down", "escape"):
            # The menu follows the text through Changed messages, which may lag keys typed fast
            # (a terminal sending a burst): decide from the text as it is now.
            self._sync_completion()
        if self._completion is not None:
            menu = self.query_one("#completions", OptionList)
            if key in ("up", "down"):
                count = menu.option_count
                if count:
                    current = menu.highlighted if menu.highlighted is not None else 0
                    menu.highlighted = (current + (1 if key == "down" else -1)) % count
                return True
            if key == "tab" or (key == "enter" and self._completion == "mention"):
                self._accept_completion()
                return True
            if (
                key == "enter"
                and self._completion == "slash"
                and self._accept_completion(send_if_complete=True)
            ):
                return True
            if key == "escape":
                self._close_completion()
                return True
        if key == "enter":
            if self._backslash_newline():
                return True
            self._send()
            return True
        if key == "up" and self._on_first_row():
            if not box.text and self.follow_up_job_id in self.queues:
                self._edit_last_queued()
                return True
            return self._recall(-1)
        if key == "down" and self._on_last_row() and self._history_index is not None:
            return self._recall(1)
        return False

    def _on_first_row(self) -> bool:
        """Whether the cursor is on the box's first row on screen: ↑ there walks the history,
        elsewhere it moves up a row. A line wrapped over three rows, cursor at its end: ↑ put
        an earlier prompt in place of the text (a new-user trial). A prompt just recalled
        counts its whole first line (the cursor is put at its end): ↑ goes on to older ones."""
        box = self.input
        row, _ = box.cursor_location
        if self._recalled is not None and box.text == self._recalled:
            return row == 0
        return box.wrapped_document.location_to_offset(box.cursor_location).y == 0

    def _on_last_row(self) -> bool:
        """Whether the cursor is on the box's last row on screen: ↓ there walks the history."""
        box = self.input
        last = box.wrapped_document.height - 1
        return box.wrapped_document.location_to_offset(box.cursor_location).y >= last

    def _backslash_newline(self) -> bool:
        """``\\`` then Enter: the backslash becomes a new line (Claude Code's way, and the one
        that works in every terminal: most send alt+Enter and shift+Enter as a plain Enter,
        which Textual cannot tell apart; only ctrl+J always arrives as itself)."""
        box = self.input
        start, end = box.selection
        row, column = end
        if start != end or column == 0 or box.document.get_line(row)[column - 1] != "\\":
            return False
        box.replace("\n", (row, column - 1), end)
        return True

    def _recall(self, step: int) -> bool:
        if not self.history:
            return False
        if self._history_index is None:
            if step > 0:
                return False
            self._history_stash = self.input.text
            index = len(self.history) - 1
        else:
            index = self._history_index + step
        if index < 0:
            return True  # already at the oldest
        if index >= len(self.history):
            self._history_index = None
            self.input.value = self._history_stash
            return True
        self._history_index = index
        self._recalled = self.history[index]
        self.input.value = self._recalled
        if step < 0:
            # At the end of its first line: typing adds to it, and ↑ goes on to older ones.
            box = self.input
            box.move_cursor((0, len(box.document.get_line(0))))
        return True

    def _send(self) -> None:
        text = self.input.text
        if not text.strip():
            self.post_message(self.EmptyEnter())
            return
        self._history_index = None
        command = parse_command(text)
        # Out of the box at once, a command too: keys typed right after Enter (a burst) start
        # the next text, rather than join the command (``/newa task``) and go with it.
        self.clear_text()
        if command is not None:
            name, argument = command
            self.remember(text.strip())
            self._close_completion()
            self._commands_out.append(text)
            self.post_message(
                self.CommandSubmitted(name, argument, self.follow_up_job_id, typed=text)
            )
            return
        if text.lstrip().startswith("//"):
            text = text.lstrip()[1:]
        self.remember(text.strip())
        self.post_message(
            self.Submitted(
                text.strip(), self.follow_up_job_id, after_command=bool(self._commands_out)
            )
        )

    def remember(self, text: str) -> None:
        if text and (not self.history or self.history[-1] != text):
            self.history.append(text)

    def command_done(self, typed: str, *, keep_text: bool = False) -> None:
        """The screen has finished with the command ``typed`` (taken out of the box at Enter).
        Failed (``keep_text``), it comes back to be corrected: into the box if nothing was
        typed since, else the box keeps what was (↑ brings the command back)."""
        if typed in self._commands_out:
            self._commands_out.remove(typed)
        if not keep_text:
            self.message_taken()
        elif not self.input.text:
            self._recalled = typed  # as when ↑ brings it back: no menu opens over it
            self.input.value = typed

    def message_taken(self) -> None:
        """The screen took the message (or command): the draft it was is gone now, not at the
        next save. Text typed since its Enter is the draft now: its own save is due."""
        if self.input.text:
            return
        self._draft_key = self.follow_up_job_id
        if self._save_timer is not None:
            self._save_timer.stop()
            self._save_timer = None
        self.post_message(self.DraftChanged(self.follow_up_job_id, ""))

    # --- the queue ------------------------------------------------------------------------------
    def enqueue(self, job_id: str, text: str) -> None:
        self.queues.setdefault(job_id, []).append(text)
        self._refresh_queue()
        self.post_message(self.QueueChanged(job_id))

    def take_queue(self, job_id: str) -> list[str]:
        taken = self.queues.pop(job_id, [])
        self._refresh_queue()
        if taken:
            self.post_message(self.QueueChanged(job_id))
        return taken

    def queued(self, job_id: str | None) -> list[str]:
        return list(self.queues.get(job_id, [])) if job_id is not None else []

    def _edit_last_queued(self) -> None:
        job_id = self.follow_up_job_id
        if job_id is None:
            return
        queue = self.queues.get(job_id, [])
        if not queue:
            return
        text = queue.pop()
        if not queue:
            del self.queues[job_id]
        self.input.value = text
        self._refresh_queue()
        self.post_message(self.QueueChanged(job_id))

    def _refresh_queue(self) -> None:
        if not self.is_mounted:
            return
        queue = self.queued(self.follow_up_job_id)
        self.query_one("#queue", Static).set_class(bool(queue), "-queued")
        lines = [
            f"↳ queued: {short(terminal_safe_line(' '.join(text.split())), 70)}" for text in queue
        ]
        if queue:
            lines.append("   sent when the run finishes · ↑ on an empty box edits or removes")
        self.query_one("#queue", Static).update("\n".join(lines))

    # --- completion: / commands and @ files -----------------------------------------------------
    @property
    def completing(self) -> str | None:
        return self._completion

    def _sync_completion(self) -> None:
        """Close a menu the current text no longer asks for (without re-ranking)."""
        text = self.input.text
        if self._completion == "slash" and not _naming_a_command(text):
            self._update_completion()
        elif self._completion == "mention" and self._mention_at_cursor() is None:
            self._close_completion()
        elif self._completion == "slash":
            self._show_commands(text[1:])

    def _update_completion(self) -> None:
        box = self.input
        text = box.text
        if self._recalled is not None:
            if text == self._recalled:
                # A recalled command opens no menu: ↑ and ↓ go on through the history.
                self._close_completion()
                return
            self._recalled = None
        if _naming_a_command(text):
            self._show_commands(text[1:])
            return
        mention = self._mention_at_cursor()
        if mention is not None:
            self._show_files(*mention)
            return
        self._close_completion()

    def _mention_at_cursor(self) -> tuple[str, tuple[int, int]] | None:
        box = self.input
        row, column = box.cursor_location
        line = box.document.get_line(row)[:column]
        at = line.rfind("@")
        if at < 0:
            return None
        word = line[at + 1 :]
        if any(char.isspace() for char in word):
            return None
        if at > 0 and not line[at - 1].isspace():
            return None
        return word, (row, at)

    def commands(self) -> list[SlashCommand]:
        """The built-in commands, then those of every source."""
        found = list(SLASH_COMMANDS)
        for source in self.command_sources:
            found.extend(source())
        return found

    def refresh_commands(self) -> None:
        """A source has new commands: redraw an open menu."""
        if self._completion == "slash":
            self._show_commands(self.input.text[1:])

    def _show_commands(self, prefix: str) -> None:
        matches = []
        self._menu_commands = {}
        for command in command_matches(prefix, self.commands()):
            if command.name not in self._menu_commands:  # the first of a name wins
                self._menu_commands[command.name] = command
                matches.append(command)
        menu = self.query_one("#completions", OptionList)
        menu.clear_options()
        if not matches:
            menu.add_option(Option(f"no command starts with /{prefix}", disabled=True))
        for command in matches:
            label = Text.assemble(
                (f"/{command.name}", "bold"),
                (f" {command.argument}" if command.argument else "", "italic"),
                ("  " + command.help, "dim"),
            )
            menu.add_option(Option(label, id=command.name))
        menu.highlighted = 0 if matches else None
        self._completion = "slash"
        menu.add_class("-completing")
        self._fit_to_room()

    def _show_files(self, query: str, start: tuple[int, int]) -> None:
        menu = self.query_one("#completions", OptionList)
        files = self.file_source()
        self._mention_start = start
        was_open = self._completion == "mention"
        self._completion = "mention"
        menu.add_class("-completing")
        self._fit_to_room()
        if files is None:
            menu.clear_options()
            menu.add_option(Option("listing the workspace's files…", disabled=True))
            return
        if not was_open:
            menu.clear_options()
            menu.add_option(Option("searching…", disabled=True))
        self._mention_query = query
        self.post_message(self.FilesWanted(query, files))

    def show_file_matches(self, query: str, ranked: list[str], asking: bool = False) -> None:
        """The ranking of ``query`` arrived (ranked off the event loop): show it if the person
        is still typing that mention. ``asking``: the MCP servers' resources are still being
        listed (more may match once they arrive)."""
        if self._completion != "mention" or query != self._mention_query:
            return
        menu = self.query_one("#completions", OptionList)
        menu.clear_options()
        for path in ranked:
            menu.add_option(Option(Text.assemble(("@", "dim"), path), id=path))
        if asking:
            menu.add_option(Option(RESOURCES_ASKED, disabled=True))
        elif not ranked:
            menu.add_option(Option(f"no file matches {query!r}", disabled=True))
        menu.highlighted = 0 if ranked else None
        self._fit_to_room()

    def refresh_files(self) -> None:
        """The file list arrived: redraw an open picker."""
        if self._completion == "mention":
            self._update_completion()

    def _close_completion(self) -> None:
        self._completion = None
        self._mention_start = None
        if self.is_mounted:
            self.query_one("#completions", OptionList).remove_class("-completing")
            self._fit_to_room()

    def _accept_completion(self, *, send_if_complete: bool = False) -> bool:
        menu = self.query_one("#completions", OptionList)
        index = menu.highlighted
        option = menu.get_option_at_index(index) if index is not None else None
        if option is None or option.id is None:
            self._close_completion()
            return False
        box = self.input
        if self._completion == "slash":
            command = self._menu_commands[option.id]
            typed = box.text.strip()[1:]
            self._close_completion()
            needs_argument = _needs_argument(command.argument)
            if send_if_complete and typed.lower() == command.name.lower() and not needs_argument:
                return False  # already complete: Enter sends it
            # An entry that needs an argument is only completed, cursor after the space:
            # Enter sent `/basic:review` on, to be refused for its missing TOPIC.
            box.value = f"/{command.name}" + (" " if command.argument else "")
            return not (send_if_complete and not command.argument)
        start = self._mention_start
        self._close_completion()
        if start is None:
            return False
        row, column = start
        end = box.cursor_location
        box.replace(f"@{option.id} ", (row, column), end)
        return True
