"""Configuration (DESIGN §10): data models, loading and small careful edits of config files.

Files, later ones win: the user's ``config.toml`` (``$XDG_CONFIG_HOME/agent-tui``), the
workspace's ``.mcp.json`` (MCP servers only, Claude Code's format), then the workspace's
``agent-tui.toml``. Tables merge key by key; ``[permissions]`` lists are concatenated; an MCP
server is taken whole from the last file that names it. ``AGENT_TUI_MODEL`` overrides
``defaults.model``; ``MCP_TIMEOUT`` (milliseconds, as in Claude Code) is the ``startup_timeout``
of the MCP servers that do not set one. Every problem is a ``ConfigError`` naming the file, the
line and the key.

Config files are edited with ``tomlkit`` (``runtime.config_edit``), so comments and layout
survive; writes are atomic (temp file, then rename).
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from runtime.errors import ConfigError, InvalidInput
from runtime.fileio import write_text_atomically
from runtime.hooks import HooksConfig
from runtime.locations import CONFIG_FILE_NAME as CONFIG_FILE_NAME
from runtime.locations import ENV_DB as ENV_DB
from runtime.locations import resolve_db_path as resolve_db_path
from runtime.locations import user_config_path as user_config_path

if TYPE_CHECKING:
    from runtime.models import Run

logger = logging.getLogger(__name__)


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Defaults(_Config):
    model: str | None = None
    """Model reference for new runs; None means: Claude when ANTHROPIC_API_KEY is set, else demo."""
    agent: str = "default"
    theme: str | None = None
    auto_resume: bool = False
    max_steps: int = Field(default=50, ge=1, le=10_000)
    job_step_budget: int = Field(default=200, ge=1)
    """Steps all runs of one job may take together (stops runaway delegation chains)."""
    max_parallel_tools: int = Field(default=4, ge=1, le=64)
    notify: Literal["bell", "desktop", "both", "off"] = "both"
    """When a run waits for input unseen: ring the bell, a desktop notification, both, none."""
    compact_at: float = Field(default=0.8, gt=0, le=1)
    """Compact the history when a request would exceed this share of the context window."""
    context_window: int | None = Field(default=None, ge=1000)
    """Tokens the model sees at most; None: what the provider says for the model."""


class AgentConfig(_Config):
    instructions: str = ""
    model: str | None = None
    tools: list[str] | None = None
    """Tool names or patterns this agent may use; None means every tool."""
    delegates: list[str] = []
    max_steps: int | None = Field(default=None, ge=1)
    description: str = ""
    """What the agent does, shown to parents that may delegate to it."""

    def model_after(self, name: str, previous: Run | None) -> str | None:
        """The model of a follow-up in which agent ``name`` (this one) answers after the job's
        ``previous`` root run: that run's model while the agent stays (a model chosen for the
        job stays with it), else this agent's own (None: the default model)."""
        if previous is not None and previous.agent == name:
            return previous.model
        return self.model


STARTUP_TIMEOUT = 10.0
"""Seconds an MCP server may take to start unless its ``startup_timeout`` says otherwise (what
Codex uses; a server that never speaks MCP is said to be broken after this long)."""


class StdioServerConfig(_Config):
    type: Literal["stdio"] = "stdio"
    command: str
    args: list[str] = []
    env: dict[str, str] = {}
    cwd: str | None = None
    timeout: float = Field(default=60.0, gt=0)
    """Seconds one tool call may take before the server is considered hung."""
    startup_timeout: float = Field(default=STARTUP_TIMEOUT, gt=0)
    """Seconds the server may take to start (process or connection, MCP handshake, tool list)."""


class HttpServerConfig(_Config):
    type: Literal["http"] = "http"
    url: str
    headers: dict[str, str] = {}
    timeout: float = Field(default=60.0, gt=0)
    startup_timeout: float = Field(default=STARTUP_TIMEOUT, gt=0)
    oauth: bool = False
    """Sign in with OAuth (authorization code with PKCE); tokens are kept outside the database."""


