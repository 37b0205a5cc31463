"""The fields of an elicitation form, read from the object schema a server asks for.

MCP (2025-06-18 and 2025-11-25, ``PrimitiveSchemaDefinition``) allows a flat object whose
properties are strings, numbers, integers, booleans and these choices:

- one of a list: ``{"type": "string", "enum": [...]}``, titled with ``"enumNames": [...]``
  (legacy) or as ``{"type": "string", "oneOf": [{"const": ..., "title": ...}, ...]}``;
- several of a list: ``{"type": "array", "items": {"enum": [...]}}`` or
  ``{"type": "array", "items": {"anyOf": [{"const": ..., "title": ...}, ...]}}``, with
  optional ``minItems`` / ``maxItems`` and a list as ``default``.

``form_fields`` turns such a schema into ``FormField`` values that any client (the TUI's form,
the CLI) can present; a choice is shown by its title and answered with its value (the const).
Pure data in, data out: no Textual, no jsonschema.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

__all__ = ["Choice", "FieldKind", "FormField", "form_fields"]


class FieldKind(StrEnum):
    TEXT = "text"
    INTEGER = "integer"
    NUMBER = "number"
    BOOLEAN = "boolean"
    ONE_OF = "one_of"
    """A single choice from ``choices``."""
    MANY_OF = "many_of"
    """Any number of ``choices`` (a JSON list of their values)."""
    LIST = "list"
    """An array without a list of choices (not in the spec): comma-separated text."""


@dataclass(frozen=True)
class Choice:
    value: Any
    """What the answer holds (the enum value or the const)."""
    title: str
    """What a person reads."""


@dataclass(frozen=True)
class FormField:
    name: str
    label: str
    help: str
    required: bool
    kind: FieldKind
    choices: tuple[Choice, ...] = ()
    default: Any = None
    min_items: int | None = None
    max_items: int | None = None

    def default_text(self) -> str:
        """The default as a text field shows it (a list as ``a, b``, never Python's repr)."""
        if self.default is None:
            return ""
        if isinstance(self.default, list):
            return ", ".join(str(item) for item in self.default)
        if isinstance(self.default, dict):
            return json.dumps(self.default)
        return str(self.default)

    def default_choices(self) -> set[int]:
        """Indexes of the choices the default selects (one for a single choice)."""
        defaults = self.default if isinstance(self.default, list) else [self.default]
        return {
            index
            for index, choice in enumerate(self.choices)
            if any(choice.value == default for default in defaults if default is not None)
        }

    def value_from_text(self, text: str) -> Any:
        """The typed value of what was typed; None when the field is left empty. Text that
        is not a number stays text, for the schema's check to name."""
        text = text.strip()
        if not text:
            return None
        try:
            if self.kind is FieldKind.INTEGER:
                return int(text)
            if self.kind is FieldKind.NUMBER:
                return float(text)
        except ValueError:
            return text
        if self.kind is FieldKind.LIST:
            return [item.strip() for item in text.split(",") if item.strip()]
        return text

    def count_problem(self, chosen: int) -> str | None:
        """What is wrong with choosing ``chosen`` of the choices (minItems/maxItems), if
        anything, in words."""
        low, high = self.min_items, self.max_items
        if (low is None or chosen >= low) and (high is None or chosen <= high):
            return None
        if low is not None and high is not None:
            wanted = f"choose {low}" if low == high else f"choose {low} to {high}"
        elif low is not None:
            wanted = f"choose at least {low}"
        else:
            wanted = f"choose at most {high}"
        return f"{wanted} ({chosen or 'none'} chosen)"


def _choices(spec: dict[str, Any]) -> tuple[Choice, ...] | None:
    """The choices an enum-like schema offers, titled when it gives titles; None if it is not
    one."""
    enum = spec.get("enum")
    if isinstance(enum, list):
        names = spec.get("enumNames")
        if isinstance(names, list) and len(names) == len(enum):
            return tuple(Choice(value, str(name)) for value, name in zip(enum, names, strict=True))
        return tuple(Choice(value, str(value)) for value in enum)
    for key in ("oneOf", "anyOf"):
        options = spec.get(key)
        if (
            isinstance(options, list)
            and options
            and all(isinstance(option, dict) and "const" in option for option in options)
        ):
            return tuple(
                Choice(option["const"], str(option.get("title") or option["const"]))
                for option in options
            )
    return None


def _type_of(spec: dict[str, Any]) -> str:
    kind = spec.get("type", "string")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    return str(kind)


def _count(spec: dict[str, Any], key: str) -> int | None:
    value = spec.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _field(name: str, spec: dict[str, Any], *, required: bool) -> FormField:
    label = spec.get("title")
    description = spec.get("description")
    common: dict[str, Any] = {
        "name": name,
        "label": label if isinstance(label, str) and label.strip() else name,
        "help": description.strip() if isinstance(description, str) else "",
        "required": required,
        "default": spec.get("default"),
    }
    kind = _type_of(spec)
    if kind == "array":
        items = spec.get("items")
        choices = _choices(items) if isinstance(items, dict) else None
        if choices is None:
            return FormField(kind=FieldKind.LIST, **common)
        return FormField(
            kind=FieldKind.MANY_OF,
            choices=choices,
            min_items=_count(spec, "minItems"),
            max_items=_count(spec, "maxItems"),
            **common,
        )
    choices = _choices(spec)
    if choices is not None:
        return FormField(kind=FieldKind.ONE_OF, choices=choices, **common)
    plain = {
        "boolean": FieldKind.BOOLEAN,
        "integer": FieldKind.INTEGER,
        "number": FieldKind.NUMBER,
    }
    return FormField(kind=plain.get(kind, FieldKind.TEXT), **common)


def form_fields(schema: dict[str, Any]) -> list[FormField]:
    """The fields of an object schema, in the order of its properties."""
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return []
    required = set(schema.get("required") or [])
    return [
        _field(str(name), spec if isinstance(spec, dict) else {}, required=name in required)
        for name, spec in properties.items()
    ]
