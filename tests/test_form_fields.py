"""Reading an elicitation's schema into form fields: every shape MCP allows, titles for choices,
defaults, and the words for a wrong number of choices."""

from __future__ import annotations

from typing import Any

import pytest

from runtime.form_fields import Choice, FieldKind, FormField, form_fields
from tests.fakes.mcp_servers import FAVOURITES_SCHEMA


def _one(spec: dict[str, Any], *, required: bool = False) -> FormField:
    schema = {"type": "object", "properties": {"f": spec}, "required": ["f"] if required else []}
    [field] = form_fields(schema)
    return field


def test_every_choice_shape_of_the_spec_is_a_choice_field_titled_as_the_server_titled_it() -> None:
    fields = {field.name: field for field in form_fields(FAVOURITES_SCHEMA)}

    assert fields["opening"].kind is FieldKind.TEXT and fields["opening"].required
    instruments = fields["instruments"]
    assert instruments.kind is FieldKind.MANY_OF
    assert [c.title for c in instruments.choices] == ["Guitar", "Piano", "Violin", "Drums", "Bass"]
    assert (instruments.min_items, instruments.max_items) == (1, 2)
    assert fields["hero"].kind is FieldKind.ONE_OF
    assert fields["hero"].choices[1] == Choice("hero-2", "Green Lantern")
    assert fields["fish"].kind is FieldKind.MANY_OF
    assert fields["fish"].choices[2] == Choice("fish-3", "Trout")
    assert fields["pet"].kind is FieldKind.ONE_OF
    assert fields["pet"].choices[0] == Choice("pet-1", "Cats")
    assert [field.name for field in form_fields(FAVOURITES_SCHEMA)] == list(
        FAVOURITES_SCHEMA["properties"]
    )


def test_defaults_select_their_choices_by_value() -> None:
    fields = {field.name: field for field in form_fields(FAVOURITES_SCHEMA)}
    assert fields["instruments"].default_choices() == {0}
    assert fields["hero"].default_choices() == {0}
    assert fields["fish"].default_choices() == {0}
    assert _one({"enum": ["a", "b"]}).default_choices() == set()


@pytest.mark.parametrize(
    ("spec", "kind"),
    [
        ({"type": "string"}, FieldKind.TEXT),
        ({"type": "string", "format": "email"}, FieldKind.TEXT),
        ({}, FieldKind.TEXT),
        ({"type": "integer"}, FieldKind.INTEGER),
        ({"type": "number"}, FieldKind.NUMBER),
        ({"type": ["number", "null"]}, FieldKind.NUMBER),
        ({"type": "boolean"}, FieldKind.BOOLEAN),
        ({"enum": ["red", "green"]}, FieldKind.ONE_OF),
        ({"type": "string", "anyOf": [{"const": "a", "title": "A"}]}, FieldKind.ONE_OF),
        ({"type": "array", "items": {"type": "string"}}, FieldKind.LIST),
        ({"type": "array", "items": {"oneOf": [{"const": "a"}]}}, FieldKind.MANY_OF),
    ],
)
def test_each_kind_of_field_is_read_from_its_schema(spec: dict[str, Any], kind: FieldKind) -> None:
    assert _one(spec).kind is kind


def test_an_untitled_choice_shows_its_value_and_enum_names_of_another_length_are_ignored() -> None:
    assert _one({"type": "array", "items": {"anyOf": [{"const": "x"}]}}).choices == (
        Choice("x", "x"),
    )
    legacy = _one({"type": "string", "enum": ["a", "b"], "enumNames": ["Only one"]})
    assert legacy.choices == (Choice("a", "a"), Choice("b", "b"))


def test_the_label_is_the_title_or_else_the_name_and_the_help_is_the_description() -> None:
    titled = _one({"type": "string", "title": "Your name", "description": " Full name "})
    assert (titled.label, titled.help) == ("Your name", "Full name")
    assert (_one({"type": "string"}).label, _one({"type": "string"}).help) == ("f", "")


@pytest.mark.parametrize(
    ("bounds", "chosen", "problem"),
    [
        ({"minItems": 1, "maxItems": 3}, 2, None),
        ({"minItems": 1, "maxItems": 3}, 0, "choose 1 to 3 (none chosen)"),
        ({"minItems": 1, "maxItems": 3}, 4, "choose 1 to 3 (4 chosen)"),
        ({"minItems": 2}, 1, "choose at least 2 (1 chosen)"),
        ({"maxItems": 1}, 2, "choose at most 1 (2 chosen)"),
        ({"minItems": 2, "maxItems": 2}, 3, "choose 2 (3 chosen)"),
        ({}, 0, None),
    ],
)
def test_a_wrong_number_of_choices_is_said_in_words(
    bounds: dict[str, int], chosen: int, problem: str | None
) -> None:
    field = _one({"type": "array", "items": {"enum": ["a", "b", "c", "d"]}, **bounds})
    assert field.count_problem(chosen) == problem


def test_typed_text_becomes_the_field_s_type_and_an_empty_box_is_left_out() -> None:
    assert _one({"type": "integer"}).value_from_text(" 42 ") == 42
    assert _one({"type": "number"}).value_from_text("3.14") == 3.14
    assert _one({"type": "integer"}).value_from_text("many") == "many"  # the schema names it
    assert _one({"type": "string"}).value_from_text("   ") is None
    listed = _one({"type": "array", "items": {"type": "string"}, "default": ["a", "b"]})
    assert listed.default_text() == "a, b"  # never Python's "['a', 'b']"
    assert listed.value_from_text("a, b ,") == ["a", "b"]