class SseServerConfig(_Config):
    """A legacy server over HTTP with Server-Sent Events (the 2024-11-05 transport)."""

    type: Literal["sse"] = "sse"
    url: str
    headers: dict[str, str] = {}
    timeout: float = Field(default=60.0, gt=0)
    startup_timeout: float = Field(default=STARTUP_TIMEOUT, gt=0)


McpServerConfig = Annotated[
    StdioServerConfig | HttpServerConfig | SseServerConfig, Field(discriminator="type")
]


class Permissions(_Config):
    allow: list[str] = []
    ask: list[str] = []
    deny: list[str] = []
    shell_network: bool = False
    """Sandboxed ``shell`` commands may use the network (off by default)."""


class Config(_Config):
    defaults: Defaults = Defaults()
    agents: dict[str, AgentConfig] = {}
    mcp_servers: dict[str, McpServerConfig] = {}
    permissions: Permissions = Permissions()
    hooks: HooksConfig = HooksConfig()
    sources: list[str] = []
    """The files this config was read from, in order (later ones won)."""
    folder: str | None = None
    """The workspace whose files ``load_config`` looked for (None: a config a program gave,
    never read again). Read from no file, ``sources`` is empty: one made later counts."""
    warnings: list[str] = []
    """Problems that do not stop loading (e.g. an unset ``${VAR}`` in an MCP server entry)."""

    def check_agent(self, name: str) -> None:
        """InvalidInput naming the agents there are, unless ``name`` is one of them."""
        known = {"default", *self.agents}
        if name not in known:
            agents = ", ".join(sorted(known))
            raise InvalidInput(f"unknown agent {name!r}; configured agents: {agents}")

    def check_agent_model(
        self, name: str, workspace: Path, *, env: Mapping[str, str] | None = None
    ) -> None:
        """ConfigError naming the file, line and key (``agents.NAME.model``) when agent
        ``name``'s own model cannot be used (unknown provider, no model, no key): what its new
        jobs would be refused with at the first task. Nothing for an agent without a model of
        its own. Cheap: no provider's SDK is imported."""
        agent = self.agents.get(name)
        if agent is None or agent.model is None:
            return
        from runtime.model_refs import check_reference

        try:
            check_reference(agent.model, env=env)
        except ConfigError as exc:
            loc = ("agents", name, "model")
            raise located_error(exc.message, loc, workspace, env=env) from None


# === loading ===================================================================================

MCP_JSON_NAME = ".mcp.json"
ENV_MODEL = "AGENT_TUI_MODEL"
ENV_MCP_TIMEOUT = "MCP_TIMEOUT"
"""Milliseconds an MCP server may take to start when its entry sets no ``startup_timeout``
(the variable Claude Code reads for the same)."""

_RESERVED_KEYS = ("sources", "folder", "warnings")
"""Fields of ``Config`` filled by the loader, not by a file."""


def workspace_config_path(workspace: Path) -> Path:
    return Path(workspace) / CONFIG_FILE_NAME


def config_files(workspace: Path, env: Mapping[str, str] | None = None) -> tuple[Path, ...]:
    """The files ``load_config`` reads for ``workspace``, in its order."""
    return (
        user_config_path(os.environ if env is None else env),
        Path(workspace) / MCP_JSON_NAME,
        workspace_config_path(Path(workspace)),
    )


