"""Tool names the model APIs accept."""

from __future__ import annotations

from runtime.mcp import tool_name


def test_tool_names_join_server_and_tool_with_a_double_underscore() -> None:
    assert tool_name("github", "create_issue") == "github__create_issue"


def test_characters_model_apis_refuse_become_underscores_and_long_names_are_cut() -> None:
    assert tool_name("fs", "read.file/v2") == "fs__read_file_v2"
    assert len(tool_name("server", "x" * 200)) == 64
