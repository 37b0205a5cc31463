"""Tool arguments as pydantic models: one definition gives the JSON Schema the model is shown and
the check of what it sends (issue 13).

A built-in tool declares ``ARGUMENTS``, a ``ToolArguments`` subclass. ``schema_of`` is the schema
advertised to the model: pydantic's, without the titles it generates, and with an optional
argument that has no default shown as its plain type (not "this type or null").
``argument_problems`` validates in strict mode, as JSON Schema would (no "10" for an integer, no
``true`` for a number), and says what is wrong in the words ``validate_arguments`` has always
used: "'path' is a required property", "unknown argument(s) 'lines' (allowed: ...)",
"limit: 'ten' is not of type 'integer'". Validation is pydantic-core's (a few microseconds);
jsonschema's took ~40 µs a call and stays for tools whose schema comes from elsewhere (MCP
servers, skills).
"""

from __future__ import annotations

import copy
from functools import cache
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

__all__ = ["ToolArguments", "argument_problems", "schema_of"]


class ToolArguments(BaseModel):
    """The arguments of one tool: unknown ones are refused, types are not coerced."""

    model_config = ConfigDict(extra="forbid", strict=True)


_JSON_TYPES = {
    "string_type": "string",
    "int_type": "integer",
    "int_from_float": "integer",
    "float_type": "number",
    "bool_type": "boolean",
    "list_type": "array",
    "dict_type": "object",
    "model_type": "object",
}


@cache
def _schema(model: type[ToolArguments]) -> dict[str, Any]:
    schema = model.model_json_schema()
    schema.pop("title", None)
    properties: dict[str, Any] = schema.get("properties", {})
    for name, prop in properties.items():
        prop.pop("title", None)
        variants = prop.get("anyOf")
        if variants is not None and prop.get("default", ...) is None:
            # ``X | None = None``: an argument one may leave out, shown as X alone.
            kept = [v for v in variants if v.get("type") != "null"]
            if len(kept) == 1:
                del prop["anyOf"], prop["default"]
                properties[name] = {**kept[0], **prop}
    schema["required"] = schema.get("required", [])
    return schema


def schema_of(model: type[ToolArguments]) -> dict[str, Any]:
    """The JSON Schema of ``model``'s arguments, a fresh copy the caller may change."""
    return copy.deepcopy(_schema(model))


def argument_problems(model: type[ToolArguments], arguments: dict[str, Any]) -> list[str]:
    """What is wrong with ``arguments``, one phrase each ("where: what"); empty when valid."""
    try:
        model.model_validate(arguments)
    except ValidationError as exc:
        return _phrases(model, exc)
    return []


def _phrases(model: type[ToolArguments], exc: ValidationError) -> list[str]:
    problems: list[str] = []
    unknown: list[str] = []
    for error in exc.errors(include_url=False):
        loc = error["loc"]
        where = ".".join(str(part) for part in loc)
        kind = error["type"]
        if kind == "extra_forbidden" and len(loc) == 1:
            unknown.append(repr(loc[0]))
        elif kind == "missing" and len(loc) == 1:
            problems.append(f"{loc[0]!r} is a required property")
        elif kind in _JSON_TYPES:
            problems.append(f"{where}: {error['input']!r} is not of type {_JSON_TYPES[kind]!r}")
        else:
            problems.append(f"{where}: {error['msg'][:1].lower()}{error['msg'][1:]}")
    if unknown:
        allowed = ", ".join(model.model_fields)
        message = f"unknown argument(s) {', '.join(unknown)}"
        problems.append(f"{message} (allowed: {allowed})" if allowed else message)
    return sorted(problems)