def load_config(
    workspace: Path,
    *,
    user_config: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> Config:
    """Read the user config, the workspace's ``.mcp.json`` and ``agent-tui.toml`` (later wins)
    and the environment. Raises ``ConfigError`` naming file, line and key."""
    env = os.environ if env is None else env
    user_path = user_config if user_config is not None else user_config_path(env)
    layers: list[tuple[Path, dict[str, Any]]] = []
    scanned: list[tuple[Path, list[_TomlItem]]] = []
    warnings: list[str] = []

    for path, kind in (
        (user_path, "toml"),
        (Path(workspace) / MCP_JSON_NAME, "json"),
        (workspace_config_path(Path(workspace)), "toml"),
    ):
        text = _read_config_text(path)
        if text is None:
            continue
        if kind == "toml":
            raw, items = _validated_toml(text, path)
            scanned.append((path, items))
        else:
            raw = {"mcp_servers": _parse_mcp_json(text, path, warnings)}
        _expand_server_variables(raw, path, env, warnings)
        layers.append((path, raw))

    merged: dict[str, Any] = {}
    for _, raw in layers:
        merged = _merge_layers(merged, raw)
    model_override = env.get(ENV_MODEL, "").strip()
    if model_override:
        merged.setdefault("defaults", {})
        merged["defaults"] = {**merged["defaults"], "model": model_override}
    startup_timeout, problem = env_startup_timeout(env)
    if problem is not None:
        warnings.append(problem)
    if startup_timeout is not None:
        for server in merged.get("mcp_servers", {}).values():
            if isinstance(server, dict):
                server.setdefault("startup_timeout", startup_timeout)
    merged["sources"] = [str(path) for path, _ in layers]
    merged["folder"] = str(workspace)
    merged["warnings"] = warnings
    try:
        config = Config.model_validate(merged)
    except ValidationError as exc:
        loc, message = _first_problem(exc)
        key = _dotted(loc)
        raise ConfigError(
            message + _more(exc),
            file=ENV_MODEL if loc[:2] == ("defaults", "model") and model_override else None,
            key=key,
        ) from None
    _check_references(config, scanned)
    return config


def env_startup_timeout(env: Mapping[str, str]) -> tuple[float | None, str | None]:
    """``MCP_TIMEOUT`` in seconds (None when it is unset or not a positive number of
    milliseconds), and the warning for a value that is not."""
    text = env.get(ENV_MCP_TIMEOUT, "").strip()
    if not text:
        return None, None
    try:
        milliseconds = float(text)
    except ValueError:
        milliseconds = math.nan
    seconds = milliseconds / 1000
    # Checked in seconds: a few milliseconds past zero (5e-324) make 0 s, which the config
    # would refuse as the servers' own startup_timeout instead of warning.
    if math.isfinite(seconds) and seconds > 0:
        return seconds, None
    return None, (
        f"{ENV_MCP_TIMEOUT}={text!r} is not a positive number of milliseconds; MCP servers get"
        f" the default {STARTUP_TIMEOUT:g} s to start"
    )


def redacted(config: Config) -> dict[str, Any]:
    """The config as plain data with MCP header and environment values hidden (for display)."""
    data = config.model_dump(mode="json")
    for server in data.get("mcp_servers", {}).values():
        for field_name in ("headers", "env"):
            if isinstance(server.get(field_name), dict):
                server[field_name] = {name: "***" for name in server[field_name]}
    return data


# --- reading and validating one file ------------------------------------------------------------


def _read_config_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise ConfigError("is a folder, not a config file", file=str(path)) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"is not UTF-8 text ({exc.reason})", file=str(path)) from None
    except OSError as exc:
        raise ConfigError(f"cannot be read ({exc.strerror})", file=str(path)) from None


_TOML_WHERE = re.compile(r"\s*\(at line (\d+), column (\d+)\)\s*$")
_TOML_AT_END = re.compile(r"\s*\(at end of document\)\s*$")


