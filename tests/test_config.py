"""Configuration loading (DESIGN §10): precedence, environment, .mcp.json, and errors that name
the file, the line and the key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtime.config import (
    Config,
    HttpServerConfig,
    StdioServerConfig,
    load_config,
    redacted,
    resolve_db_path,
    save_user_setting,
    user_config_path,
)
from runtime.errors import ConfigError


@pytest.fixture
def user_file(tmp_path: Path) -> Path:
    return tmp_path / "user" / "config.toml"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def load(workspace: Path, user_file: Path, env: dict[str, str] | None = None) -> Config:
    return load_config(workspace, user_config=user_file, env=env or {})


# --- precedence -----------------------------------------------------------------------------


def test_no_files_give_the_defaults(workspace: Path, user_file: Path) -> None:
    config = load(workspace, user_file)
    assert config.defaults.model is None
    assert config.defaults.agent == "default"
    assert config.sources == []


def test_the_workspace_file_wins_over_the_user_file_key_by_key(
    workspace: Path, user_file: Path
) -> None:
    write(user_file, '[defaults]\nmodel = "anthropic:claude-sonnet-4-5"\ntheme = "nord"\n')
    write(workspace / "agent-tui.toml", '[defaults]\nmodel = "demo"\n')
    config = load(workspace, user_file)
    assert config.defaults.model == "demo"
    assert config.defaults.theme == "nord"
    assert config.sources == [str(user_file), str(workspace / "agent-tui.toml")]


def test_agents_merge_field_by_field(workspace: Path, user_file: Path) -> None:
    write(user_file, '[agents.coder]\ninstructions = "Write code."\nmax_steps = 9\n')
    write(workspace / "agent-tui.toml", '[agents.coder]\nmodel = "demo"\n')
    coder = load(workspace, user_file).agents["coder"]
    assert (coder.instructions, coder.model, coder.max_steps) == ("Write code.", "demo", 9)


def test_permission_lists_are_concatenated(workspace: Path, user_file: Path) -> None:
    write(user_file, '[permissions]\nallow = ["read_file"]\ndeny = ["shell"]\n')
    write(workspace / "agent-tui.toml", '[permissions]\nallow = ["write_*", "read_file"]\n')
    permissions = load(workspace, user_file).permissions
    assert permissions.allow == ["read_file", "write_*"]
    assert permissions.deny == ["shell"]


def test_the_user_config_lives_under_xdg_config_home(tmp_path: Path) -> None:
    env = {"XDG_CONFIG_HOME": str(tmp_path / "xdg"), "HOME": str(tmp_path / "home")}
    assert user_config_path(env) == tmp_path / "xdg" / "agent-tui" / "config.toml"
    assert user_config_path({"HOME": str(tmp_path / "home")}) == (
        tmp_path / "home" / ".config" / "agent-tui" / "config.toml"
    )


def test_load_config_reads_the_xdg_user_file_by_default(workspace: Path, tmp_path: Path) -> None:
    write(tmp_path / "xdg" / "agent-tui" / "config.toml", '[defaults]\ntheme = "gruvbox"\n')
    config = load_config(workspace, env={"XDG_CONFIG_HOME": str(tmp_path / "xdg")})
    assert config.defaults.theme == "gruvbox"


# --- environment ----------------------------------------------------------------------------


def test_agent_tui_model_overrides_the_files(workspace: Path, user_file: Path) -> None:
    write(workspace / "agent-tui.toml", '[defaults]\nmodel = "demo"\n')
    config = load(workspace, user_file, {"AGENT_TUI_MODEL": "openai:llama3.1"})
    assert config.defaults.model == "openai:llama3.1"


def test_the_database_path_follows_flag_then_env_then_xdg(tmp_path: Path) -> None:
    env = {"AGENT_TUI_DB": str(tmp_path / "env.db"), "XDG_DATA_HOME": str(tmp_path / "data")}
    assert resolve_db_path(str(tmp_path / "flag.db"), env) == tmp_path / "flag.db"
    assert resolve_db_path(None, env) == tmp_path / "env.db"
    assert resolve_db_path(None, {"XDG_DATA_HOME": str(tmp_path / "data")}) == (
        tmp_path / "data" / "agent-tui" / "agent-tui.db"
    )
    assert resolve_db_path(None, {"HOME": str(tmp_path)}) == (
        tmp_path / ".local" / "share" / "agent-tui" / "agent-tui.db"
    )


# --- .mcp.json ------------------------------------------------------------------------------


def test_mcp_json_servers_are_read_in_claude_code_format(workspace: Path, user_file: Path) -> None:
    write(
        workspace / ".mcp.json",
        json.dumps(
            {
                "mcpServers": {
                    "time": {"command": "mcp-server-time", "args": ["--local-timezone=UTC"]},
                    "files": {"type": "stdio", "command": "files", "env": {"A": "1"}},
                    "remote": {
                        "type": "http",
                        "url": "http://127.0.0.1:9/mcp",
                        "headers": {"Authorization": "Bearer ${TOKEN}"},
                    },
                    "streamed": {"type": "streamable-http", "url": "http://127.0.0.1:9/s"},
                    "camel": {"type": "streamableHttp", "url": "http://127.0.0.1:9/c"},
                }
            },
            indent=2,
        ),
    )
    servers = load(workspace, user_file, {"TOKEN": "t0k3n"}).mcp_servers
    assert servers["time"] == StdioServerConfig(
        command="mcp-server-time", args=["--local-timezone=UTC"]
    )
    assert servers["files"] == StdioServerConfig(command="files", env={"A": "1"})
    remote = servers["remote"]
    assert isinstance(remote, HttpServerConfig)
    assert remote.headers == {"Authorization": "Bearer t0k3n"}
    assert isinstance(servers["streamed"], HttpServerConfig)
    assert isinstance(servers["camel"], HttpServerConfig)


def test_agent_tui_toml_wins_over_mcp_json_on_a_name_clash(
    workspace: Path, user_file: Path
) -> None:
    write(workspace / ".mcp.json", '{"mcpServers": {"time": {"command": "from-json"}}}')
    write(workspace / "agent-tui.toml", '[mcp_servers.time]\ncommand = "from-toml"\n')
    config = load(workspace, user_file)
    assert config.mcp_servers["time"] == StdioServerConfig(command="from-toml")
    assert config.sources[-2:] == [
        str(workspace / ".mcp.json"),
        str(workspace / "agent-tui.toml"),
    ]


def test_an_unset_variable_is_kept_and_reported_as_a_warning(
    workspace: Path, user_file: Path
) -> None:
    write(
        workspace / ".mcp.json",
        '{"mcpServers": {"x": {"type": "http", "url": "http://h/${MISSING}", '
        '"headers": {"A": "${ALSO:-fallback}"}}}}',
    )
    config = load(workspace, user_file)
    server = config.mcp_servers["x"]
    assert isinstance(server, HttpServerConfig)
    assert server.url == "http://h/${MISSING}"
    assert server.headers == {"A": "fallback"}
    assert config.warnings == [
        f"{workspace / '.mcp.json'}: mcp_servers.x.url: environment variable MISSING is not set"
    ]


def test_redacted_config_hides_header_and_env_values(workspace: Path, user_file: Path) -> None:
    write(
        workspace / "agent-tui.toml",
        '[mcp_servers.r]\ntype = "http"\nurl = "http://h"\n'
        'headers = { Authorization = "sk-secret-123" }\n',
    )
    data = redacted(load(workspace, user_file))
    assert data["mcp_servers"]["r"]["headers"] == {"Authorization": "***"}
    assert "sk-secret-123" not in json.dumps(data)


# --- errors name file, line and key ---------------------------------------------------------


def error_of(workspace: Path, user_file: Path) -> str:
    with pytest.raises(ConfigError) as caught:
        load(workspace, user_file)
    assert caught.value.code == "config_error"
    return str(caught.value)


def test_bad_toml_syntax_names_the_file_and_line(workspace: Path, user_file: Path) -> None:
    path = write(workspace / "agent-tui.toml", '[defaults]\ntheme = "nord"\nmodel = \n')
    assert error_of(workspace, user_file) == f"{path}:3: invalid TOML: Invalid value (column 9)"


def test_an_out_of_range_value_names_file_line_and_key(workspace: Path, user_file: Path) -> None:
    path = write(
        workspace / "agent-tui.toml",
        '# settings\n\n[defaults]\nmodel = "demo"\n\n\nmax_steps = 0\n',
    )
    assert error_of(workspace, user_file) == (
        f"{path}:7: defaults.max_steps: Input should be greater than or equal to 1"
    )


def test_a_wrong_type_in_the_user_file_names_it(workspace: Path, user_file: Path) -> None:
    write(user_file, '[defaults]\nauto_resume = "sometimes"\n')
    message = error_of(workspace, user_file)
    assert message.startswith(f"{user_file}:2: defaults.auto_resume: Input should be a valid")


def test_an_error_in_a_nested_table_points_inside_that_table(
    workspace: Path, user_file: Path
) -> None:
    path = write(
        workspace / "agent-tui.toml",
        "[agents.writer]\nmax_steps = 5\n\n[agents.coder]\ninstructions = 'x'\nmax_steps = -1\n",
    )
    assert error_of(workspace, user_file) == (
        f"{path}:6: agents.coder.max_steps: Input should be greater than or equal to 1"
    )


def test_an_unknown_key_is_an_error_listing_the_known_ones(
    workspace: Path, user_file: Path
) -> None:
    path = write(workspace / "agent-tui.toml", '[defaults]\nmodel = "demo"\nthem = "nord"\n')
    message = error_of(workspace, user_file)
    assert message.startswith(f"{path}:3: defaults.them: unknown key (expected one of: model,")
    assert "theme" in message


def test_an_unknown_section_is_an_error(workspace: Path, user_file: Path) -> None:
    path = write(workspace / "agent-tui.toml", '\n[default]\nmodel = "demo"\n')
    assert error_of(workspace, user_file).startswith(f"{path}:2: default: unknown key")


def test_a_wrong_list_element_points_at_its_line(workspace: Path, user_file: Path) -> None:
    path = write(workspace / "agent-tui.toml", '[permissions]\nallow = [\n  "a",\n  3,\n]\n')
    assert error_of(workspace, user_file) == (
        f"{path}:4: permissions.allow[1]: Input should be a valid string"
    )


def test_a_server_missing_its_command_points_at_its_table(workspace: Path, user_file: Path) -> None:
    path = write(workspace / "agent-tui.toml", '[mcp_servers.time]\nargs = ["x"]\n')
    assert error_of(workspace, user_file) == (f"{path}:1: mcp_servers.time.command: Field required")


def test_a_server_gets_ten_seconds_to_start_unless_its_startup_timeout_says_otherwise(
    workspace: Path, user_file: Path
) -> None:
    write(
        workspace / "agent-tui.toml",
        '[mcp_servers.fast]\ncommand = "a"\n\n'
        '[mcp_servers.slow]\ncommand = "b"\nstartup_timeout = 45\n\n'
        '[mcp_servers.web]\ntype = "http"\nurl = "http://h"\nstartup_timeout = 2.5\n',
    )
    servers = load(workspace, user_file).mcp_servers
    assert {name: server.startup_timeout for name, server in servers.items()} == {
        "fast": 10.0,
        "slow": 45.0,
        "web": 2.5,
    }


def test_mcp_timeout_in_milliseconds_is_the_startup_timeout_of_servers_that_set_none(
    workspace: Path, user_file: Path
) -> None:
    """``MCP_TIMEOUT``, the variable Claude Code reads (milliseconds), was not read: every
    server without a ``startup_timeout`` got 10 s whatever it said."""
    write(
        workspace / ".mcp.json",
        json.dumps({"mcpServers": {"claude": {"command": "c"}}}),
    )
    write(
        workspace / "agent-tui.toml",
        '[mcp_servers.fast]\ncommand = "a"\n\n'
        '[mcp_servers.slow]\ncommand = "b"\nstartup_timeout = 45\n\n'
        '[mcp_servers.web]\ntype = "http"\nurl = "http://h"\n',
    )
    config = load(workspace, user_file, env={"MCP_TIMEOUT": "2500"})
    assert {name: server.startup_timeout for name, server in config.mcp_servers.items()} == {
        "claude": 2.5,
        "fast": 2.5,
        "slow": 45.0,  # its own startup_timeout wins over the variable
        "web": 2.5,
    }
    assert config.warnings == []


@pytest.mark.parametrize("value", ["soon", "0", "-500", "nan", "inf", "2.5s", "5e-324"])
def test_an_mcp_timeout_that_is_not_a_positive_number_warns_and_keeps_ten_seconds(
    workspace: Path, user_file: Path, value: str
) -> None:
    write(
        workspace / "agent-tui.toml",
        '[mcp_servers.fast]\ncommand = "a"\n\n'
        '[mcp_servers.slow]\ncommand = "b"\nstartup_timeout = 45\n',
    )
    config = load(workspace, user_file, env={"MCP_TIMEOUT": f" {value} "})
    assert {name: server.startup_timeout for name, server in config.mcp_servers.items()} == {
        "fast": 10.0,
        "slow": 45.0,
    }
    assert config.warnings == [
        f"MCP_TIMEOUT={value!r} is not a positive number of milliseconds; MCP servers get the"
        " default 10 s to start"
    ]


def test_a_startup_timeout_that_is_not_a_positive_number_points_at_its_line(
    workspace: Path, user_file: Path
) -> None:
    path = write(
        workspace / "agent-tui.toml", '[mcp_servers.time]\ncommand = "x"\nstartup_timeout = 0\n'
    )
    assert error_of(workspace, user_file) == (
        f"{path}:3: mcp_servers.time.startup_timeout: Input should be greater than 0"
    )


def test_a_misspelt_startup_timeout_is_an_unknown_key_that_names_the_right_one(
    workspace: Path, user_file: Path
) -> None:
    path = write(
        workspace / "agent-tui.toml",
        '[mcp_servers.time]\ncommand = "x"\nstartup_timeout_sec = 30\n',
    )
    message = error_of(workspace, user_file)
    assert message.startswith(f"{path}:3: mcp_servers.time.startup_timeout_sec: unknown key")
    assert "startup_timeout" in message.removeprefix(
        f"{path}:3: mcp_servers.time.startup_timeout_sec"
    )


def test_a_delegate_that_does_not_exist_is_named(workspace: Path, user_file: Path) -> None:
    path = write(
        workspace / "agent-tui.toml",
        '[agents.lead]\ninstructions = "x"\ndelegates = ["ghost"]\n',
    )
    message = error_of(workspace, user_file)
    assert message.startswith(f"{path}:3: agents.lead.delegates: no agent named 'ghost'")


def test_invalid_json_in_mcp_json_names_file_and_line(workspace: Path, user_file: Path) -> None:
    path = write(workspace / ".mcp.json", '{\n  "mcpServers": {\n    "a": {"command": "x",}\n')
    message = error_of(workspace, user_file)
    assert message.startswith(f"{path}:3: invalid JSON:")


def test_a_bad_server_in_mcp_json_is_skipped_naming_file_line_and_key(
    workspace: Path, user_file: Path
) -> None:
    path = write(
        workspace / ".mcp.json",
        '{\n  "mcpServers": {\n    "ok": {"command": "x"},\n    "web": {\n'
        '      "type": "http",\n      "url": 42\n    }\n  }\n}\n',
    )
    config = load_config(workspace, user_config=user_file, env={})
    assert set(config.mcp_servers) == {"ok"}
    assert config.warnings == [
        f"{path}:6: mcpServers.web.url: Input should be a valid string; skipped"
    ]


def test_an_sse_server_in_mcp_json_is_read(workspace: Path, user_file: Path) -> None:
    write(
        workspace / ".mcp.json",
        '{"mcpServers": {\n "old": {\n  "type": "sse",\n  "url": "http://h/sse"\n }\n}}',
    )
    config = load_config(workspace, user_config=user_file, env={})
    assert config.mcp_servers["old"].type == "sse"
    assert config.warnings == []


def test_entries_agent_tui_cannot_use_are_skipped_with_a_warning_and_the_rest_works(
    workspace: Path, user_file: Path
) -> None:
    path = write(
        workspace / ".mcp.json",
        '{"mcpServers": {\n'
        ' "a": {\n  "command": "x",\n  "arg": []\n },\n'
        ' "off": {"command": "y", "disabled": true},\n'
        ' "ws": {"type": "websocket", "url": "ws://h"},\n'
        ' "token": {"type": "http", "url": "http://h/mcp",\n'
        '   "headers": {"Authorization": "Bearer ${AGENT_TUI_TEST_UNSET_TOKEN}"}}\n'
        "}}",
    )
    config = load_config(workspace, user_config=user_file, env={})
    assert set(config.mcp_servers) == {"a", "token"}
    assert config.warnings == [
        f"{path}:4: mcpServers.a.arg: unknown key, ignored",
        f"{path}:6: mcpServers.off.disabled: disabled; skipped",
        f"{path}:7: mcpServers.ws.type: unknown server type 'websocket' "
        "(expected stdio, http or sse); skipped",
        f"{path}: mcp_servers.token.headers.Authorization: "
        "environment variable AGENT_TUI_TEST_UNSET_TOKEN is not set",
    ]


# --- remembering a user setting ---------------------------------------------------------------


def test_a_saved_user_setting_keeps_the_rest_of_the_file(tmp_path: Path, workspace: Path) -> None:
    user = write(
        tmp_path / "cfg" / "config.toml",
        '# my settings\n[defaults]\nmodel = "demo"  # offline\n\n[permissions]\nallow = ["x"]\n',
    )
    save_user_setting("defaults", "theme", "nord", path=user)
    assert user.read_text() == (
        '# my settings\n[defaults]\nmodel = "demo"  # offline\ntheme = "nord"\n\n'
        '[permissions]\nallow = ["x"]\n'
    )
    save_user_setting("defaults", "theme", "gruvbox", path=user)
    assert 'theme = "gruvbox"\n' in user.read_text()
    assert "nord" not in user.read_text()
    assert load_config(workspace, user_config=user, env={}).defaults.theme == "gruvbox"


def test_a_user_setting_creates_the_file_where_xdg_says(tmp_path: Path) -> None:
    env = {"XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    path = save_user_setting("defaults", "theme", "nord", env=env)
    assert path == tmp_path / "xdg" / "agent-tui" / "config.toml"
    assert path.read_text() == '[defaults]\ntheme = "nord"\n'


def test_an_invalid_user_setting_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    with pytest.raises(ConfigError, match=r"defaults.colour: unknown key"):
        save_user_setting("defaults", "colour", "red", path=path)
    assert not path.exists()


def test_a_broken_user_file_is_never_overwritten(tmp_path: Path) -> None:
    path = write(tmp_path / "config.toml", "[defaults\n")
    with pytest.raises(ConfigError, match=r"invalid TOML"):
        save_user_setting("defaults", "theme", "nord", path=path)
    assert path.read_text() == "[defaults\n"
