"""A tool result's content as the model reads it: no repeats, the primary form when they differ."""

from __future__ import annotations

import json

import mcp_types as types

from runtime.mcp._content import render_result


def _result(texts: list[str], structured: dict[str, object] | None) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text) for text in texts],
        structured_content=structured,
    )


def test_structured_content_wrapping_the_text_is_not_sent_again() -> None:
    for structured in (
        {"content": "the notes"},
        {"result": "the notes"},
        {"a": {"b": "the notes"}},
    ):
        text, kept = render_result(_result(["the notes"], structured))
        assert text == "the notes"
        assert kept == structured


def test_structured_content_equal_to_the_json_text_is_not_sent_again() -> None:
    data = {"city": "Oslo", "temperature": 3}
    text, _ = render_result(_result([json.dumps(data)], data), structured_primary=True)
    assert text == json.dumps(data)


def test_with_an_output_schema_differing_structured_content_is_what_the_model_gets() -> None:
    data = {"city": "Oslo", "temperature": 3}
    text, _ = render_result(_result(["It is cold in Oslo."], data), structured_primary=True)
    assert json.loads(text) == data


def test_without_an_output_schema_differing_structured_content_follows_the_text() -> None:
    data = {"city": "Oslo", "temperature": 3}
    text, _ = render_result(_result(["It is cold in Oslo."], data))
    first, second = text.split("\n")
    assert first == "It is cold in Oslo." and json.loads(second) == data