def _parse_toml(text: str, path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        line: int | None = None
        found = _TOML_WHERE.search(message)
        if found:
            line = int(found.group(1))
            message = f"{message[: found.start()]} (column {found.group(2)})"
        elif _TOML_AT_END.search(message):
            line = text.count("\n") + (0 if text.endswith("\n") else 1)
            message = _TOML_AT_END.sub(" (at the end of the file)", message)
        raise ConfigError(f"invalid TOML: {message}", file=str(path), line=line) from None


_SECTION_FIELDS: dict[str, tuple[str, ...]] = {
    "": tuple(name for name in Config.model_fields if name not in _RESERVED_KEYS),
    "defaults": tuple(Defaults.model_fields),
    "agents.*": tuple(AgentConfig.model_fields),
    "mcp_servers.*": tuple(
        dict.fromkeys(
            [
                *StdioServerConfig.model_fields,
                *HttpServerConfig.model_fields,
                *SseServerConfig.model_fields,
            ]
        )
    ),
    "permissions": tuple(Permissions.model_fields),
    "hooks": tuple(HooksConfig.model_fields),
}


def _allowed_keys(parent: tuple[str | int, ...]) -> tuple[str, ...] | None:
    if not parent:
        return _SECTION_FIELDS[""]
    if len(parent) == 1:
        return _SECTION_FIELDS.get(str(parent[0]))
    if len(parent) == 2:
        return _SECTION_FIELDS.get(f"{parent[0]}.*")
    return None


def _clean_loc(loc: tuple[str | int, ...]) -> tuple[str | int, ...]:
    """Drop the discriminator tag pydantic puts in the location of a tagged-union error."""
    if len(loc) > 2 and loc[0] == "mcp_servers" and loc[2] in ("stdio", "http", "sse"):
        return loc[:2] + loc[3:]
    return loc


def _first_problem(exc: ValidationError) -> tuple[tuple[str | int, ...], str]:
    error = exc.errors(include_url=False)[0]
    loc = _clean_loc(tuple(error["loc"]))
    if error["type"] == "extra_forbidden":
        allowed = _allowed_keys(loc[:-1])
        message = "unknown key"
        if allowed:
            message += f" (expected one of: {', '.join(allowed)})"
        return loc, message
    return loc, str(error["msg"])


def _more(exc: ValidationError) -> str:
    extra = exc.error_count() - 1
    return f" (and {extra} more problem{'s' if extra > 1 else ''})" if extra > 0 else ""


def _dotted(loc: Sequence[str | int]) -> str:
    parts: list[str] = []
    for part in loc:
        if isinstance(part, int):
            parts.append(f"[{part}]")
        elif parts:
            parts.append(f".{part}")
        else:
            parts.append(str(part))
    return "".join(parts)


def _validate_layer(
    raw: dict[str, Any],
    path: Path,
    find_line: Callable[[tuple[str | int, ...]], int | None],
) -> None:
    for reserved in _RESERVED_KEYS:
        if reserved in raw:
            loc: tuple[str | int, ...] = (reserved,)
            raise ConfigError(
                f"unknown key (expected one of: {', '.join(_SECTION_FIELDS[''])})",
                file=str(path),
                line=find_line(loc),
                key=reserved,
            )
    try:
        Config.model_validate(raw)
    except ValidationError as exc:
        loc, message = _first_problem(exc)
        raise ConfigError(
            message + _more(exc), file=str(path), line=find_line(loc), key=_dotted(loc)
        ) from None


# --- .mcp.json (Claude Code's format) ---------------------------------------------------------

_HTTP_TYPES = ("http", "streamable-http", "streamableHttp", "streamable_http")
_SERVER_ADAPTER: TypeAdapter[StdioServerConfig | HttpServerConfig | SseServerConfig] = TypeAdapter(
    McpServerConfig
)
_SERVER_TYPES = ("stdio", "http", "sse")


def _with_server_type(entry: dict[str, Any]) -> dict[str, Any]:
    """The entry with ``type`` filled in (stdio when it has a command, http when it has only a
    url) and HTTP spellings of other tools (``streamable-http``, ``streamableHttp``) accepted."""
    entry = dict(entry)
    kind = entry.get("type")
    if kind is None:
        kind = "http" if "url" in entry and "command" not in entry else "stdio"
    if kind in _HTTP_TYPES:
        kind = "http"
    if kind in ("SSE", "server-sent-events"):
        kind = "sse"
    entry["type"] = kind
    return entry


def _line_in_json(text: str, loc: Sequence[str | int]) -> int | None:
    """Best effort: the line where the quoted keys of ``loc`` appear one after another."""
    position = 0
    found: int | None = None
    for part in loc:
        if isinstance(part, int):
            break
        index = text.find(json.dumps(part), position)
        if index < 0:
            break
        found = index
        position = index + 1
    return None if found is None else text.count("\n", 0, found) + 1


def _parse_mcp_json(
    text: str, path: Path, warnings: list[str] | None = None
) -> dict[str, dict[str, Any]]:
    """The servers of a ``.mcp.json`` file, as raw entries in ``mcp_servers`` form.

    The file is shared with other tools, so an entry agent-tui cannot use (an unknown type,
    ``"disabled": true``, a value that does not fit) is skipped and an unknown key is ignored,
    each with a warning naming file, line and key; only a file that is not a JSON object of
    servers is an error."""
    file = str(path)
    warnings = [] if warnings is None else warnings

    def warn(message: str, where: Sequence[str | int]) -> None:
        line = _line_in_json(text, where)
        location = f"{file}:{line}" if line is not None else file
        warnings.append(f"{location}: {_dotted(where)}: {message}")
        logger.warning("%s: %s: %s", location, _dotted(where), message)

    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"invalid JSON: {exc.msg} (column {exc.colno})", file=file, line=exc.lineno
        ) from None
    if not isinstance(data, dict):
        raise ConfigError('expected a JSON object like {"mcpServers": {...}}', file=file, line=1)
    servers = data.get("mcpServers")
    if servers is None:
        return {}
    if not isinstance(servers, dict):
        raise ConfigError(
            "must be an object of servers by name",
            file=file,
            line=_line_in_json(text, ["mcpServers"]),
            key="mcpServers",
        )
    result: dict[str, dict[str, Any]] = {}
    allowed = set(_SECTION_FIELDS["mcp_servers.*"])
    for name, entry in servers.items():
        where: list[str | int] = ["mcpServers", name]
        if not isinstance(entry, dict):
            warn("not an object with command/args/env or type/url/headers; skipped", where)
            continue
        if entry.get("disabled") is True:
            warn("disabled; skipped", [*where, "disabled"])
            continue
        entry = _with_server_type(entry)
        kind = entry.get("type")
        if kind not in _SERVER_TYPES:
            warn(
                f"unknown server type {kind!r} (expected stdio, http or sse); skipped",
                [*where, "type"],
            )
            continue
        for key in [key for key in entry if key not in allowed]:
            if key != "disabled":
                warn("unknown key, ignored", [*where, key])
            del entry[key]
        try:
            _SERVER_ADAPTER.validate_python(entry)
        except ValidationError as exc:
            error = exc.errors(include_url=False)[0]
            loc = tuple(error["loc"])
            if loc and loc[0] in _SERVER_TYPES:
                loc = loc[1:]
            warn(f"{error['msg']}{_more(exc)}; skipped", [*where, *loc])
            continue
        result[str(name)] = entry
    return result


