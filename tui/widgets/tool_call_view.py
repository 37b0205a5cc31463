"""A tool call as a compact block: name and arguments, a progress bar while it runs, the result
folded (Enter or space unfolds it). A delegation folds the sub-run it made under it: collapsed
at first, Enter unfolds it (its messages, read from the store when unfolded), ``o`` opens the
sub-run as the conversation; the images of a result (described in it as
``[image: png 640×480, 12 KB]``) are saved and opened with ``o``. A call of a run shown as
context (an earlier run of the job, ``context``): dimmed, as it ended; the diff a write applied
is read and shown only while its result is unfolded."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.css.query import NoMatches
from textual.message import Message as TextualMessage
from textual.widget import Widget
from textual.widgets import Collapsible, ProgressBar, Static
from textual.widgets.collapsible import CollapsibleTitle

from runtime.denials import denial, never_ran
from runtime.kinds import ToolCallState
from runtime.textsafe import terminal_safe, terminal_safe_line
from tui.widgets._format import short

if TYPE_CHECKING:
    from runtime.models import ImageBlock

TOOL_ICONS = {
    ToolCallState.PENDING: "◌",
    ToolCallState.RUNNING: "●",
    ToolCallState.COMPLETED: "✓",
    ToolCallState.FAILED: "✗",
    ToolCallState.INDETERMINATE: "⚠",
    ToolCallState.CANCELLED: "⊘",
}

RESULT_LIMIT = 4000
DENIAL_CHARS = 300
"""A denial's line shows its reason up to this long; the result's fold holds all of it."""
DELEGATION_PREFIX = "delegate_to_"


ARGUMENT_CHARS = 40
"""Each argument's value is shown up to this long at least; a wider block gives the long ones
more (a shell command, a path), up to what fits in HEADER_LINES lines."""
HEADER_LINES = 2


def _arguments_text(arguments: dict[str, Any], budget: int = 0, floor: int = ARGUMENT_CHARS) -> str:
    """``key=value, …`` with each value on one line, cut with … past its share of ``budget``
    characters: values shorter than an even share leave the rest to the longer ones, and no
    value is cut shorter than ``floor`` (the header then wraps)."""
    import json  # not at import: the first frame shows no tool call

    values = {
        key: " ".join(
            (value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)).split()
        )
        for key, value in arguments.items()
    }
    room = budget - sum(len(key) + 3 for key in values)  # "key=" and ", "
    limits = dict.fromkeys(values, floor)
    waiting = sorted(values, key=lambda key: len(values[key]))
    while waiting:
        share = room // len(waiting)
        key = waiting.pop(0)
        limits[key] = max(floor, min(len(values[key]), share))
        room -= min(len(values[key]), max(share, 0))
    return ", ".join(f"{key}={short(value, limits[key])}" for key, value in values.items())


class ToolCallView(Vertical, can_focus=True):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "toggle_sub_run", "Sub-run", tooltip="Unfold / fold the sub-run"),
        Binding("o", "open_child", "Open sub-run"),
        Binding("enter,space", "toggle_result", "Show / hide result"),
        Binding("o", "open_images", "Open image"),
    ]

    # Focused, on $panel: $boost is transparent in a theme that sets its panel (all of ours),
    # and the block the keys had reached did not show.
    DEFAULT_CSS = """
    ToolCallView { height: auto; margin: 0 0 1 2; padding: 0 1; border-left: wide $secondary; }
    ToolCallView:focus { background: $panel; }
    ToolCallView.-failed, ToolCallView.-indeterminate { border-left: wide $error; }
    ToolCallView.-failed.-denied { border-left: wide $warning; }
    ToolCallView .tool-denial { color: $text-warning; }
    ToolCallView.-completed { border-left: wide $success; }
    ToolCallView .tool-header { color: $text; }
    ToolCallView.-context .tool-header { color: $text-muted; }
    ToolCallView .tool-child { color: $accent; }
    ToolCallView .tool-progress-line { color: $text-muted; }
    ToolCallView ProgressBar { height: 1; }
    ToolCallView Collapsible { background: transparent; border: none; padding: 0; }
    ToolCallView Collapsible > Contents { padding: 0 0 0 2; }
    ToolCallView #sub-run > Contents { padding: 0 0 0 1; border-left: vkey $accent 50%; }
    ToolCallView #sub-run .sub-run-note { color: $text-muted; }
    ToolCallView #applied-diff { color: $text-muted; }
    """

    class DiffWanted(TextualMessage):
        """A completed file write is on screen: the diff it applied is wanted (``show_diff``)."""

        def __init__(self, view: ToolCallView) -> None:
            super().__init__()
            self.view = view
            self.tool_call_id = view.tool_call_id

    class SubRunWanted(TextualMessage):
        """The sub-run fold was opened: its items are wanted (``show_sub_run``)."""

        def __init__(self, view: ToolCallView, child_run_id: str | None) -> None:
            super().__init__()
            self.view = view
            self.tool_call_id = view.tool_call_id
            self.child_run_id = child_run_id

    class OpenChildRequested(TextualMessage):
        def __init__(self, tool_call_id: str, child_run_id: str | None) -> None:
            super().__init__()
            self.tool_call_id = tool_call_id
            self.child_run_id = child_run_id

    class ImagesRequested(TextualMessage):
        """The person asked to see the images of a result."""

        def __init__(self, tool_call_id: str, images: list[ImageBlock]) -> None:
            super().__init__()
            self.tool_call_id = tool_call_id
            self.images = images

    def __init__(
        self,
        *,
        tool_call_id: str,
        name: str,
        arguments: dict[str, Any] | None,
        state: ToolCallState = ToolCallState.PENDING,
        result: str | None = None,
        error: str | None = None,
        child_run_id: str | None = None,
        context: bool = False,
    ) -> None:
        super().__init__(classes="-context" if context else None)
        self.tool_call_id = tool_call_id
        self.context = context
        self.tool_name = name
        self.arguments = arguments or {}
        self.state = state
        self.result = result
        self.error = error
        self.child_run_id = child_run_id
        self.images: list[ImageBlock] = []
        self._diff_asked = False
        self._has_diff = False
        self._header_width = 0

    def compose(self) -> ComposeResult:
        yield Static(self._header(), classes="tool-header", markup=False)
        refused = self._denial_text()
        denied = Static(refused, classes="tool-denial", markup=False)
        denied.display = bool(refused)
        yield denied
        child = Static(self._child_text(), classes="tool-child", markup=False)
        child.display = self.has_sub_run
        yield child
        with Collapsible(title="sub-run", collapsed=True, id="sub-run") as sub_run:
            sub_run.display = self.has_sub_run
            yield Static("loading…", classes="sub-run-note", markup=False)
        bar = ProgressBar(total=None, show_eta=False, id="progress")
        bar.display = False
        yield bar
        line = Static("", classes="tool-progress-line", markup=False, id="progress-line")
        line.display = False
        yield line
        with Collapsible(title="result", collapsed=True, id="result") as result:
            result.display = self.result is not None or self.error is not None
            yield Static(self._result_text(), markup=False, id="result-text")
        diff = Static("", id="applied-diff")
        diff.display = False
        yield diff

    def on_mount(self) -> None:
        self._set_state_class()
        self._want_diff()
        # The block itself takes focus; its fold is toggled from here (one stop per block).
        for title in self.query(CollapsibleTitle):
            title.can_focus = False

    @property
    def is_delegation(self) -> bool:
        return self.child_run_id is not None or self.tool_name.startswith(DELEGATION_PREFIX)

    @property
    def has_sub_run(self) -> bool:
        """A delegation, unless it was stopped before it ran (refused, or its hook broke): that
        one started no sub-run, and never will."""
        if not self.is_delegation:
            return False
        stopped = self.state is ToolCallState.FAILED and never_ran(self.error)
        return self.child_run_id is not None or not stopped

    def _show_sub_run_offer(self) -> None:
        offered = self.has_sub_run
        for part in self.query(".tool-child, #sub-run"):
            part.display = offered
        self.refresh_bindings()

    def _header(self) -> str:
        width = self.content_size.width  # 0 before the first layout: each value at ARGUMENT_CHARS
        budget = HEADER_LINES * width - len(self.tool_name) - 4  # the icon, the brackets
        count = max(1, len(self.arguments))
        while True:
            # Each value's least share: ARGUMENT_CHARS, less on a narrow block with several
            # arguments (a question with its options took four lines at 80 columns).
            floor = ARGUMENT_CHARS if width <= 0 else max(16, min(ARGUMENT_CHARS, budget // count))
            header = f"{self.tool_name}({_arguments_text(self.arguments, budget, floor)})"
            text = f"{TOOL_ICONS[self.state]} {terminal_safe_line(header)}"
            if width <= 0:
                return text
            # Lines break between words, so a budget of two lines' characters may take three.
            lines = len(Content(text).wrap(width))
            if lines <= HEADER_LINES or budget <= 16 * count:
                return text
            budget -= width // 2

    def on_resize(self) -> None:
        if self.content_size.width != self._header_width:
            self._header_width = self.content_size.width
            self.query_one(".tool-header", Static).update(self._header())

    def _child_text(self) -> str:
        agent = self.tool_name.removeprefix(DELEGATION_PREFIX)
        return f"↳ {agent} sub-run · Enter unfolds it · o opens it, p comes back"

    def _result_text(self) -> str:
        text = self.error if self.error is not None else (self.result or "")
        if len(text) > RESULT_LIMIT:
            text = text[:RESULT_LIMIT] + f"\n… ({len(text) - RESULT_LIMIT} more characters)"
        return terminal_safe(text)

    def _denial_text(self) -> str:
        """Who refused the call before it ran (the permission rules, the person, a hook), on a
        line of its own: folded in the result, a hook's refusal looked like any failure."""
        refused = denial(self.error) if self.state is ToolCallState.FAILED else None
        return terminal_safe_line(short(refused.line(), DENIAL_CHARS)) if refused else ""

    def _show_denial(self) -> None:
        text = self._denial_text()
        self.set_class(bool(text), "-denied")
        # Not query_one: a block taken out again as it was mounted (the run read again at
        # once) has its Mount handled with its children gone (a test under load).
        for line in self.query(".tool-denial").results(Static):
            line.update(text)
            line.display = bool(text)

    def _set_state_class(self) -> None:
        for state in ToolCallState:
            self.set_class(self.state is state, f"-{state.value}")
        self._show_denial()
        if self.is_delegation:
            self._show_sub_run_offer()

    def update_state(
        self,
        state: ToolCallState,
        *,
        arguments: dict[str, Any] | None = None,
        result: str | None = None,
        error: str | None = None,
    ) -> None:
        was_pending = self.state is ToolCallState.PENDING
        self.state = state
        if arguments is not None:
            self.arguments = arguments
        if result is not None:
            self.result = result
        if error is not None:
            self.error = error
        if not self.is_mounted:
            return
        try:
            self.query_one(".tool-header", Static).update(self._header())
            self._set_state_class()
            if state.is_terminal or (was_pending and state is ToolCallState.RUNNING):
                # What the call waited for before it ran (a before-tool hook) is over: the
                # tool's own progress, if it has any, shows from here.
                self.query_one("#progress", ProgressBar).display = False
                self.query_one("#progress-line", Static).display = False
            if self.result is not None or self.error is not None:
                folded = self.query_one("#result", Collapsible)
                folded.display = True
                folded.query_one("#result-text", Static).update(self._result_text())
        except NoMatches:
            return  # going: its parts went first, each in its own task (the fields are kept)
        self._want_diff()
        if state.is_terminal and self.has_sub_run and self.sub_run_expanded:
            self.post_message(self.SubRunWanted(self, self.child_run_id))  # its final state

    def _want_diff(self) -> None:
        # Imported here: rewind brings the tool catalog, which the first frame does not need.
        from runtime.rewind import FILE_WRITING_TOOLS

        if (
            self.tool_name in FILE_WRITING_TOOLS
            and self.state is ToolCallState.COMPLETED
            and not self._diff_asked
            and (not self.context or (self.is_mounted and self.result_expanded))
        ):
            self._diff_asked = True
            self.post_message(self.DiffWanted(self))

    def show_diff(self, diff: str) -> None:
        """The diff the call applied (coloured as in its approval), below its header."""
        if not diff or not self.is_mounted:
            return
        try:
            view = self.query_one("#applied-diff", Static)
            shown = not self.context or self.result_expanded
        except NoMatches:
            # Read by a worker while the block went (another run opened, the window moved
            # on): a removed widget stays mounted, but its parts are gone.
            return
        from rich.syntax import Syntax

        view.update(Syntax(terminal_safe(diff), "diff", word_wrap=True))
        view.display = shown
        self._has_diff = True

    def set_result(
        self, content: str, *, is_error: bool, images: list[ImageBlock] | None = None
    ) -> None:
        if images:
            self.images = list(images)
            self.refresh_bindings()
        if is_error:
            self.error = content
        else:
            self.result = content
        if not self.is_mounted:
            return
        try:
            folded = self.query_one("#result", Collapsible)
            folded.display = True
            folded.query_one("#result-text", Static).update(self._result_text())
            self._show_denial()
            if self.is_delegation:
                self._show_sub_run_offer()
        except NoMatches:
            return  # going: its parts went first, each in its own task (the fields are kept)

    def set_child(self, child_run_id: str) -> None:
        self.child_run_id = child_run_id
        if not self.is_mounted:
            return
        try:
            child = self.query_one(".tool-child", Static)
            child.update(self._child_text())
            child.display = True
            self.query_one("#sub-run", Collapsible).display = True
        except NoMatches:
            return  # going (see ``set_result``)

    @property
    def sub_run_expanded(self) -> bool:
        return not self.query_one("#sub-run", Collapsible).collapsed

    async def show_sub_run(self, widgets: list[Widget], note: str | None = None) -> None:
        """Put the sub-run's widgets (built by the conversation) into the fold."""
        try:
            contents = self.query_one("#sub-run", Collapsible).query_one(Collapsible.Contents)
        except NoMatches:
            return  # the block went while the sub-run was read (as in ``show_diff``)
        await contents.remove_children()
        shown: list[Widget] = list(widgets)
        if note:
            shown.append(Static(note, classes="sub-run-note", markup=False))
        await contents.mount_all(shown)

    def on_collapsible_expanded(self, event: Collapsible.Expanded) -> None:
        if event.collapsible.id == "sub-run":
            event.stop()
            self.post_message(self.SubRunWanted(self, self.child_run_id))
        elif self.context and event.collapsible is self.query_one("#result", Collapsible):
            self.query_one("#applied-diff", Static).display = self._has_diff
            self._want_diff()

    def on_collapsible_collapsed(self, event: Collapsible.Collapsed) -> None:
        if self.context and event.collapsible is self.query_one("#result", Collapsible):
            self.query_one("#applied-diff", Static).display = False

    def progress(self, progress: float, total: float | None, message: str | None) -> None:
        """Show progress while the tool runs: a bar (with a total) or a pulsing bar, and the
        latest progress line (e.g. the last line a shell command printed). Before it runs, the
        line says what it waits for ("checking with hook `…`…")."""
        running = not self.state.is_terminal
        if not self.is_mounted:
            return
        try:
            bar = self.query_one("#progress", ProgressBar)
            line = self.query_one("#progress-line", Static)
        except NoMatches:
            return  # going (see ``set_result``): nothing to show it on
        bar.display = running
        bar.update(total=total, progress=progress)
        line.display = running and bool(message)
        if message:
            line.update(terminal_safe_line(short(message, 100)))

    @property
    def result_expanded(self) -> bool:
        return not self.query_one("#result", Collapsible).collapsed

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("open_child", "toggle_sub_run"):
            return self.has_sub_run
        if action == "toggle_result":
            return self.result is not None or self.error is not None
        if action == "open_images":
            return bool(self.images)
        return True

    def action_open_child(self) -> None:
        self.post_message(self.OpenChildRequested(self.tool_call_id, self.child_run_id))

    def action_toggle_sub_run(self) -> None:
        folded = self.query_one("#sub-run", Collapsible)
        folded.collapsed = not folded.collapsed

    def unfold_result(self) -> None:
        self.query_one("#result", Collapsible).collapsed = False

    def action_toggle_result(self) -> None:
        folded = self.query_one("#result", Collapsible)
        folded.collapsed = not folded.collapsed

    def action_open_images(self) -> None:
        self.post_message(self.ImagesRequested(self.tool_call_id, self.images))
