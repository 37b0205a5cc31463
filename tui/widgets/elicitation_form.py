"""A form generated from an elicitation's JSON Schema: text, number, integer, boolean and enum
fields, required marks, and validation messages beside each field."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Button, Checkbox, Input, Select, Static

from runtime.answers import field_errors
from tui.widgets._prompt_base import PromptAnswered
from tui.widgets.ordered_keys import OrderedInput

if TYPE_CHECKING:
    from runtime.models import InputRequest


def _field_type(spec: dict[str, Any]) -> str:
    if "enum" in spec:
        return "enum"
    kind = spec.get("type", "string")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    return str(kind)


class ElicitationForm(Vertical):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+s", "submit", "Submit form"),
        Binding("ctrl+r", "decline", "Decline"),
    ]

    DEFAULT_CSS = """
    ElicitationForm { height: auto; max-height: 30; border: round $accent; padding: 0 1;
                      background: $surface; }
    ElicitationForm .prompt-title { text-style: bold; color: $accent; }
    ElicitationForm #fields { height: auto; max-height: 20; }
    ElicitationForm .field { height: auto; }
    ElicitationForm .field-label { width: 22; padding-top: 1; }
    ElicitationForm .field Input, ElicitationForm .field Select { width: 1fr; }
    ElicitationForm .field Checkbox { width: 1fr; }
    ElicitationForm .field-error { width: 30; color: $error; padding-top: 1; }
    ElicitationForm .field-help { color: $text-muted; padding-left: 22; }
    ElicitationForm .form-buttons { height: auto; }
    ElicitationForm .prompt-keys { color: $text-muted; }
    """

    def __init__(self, request: InputRequest) -> None:
        super().__init__(id="elicitation-form")
        self.request = request
        schema = request.answer_schema or {}
        self.properties: dict[str, dict[str, Any]] = dict(schema.get("properties", {}))
        self.required: set[str] = set(schema.get("required", []))

    def compose(self) -> ComposeResult:
        server = self.request.detail.get("server")
        title = f"✎ {self.request.prompt}" + (f"  (from {server})" if server else "")
        yield Static(title, classes="prompt-title", markup=False)
        with VerticalScroll(id="fields"):
            for name, spec in self.properties.items():
                label = spec.get("title") or name
                if name in self.required:
                    label += " *"
                with Horizontal(classes="field", id=f"field-{name}"):
                    yield Static(label, classes="field-label", markup=False)
                    yield self._input_for(name, spec)
                    yield Static("", classes="field-error", id=f"error-{name}", markup=False)
                help_text = spec.get("description")
                if isinstance(help_text, str) and help_text.strip():
                    # The schema's description is the field's help; its title is the label.
                    yield Static(help_text, classes="field-help", id=f"help-{name}", markup=False)
        yield Static("", classes="field-error", id="error-form", markup=False)
        with Horizontal(classes="form-buttons"):
            yield Button("Submit", id="submit", variant="primary")
            yield Button("Decline", id="decline")
            yield Button("Cancel", id="cancel")
        yield Static("ctrl+s submit · ctrl+r decline · Tab next field", classes="prompt-keys")

    def _input_for(self, name: str, spec: dict[str, Any]) -> Input | Checkbox | Select[str]:
        kind = _field_type(spec)
        default = spec.get("default")
        widget_id = f"input-{name}"
        if kind == "boolean":
            return Checkbox(value=bool(default), id=widget_id)
        if kind == "enum":
            options = [(str(value), str(value)) for value in spec["enum"]]
            return Select(
                options,
                value=str(default) if default is not None else Select.NULL,
                id=widget_id,
                allow_blank=True,
            )
        return OrderedInput(
            value="" if default is None else str(default),
            placeholder=kind,
            type="number" if kind == "number" else ("integer" if kind == "integer" else "text"),
            id=widget_id,
            select_on_focus=False,  # back to a field: what it holds is kept, not replaced
        )

    def on_mount(self) -> None:
        self.focus_first_field()

    def focus_first_field(self) -> None:
        fields = self.query("#fields Input, #fields Checkbox, #fields Select")
        if fields:
            fields.first().focus()

    def content(self) -> dict[str, Any]:
        """The form's values, typed by the schema; empty fields are left out."""
        values: dict[str, Any] = {}
        for name, spec in self.properties.items():
            kind = _field_type(spec)
            widget = self.query_one(f"#input-{name}")
            if isinstance(widget, Checkbox):
                values[name] = widget.value
            elif isinstance(widget, Select):
                if widget.value is not Select.NULL:
                    chosen = str(widget.value)
                    original = next((v for v in spec["enum"] if str(v) == chosen), chosen)
                    values[name] = original
            elif isinstance(widget, Input):
                text = widget.value.strip()
                if not text:
                    continue
                if kind == "integer":
                    try:
                        values[name] = int(text)
                    except ValueError:
                        values[name] = text
                elif kind == "number":
                    try:
                        values[name] = float(text)
                    except ValueError:
                        values[name] = text
                else:
                    values[name] = text
        return values

    def show_errors(self, errors: dict[str, str]) -> None:
        for name in self.properties:
            self.query_one(f"#error-{name}", Static).update(errors.get(name, ""))
        unplaced = [f"{k}: {v}" if k else v for k, v in errors.items() if k not in self.properties]
        self.query_one("#error-form", Static).update("; ".join(unplaced))

    def action_submit(self) -> None:
        content = self.content()
        errors = field_errors(self.request.answer_schema or {"type": "object"}, content)
        self.show_errors(errors)
        if errors:
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