# --- ${VAR} in MCP server entries -----------------------------------------------------------

_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def _expand_server_variables(
    raw: dict[str, Any], path: Path, env: Mapping[str, str], warnings: list[str]
) -> None:
    """Expand ``${VAR}`` and ``${VAR:-default}`` in MCP server entries, as Claude Code does, so
    tokens can stay in the environment instead of the file. An unset variable is left as is
    and reported in ``Config.warnings`` (the server then fails clearly when used)."""
    servers = raw.get("mcp_servers")
    if not isinstance(servers, dict):
        return

    def expand(value: str, where: str) -> str:
        def replace(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            if name in env:
                return env[name]
            if default is not None:
                return default
            warning = f"{path}: {where}: environment variable {name} is not set"
            warnings.append(warning)
            logger.warning("%s", warning)
            return match.group(0)

        return _VARIABLE.sub(replace, value)

    for name, entry in servers.items():
        if not isinstance(entry, dict):
            continue
        for field_name in ("command", "url", "cwd"):
            if isinstance(entry.get(field_name), str):
                entry[field_name] = expand(entry[field_name], f"mcp_servers.{name}.{field_name}")
        if isinstance(entry.get("args"), list):
            entry["args"] = [
                expand(arg, f"mcp_servers.{name}.args") if isinstance(arg, str) else arg
                for arg in entry["args"]
            ]
        for field_name in ("env", "headers"):
            table = entry.get(field_name)
            if isinstance(table, dict):
                entry[field_name] = {
                    key: expand(value, f"mcp_servers.{name}.{field_name}.{key}")
                    if isinstance(value, str)
                    else value
                    for key, value in table.items()
                }


# --- merging ------------------------------------------------------------------------------------


def _merge_tables(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    result = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = _merge_tables(result[key], value)
        else:
            result[key] = value
    return result


def _merge_layers(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    result = dict(base)
    for key, value in over.items():
        if key == "mcp_servers" and isinstance(value, dict):
            # A server is taken whole from the last file naming it: mixing the fields of a
            # stdio and an http definition would make no sense.
            result[key] = {**result.get(key, {}), **value}
        elif key == "permissions" and isinstance(value, dict):
            lists = dict(result.get(key, {}))
            for rule_kind, patterns in value.items():
                if not isinstance(patterns, list):  # shell_network: the later file wins
                    lists[rule_kind] = patterns
                    continue
                combined = [*lists.get(rule_kind, []), *patterns]
                lists[rule_kind] = list(dict.fromkeys(combined))
            result[key] = lists
        elif key == "hooks" and isinstance(value, dict):
            # The user's hooks and the workspace's both run: the lists are concatenated.
            hooks = dict(result.get(key, {}))
            for event, entries in value.items():
                earlier = hooks.get(event, [])
                if isinstance(entries, list) and isinstance(earlier, list):
                    hooks[event] = [*earlier, *entries]
                else:
                    hooks[event] = entries
            result[key] = hooks
        elif isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = _merge_tables(result[key], value)
        else:
            result[key] = value
    return result


def located_error(
    message: str,
    loc: tuple[str | int, ...],
    workspace: Path,
    *,
    env: Mapping[str, str] | None = None,
) -> ConfigError:
    """A problem with the value at ``loc`` (``("agents", "x", "model")``) found after loading,
    as a ConfigError naming the TOML file and line that set it (the last one: later files
    win), else the key alone."""
    for path in reversed(config_files(workspace, env)):
        if path.suffix != ".toml":
            continue
        try:
            text = _read_config_text(path)
        except ConfigError:
            continue
        line = _line_in_toml(_scan_toml_safely(text or ""), loc, exact=True)
        if line is not None:
            return ConfigError(message, file=str(path), line=line, key=_dotted(loc))
    return ConfigError(message, key=_dotted(loc))


def _check_references(config: Config, scanned: list[tuple[Path, list[_TomlItem]]]) -> None:
    """Agents named by ``defaults.agent`` and ``delegates`` must exist."""
    known = {"default", *config.agents}

    def fail(message: str, loc: tuple[str | int, ...]) -> None:
        for path, items in reversed(scanned):
            line = _line_in_toml(items, loc, exact=True)
            if line is not None:
                raise ConfigError(message, file=str(path), line=line, key=_dotted(loc))
        raise ConfigError(message, key=_dotted(loc))

    if config.defaults.agent not in known:
        fail(
            f"no agent named {config.defaults.agent!r} (defined: {', '.join(sorted(known))})",
            ("defaults", "agent"),
        )
    for agent_name, agent in config.agents.items():
        for delegate in agent.delegates:
            if delegate not in known:
                fail(
                    f"no agent named {delegate!r} to delegate to "
                    f"(defined: {', '.join(sorted(known))})",
                    ("agents", agent_name, "delegates"),
                )
            if delegate == agent_name:
                fail("an agent cannot delegate to itself", ("agents", agent_name, "delegates"))


# === TOML as text: locating keys (for error messages) =========================================


@dataclass(frozen=True)
class _TomlItem:
    """One table header or key/value of a TOML text, with where it sits."""

    path: tuple[str | int, ...]
    """Keys, and the index of each array-of-tables element (``[[hooks.before_tool]]``): the
    location pydantic reports."""
    line: int
    start: int
    is_header: bool
    value_start: int = -1
    value_end: int = -1
    elements: tuple[tuple[int, int], ...] | None = None
    """For an array value: the spans of its elements."""
    element_lines: tuple[int, ...] = ()


_BARE_KEY = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


class _TomlScanner:
    """A small scanner over a text tomllib already accepted; it only finds where things are."""

    def __init__(self, text: str) -> None:
        self.text = text

    def line_of(self, offset: int) -> int:
        return self.text.count("\n", 0, offset) + 1

    def skip_space(self, i: int, *, newlines: bool) -> int:
        text = self.text
        while i < len(text):
            char = text[i]
            if char in " \t" or (newlines and char in "\r\n"):
                i += 1
            elif char == "#" and newlines:
                end = text.find("\n", i)
                i = len(text) if end < 0 else end
            else:
                break
        return i

    def string_end(self, i: int) -> int:
        text = self.text
        for quote in ('"""', "'''"):
            if text.startswith(quote, i):
                k = i + 3
                while True:
                    if quote == '"""' and text[k] == "\\":
                        k += 2
                    elif text.startswith(quote, k):
                        end = k + 3
                        while end < len(text) and text[end] == quote[0] and end < k + 5:
                            end += 1
                        return end
                    else:
                        k += 1
        if text[i] == "'":
            return text.index("'", i + 1) + 1
        k = i + 1
        while text[k] != '"':
            k += 2 if text[k] == "\\" else 1
        return k + 1

    def key(self, i: int) -> tuple[list[str], int]:
        text = self.text
        parts: list[str] = []
        while True:
            i = self.skip_space(i, newlines=False)
            if text[i] in "\"'":
                end = self.string_end(i)
                parts.append(str(tomllib.loads(f"k = {text[i:end]}")["k"]))
                i = end
            else:
                start = i
                while i < len(text) and text[i] in _BARE_KEY:
                    i += 1
                parts.append(text[start:i])
            i = self.skip_space(i, newlines=False)
            if i < len(text) and text[i] == ".":
                i += 1
                continue
            return parts, i

    def value_end(self, i: int) -> tuple[int, tuple[tuple[int, int], ...] | None]:
        text = self.text
        char = text[i]
        if char in "\"'":
            return self.string_end(i), None
        if char == "[":
            elements: list[tuple[int, int]] = []
            k = i + 1
            while True:
                k = self.skip_space(k, newlines=True)
                if text[k] == "]":
                    return k + 1, tuple(elements)
                start = k
                k, _ = self.value_end(k)
                elements.append((start, k))
                k = self.skip_space(k, newlines=True)
                if text[k] == ",":
                    k += 1
        if char == "{":
            k = i + 1
            while True:
                k = self.skip_space(k, newlines=True)
                if text[k] == "}":
                    return k + 1, None
                _, k = self.key(k)
                k = self.skip_space(k + 1, newlines=False)  # past '='
                k, _ = self.value_end(k)
                k = self.skip_space(k, newlines=True)
                if text[k] == ",":
                    k += 1
        k = i
        while k < len(text) and text[k] not in ",]}\n#":
            k += 1
        while k > i and text[k - 1] in " \t\r":
            k -= 1
        return k, None

    def items(self) -> list[_TomlItem]:
        text = self.text
        found: list[_TomlItem] = []
        table: tuple[str | int, ...] = ()
        arrays: dict[tuple[str | int, ...], int] = {}
        """Each array of tables → the index of its last element so far."""

        def resolved(parts: list[str]) -> tuple[str | int, ...]:
            path: tuple[str | int, ...] = ()
            for part in parts:
                path += (part,)
                if path in arrays:  # a table under an array's element: its last one
                    path += (arrays[path],)
            return path

        i = 0
        while True:
            i = self.skip_space(i, newlines=True)
            if i >= len(text):
                return found
            if text[i] == "[":
                double = text.startswith("[[", i)
                parts, k = self.key(i + (2 if double else 1))
                k = text.index("]", k) + (2 if double else 1)
                if double:
                    array = (*resolved(parts[:-1]), parts[-1])
                    arrays[array] = arrays.get(array, -1) + 1
                    table = (*array, arrays[array])
                else:
                    table = resolved(parts)
                found.append(_TomlItem(path=table, line=self.line_of(i), start=i, is_header=True))
                i = k
                continue
            parts, k = self.key(i)
            k = self.skip_space(k + 1, newlines=False)  # past '='
            end, elements = self.value_end(k)
            found.append(
                _TomlItem(
                    path=table + tuple(parts),
                    line=self.line_of(i),
                    start=i,
                    is_header=False,
                    value_start=k,
                    value_end=end,
                    elements=elements,
                    element_lines=tuple(self.line_of(s) for s, _ in elements or ()),
                )
            )
            i = end


def _scan_toml_safely(text: str) -> list[_TomlItem]:
    """Items of a valid TOML text; an empty list if the scanner trips (line numbers are a
    best effort, never a reason to fail)."""
    try:
        return _TomlScanner(text).items()
    except (IndexError, ValueError, tomllib.TOMLDecodeError):
        return []


def _line_in_toml(
    items: list[_TomlItem], loc: Sequence[str | int], *, exact: bool = False
) -> int | None:
    """The line of the deepest header or key that ``loc`` runs through."""
    target = list(loc)
    best: _TomlItem | None = None
    best_length = -1
    for item in items:
        length = len(item.path)
        if length > len(target) or list(item.path) != target[:length]:
            continue
        if length > best_length or (length == best_length and best and best.is_header):
            best, best_length = item, length
    if best is None:
        return None
    keys = [part for part in best.path if isinstance(part, str)]
    if exact and len(keys) < len([part for part in loc if isinstance(part, str)]):
        return None
    line = best.line
    if (
        not best.is_header
        and best.elements
        and best_length < len(target)
        and isinstance(target[best_length], int)
    ):
        index = int(target[best_length])
        if 0 <= index < len(best.element_lines):
            line = best.element_lines[index]
    return line


def read_toml_file(path: Path) -> tuple[str, dict[str, Any]]:
    """The text of a TOML file and its parsed content (``""`` and ``{}`` when it does not
    exist); a broken file is a ConfigError naming file and line, so it is never overwritten."""
    text = _read_config_text(path) or ""
    return text, (_parse_toml(text, path) if text.strip() else {})


def _validated_toml(text: str, path: Path) -> tuple[dict[str, Any], list[_TomlItem]]:
    """The parsed file and its scanned items, or ConfigError naming file, line and key."""
    raw = _parse_toml(text, path)
    items = _scan_toml_safely(text)
    servers = raw.get("mcp_servers")
    if isinstance(servers, dict):
        for name, entry in servers.items():
            if isinstance(entry, dict):
                servers[name] = _with_server_type(entry)

    def find_line(loc: tuple[str | int, ...]) -> int | None:
        return _line_in_toml(items, loc)

    _validate_layer(raw, path, find_line)
    return raw, items


def save_user_setting(
    section: str,
    key: str,
    value: Any,
    *,
    path: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> Path:
    """Persist ``[section] key = value`` in the user config (e.g. the chosen theme), keeping
    the rest of the file as it was. Refuses (ConfigError) a value the config would reject."""
    target = path if path is not None else user_config_path(env)
    from runtime.config_edit import set_toml_value  # tomlkit: only when a file is edited

    text, _ = read_toml_file(target)
    edited = set_toml_value(text, (section,), key, value, path=target)
    _validated_toml(edited, target)
    write_text_atomically(target, edited)
    return target
