"""A form generated from an elicitation's JSON Schema (read by ``runtime.form_fields``): text,
number, integer and boolean fields, one choice from a list (shown by its titles), several
choices from a list, required marks, and validation messages under each field and in one line
at the top."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal, assert_never

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.css.query import NoMatches
from textual.geometry import Region
from textual.widgets import Button, Checkbox, Input, Select, SelectionList, Static

from runtime.answers import field_errors
from runtime.form_fields import FieldKind, FormField, form_fields
from tui.widgets._prompt_base import PromptAnswered
from tui.widgets.ordered_keys import OrderedInput

if TYPE_CHECKING:
    from textual import events
    from textual.widget import Widget

    from runtime.models import InputRequest

FieldInput = Input | Checkbox | Select[int] | SelectionList[int]

_PLACEHOLDERS = {
    FieldKind.TEXT: "text",
    FieldKind.INTEGER: "integer",
    FieldKind.NUMBER: "number",
    FieldKind.LIST: "a, b, …",
}
_INPUT_TYPES: dict[FieldKind, Literal["integer", "number"]] = {
    FieldKind.INTEGER: "integer",
    FieldKind.NUMBER: "number",
}

NARROW = 60
"""Below this many columns a field's label goes above its input instead of beside it (at 80
columns the form is about 44 wide: beside a label, a box showed a dozen characters)."""


class ElicitationForm(Vertical):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+s", "submit", "Submit form"),
        Binding("ctrl+r", "decline", "Decline"),
        # With priority: run as the app reads the key, before the keys typed after it (at once,
        # as tmux sends them) are handed on. As the screen's plain Tab they ran once the key had
        # passed through the field, and the text typed next had been handed to that field by
        # then: a trial's Tab Tab Tab "ada" typed "ada" into the first field.
        Binding("tab", "next_field", "Next field", priority=True),
        Binding("shift+tab", "previous_field", "Previous field", show=False, priority=True),
    ]

    DEFAULT_CSS = """
    ElicitationForm { height: auto; max-height: 30; border: round $accent; padding: 0 1;
                      background: $surface; }
    ElicitationForm .prompt-title { text-style: bold; color: $accent; }
    ElicitationForm #error-form { color: $error; text-style: bold; display: none; }
    ElicitationForm.-refused #error-form { display: block; }
    /* Title and buttons docked: on a short screen the fields scroll between them (the
       buttons were cut off at 24 rows). */
    ElicitationForm #form-head { dock: top; height: auto; }
    ElicitationForm #form-foot { dock: bottom; height: auto; }
    ElicitationForm #fields { height: auto; max-height: 100%; }
    ElicitationForm .field { height: auto; }
    ElicitationForm .field-row { height: auto; }
    ElicitationForm .field-label { width: 22; padding-top: 1; }
    ElicitationForm .field-row > Input, ElicitationForm .field-row > Select,
    ElicitationForm .field-row > SelectionList, ElicitationForm .field-row > Checkbox {
        width: 1fr;
    }
    ElicitationForm .field-row > SelectionList { max-height: 12; }
    ElicitationForm .field-error { color: $error; padding-left: 22; display: none; }
    ElicitationForm .field.-invalid .field-error { display: block; }
    ElicitationForm .field.-invalid Input, ElicitationForm .field.-invalid SelectionList,
    ElicitationForm .field.-invalid SelectCurrent { border: tall $error; }
    ElicitationForm .field-help { color: $text-muted; padding-left: 22; }
    ElicitationForm.-narrow .field-row { layout: vertical; }
    ElicitationForm.-narrow .field-label { width: 1fr; padding-top: 0; }
    ElicitationForm.-narrow .field-error, ElicitationForm.-narrow .field-help { padding-left: 0; }
    ElicitationForm .form-buttons { height: auto; }
    ElicitationForm .prompt-keys { color: $text-muted; }
    """

    def __init__(self, request: InputRequest) -> None:
        super().__init__(id="elicitation-form")
        self.request = request
        self.fields = form_fields(request.answer_schema or {})

    def compose(self) -> ComposeResult:
        server = self.request.detail.get("server")
        title = f"✎ {self.request.prompt}" + (f"  (from {server})" if server else "")
        with Vertical(id="form-head"):
            yield Static(title, classes="prompt-title", markup=False)
            # At the top, outside the scrolled fields: a refused submit is said where it is seen.
            yield Static("", id="error-form", markup=False)
        # Not a focus stop of its own: it shows no focus and takes no text (shift+tab from the
        # first field stopped there, and the letters typed next vanished). Focusing a field
        # scrolls it into view.
        with VerticalScroll(id="fields", can_focus=False):
            for field in self.fields:
                with Vertical(classes="field", id=f"field-{field.name}"):
                    with Horizontal(classes="field-row"):
                        label = field.label + (" *" if field.required else "")
                        yield Static(label, classes="field-label", markup=False)
                        yield self._input_for(field)
                    yield Static("", classes="field-error", id=f"error-{field.name}", markup=False)
                    if field.help:
                        # The schema's description is the field's help; its title the label.
                        yield Static(
                            field.help, classes="field-help", id=f"help-{field.name}", markup=False
                        )
        with Vertical(id="form-foot"):
            with Horizontal(classes="form-buttons"):
                yield Button("Submit", id="submit", variant="primary")
                yield Button("Decline", id="decline")
                yield Button("Cancel", id="cancel")
            keys = "ctrl+s submit · ctrl+r decline · Tab next field"
            if any(field.kind is FieldKind.MANY_OF for field in self.fields):
                keys += " · space ticks a choice"
            yield Static(keys, classes="prompt-keys")

    def _input_for(self, field: FormField) -> FieldInput:
        widget_id = f"input-{field.name}"
        match field.kind:
            case FieldKind.BOOLEAN:
                return Checkbox(value=bool(field.default), id=widget_id)
            case FieldKind.ONE_OF:
                chosen = field.default_choices()
                # A choice's title is the server's words, never markup (as ``Text``): "[WIP]
                # draft" read " draft", and "fix [/usr] path" raised MarkupError.
                return Select(
                    [(Text(choice.title), index) for index, choice in enumerate(field.choices)],
                    value=min(chosen) if chosen else Select.NULL,
                    id=widget_id,
                    allow_blank=True,
                )
            case FieldKind.MANY_OF:
                chosen = field.default_choices()
                return SelectionList[int](
                    *(
                        (Text(choice.title), index, index in chosen)
                        for index, choice in enumerate(field.choices)
                    ),
                    id=widget_id,
                )
            case FieldKind.TEXT | FieldKind.INTEGER | FieldKind.NUMBER | FieldKind.LIST:
                default = field.default_text()
                return OrderedInput(
                    value=default,
                    placeholder=_PLACEHOLDERS[field.kind],
                    type=_INPUT_TYPES.get(field.kind, "text"),
                    id=widget_id,
                    # Back to a field, what it holds is kept, not replaced. Except a number
                    # still holding the form's default: what is typed replaces it (a default
                    # of 42 and "500" typed read 42500). Typed in once, it is kept
                    # (``on_input_changed``).
                    select_on_focus=field.kind in _INPUT_TYPES and bool(default),
                )
            case _:
                assert_never(field.kind)

    def on_mount(self) -> None:
        self.focus_first_field()

    def on_input_changed(self, event: Input.Changed) -> None:
        """A field typed in keeps what it holds when the focus comes back to it."""
        field = next((f for f in self.fields if event.input.id == f"input-{f.name}"), None)
        if field is not None and event.value != field.default_text():
            event.input.select_on_focus = False

    def on_resize(self, event: events.Resize) -> None:
        self.set_class(event.size.width < NARROW, "-narrow")

    def focus_first_field(self) -> None:
        fields = self.query(
            "#fields Input, #fields Checkbox, #fields Select, #fields SelectionList"
        )
        if fields:
            fields.first().focus()

    async def _step(self, step: int) -> None:
        """Focus the form's next (or previous) field or button at once; past its first or last,
        the screen's next (or previous) pane."""
        screen = self.screen
        stops = [widget for widget in screen.focus_chain if self in widget.ancestors]
        focused = screen.focused
        index = stops.index(focused) + step if focused in stops else -1
        if 0 <= index < len(stops):
            # Now, not as ``focus()`` does it, behind the keys already queued.
            screen.set_focus(stops[index])
        else:
            await screen.run_action("next_pane" if step > 0 else "previous_pane")

    async def action_next_field(self) -> None:
        await self._step(1)

    async def action_previous_field(self) -> None:
        await self._step(-1)

    def _value_of(self, field: FormField) -> Any:
        """What ``field`` holds, typed by its schema; None when it is left out."""
        widget = self.query_one(f"#input-{field.name}")
        match field.kind:
            case FieldKind.BOOLEAN:
                assert isinstance(widget, Checkbox)
                return widget.value
            case FieldKind.ONE_OF:
                assert isinstance(widget, Select)
                index = widget.value
                return None if not isinstance(index, int) else field.choices[index].value
            case FieldKind.MANY_OF:
                assert isinstance(widget, SelectionList)
                ticked = set(widget.selected)
                chosen = [c.value for i, c in enumerate(field.choices) if i in ticked]
                # Nothing ticked leaves an optional field out, like an empty text field.
                return chosen if chosen or field.required else None
            case FieldKind.TEXT | FieldKind.INTEGER | FieldKind.NUMBER | FieldKind.LIST:
                assert isinstance(widget, Input)
                return field.value_from_text(widget.value)
            case _:
                assert_never(field.kind)

    def content(self) -> dict[str, Any]:
        """The form's values, typed by the schema; empty fields are left out."""
        values = {field.name: self._value_of(field) for field in self.fields}
        return {name: value for name, value in values.items() if value is not None}

    def problems(self, content: dict[str, Any]) -> dict[str, str]:
        """What is wrong with ``content``, by field name ('' for the whole form)."""
        errors = field_errors(self.request.answer_schema or {"type": "object"}, content)
        for field in self.fields:
            chosen = content.get(field.name)
            if field.kind is FieldKind.MANY_OF and isinstance(chosen, list):
                problem = field.count_problem(len(chosen))
                if problem is not None:  # in words, not jsonschema's "[] should be non-empty"
                    errors[field.name] = problem
        return errors

    def show_errors(self, errors: dict[str, str]) -> None:
        """Each field's message under it; at the top, which fields need attention and any
        message for the whole form."""
        try:
            form_error = self.query_one("#error-form", Static)
            rows = [
                (
                    self.query_one(f"#field-{field.name}"),
                    self.query_one(f"#error-{field.name}", Static),
                )
                for field in self.fields
            ]
        except NoMatches:
            # The screen says a refused answer (``AnswerFailed``) to the form it finds, which
            # may be going then (a new job opened), its parts first.
            return
        for field, (row, error) in zip(self.fields, rows, strict=True):
            message = errors.get(field.name, "")
            error.update(message)
            row.set_class(bool(message), "-invalid")
        invalid = [field.label for field in self.fields if field.name in errors]
        lines = []
        if invalid:
            count = len(invalid)
            lines.append(
                f"✗ Not sent: {count} field{'s' if count > 1 else ''} "
                f"need{'' if count > 1 else 's'} attention: " + ", ".join(invalid)
            )
        names = {field.name for field in self.fields}
        lines += [f"{k}: {v}" if k else v for k, v in errors.items() if k not in names]
        form_error.update("\n".join(lines))
        self.set_class(bool(lines), "-refused")

    def _go_to(self, field: FormField) -> None:
        """Focus ``field`` and scroll it into view, its label and message too."""
        widget: Widget = self.query_one(f"#input-{field.name}")
        widget.focus(scroll_visible=False)
        container = self.query_one(f"#field-{field.name}")
        self.query_one("#fields", VerticalScroll).scroll_to_widget(container, animate=False)

    def on_selection_list_selection_highlighted(
        self, event: SelectionList.SelectionHighlighted[int]
    ) -> None:
        """The choice ↑/↓ moves to stays in view when its list is taller than the fields'
        view (at 20 rows a list of five did not fit: the fifth was ticked unseen)."""
        event.stop()
        choices, fields = event.selection_list, self.query_one("#fields", VerticalScroll)
        row = (
            choices.region.y
            - fields.region.y
            + round(fields.scroll_y)
            + choices.gutter.top  # the list's border
            + event.selection_index
            - round(choices.scroll_y)
        )
        fields.scroll_to_region(Region(0, row, 1, 1), animate=False, immediate=True)

    def action_submit(self) -> None:
        content = self.content()
        errors = self.problems(content)
        self.show_errors(errors)
        if errors:
            first = next((field for field in self.fields if field.name in errors), None)
            if first is not None:
                self._go_to(first)
            return
        self.post_message(PromptAnswered(self.request, {"action": "accept", "content": content}))

    def action_decline(self) -> None:
        self.post_message(PromptAnswered(self.request, {"action": "decline"}))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_submit()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "submit":
            self.action_submit()
        elif event.button.id == "decline":
            self.action_decline()
        elif event.button.id == "cancel":
            self.post_message(PromptAnswered(self.request, {"action": "cancel"}))
