"""What a run may use: its agent, its model provider, its workspace's configuration, its tools
(built-in, MCP, delegates) and the approval policy over them."""

from __future__ import annotations

import contextlib
import difflib
import fnmatch
import logging
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from runtime.config import ENV_MODEL, AgentConfig, Config, Permissions, located_error
from runtime.engine.execution import ASK_USER, DELEGATE_PREFIX, ProviderFactory
from runtime.errors import ConfigError, ToolError
from runtime.fileio import FileStamp, file_stamp
from runtime.hooks import ClaudeHookReport, HooksConfig, files_stamp, hook_config_files
from runtime.hooks import FileStamp as HookFilesStamp
from runtime.mcp.names import SEPARATOR as MCP_SEPARATOR
from runtime.mcp.names import tool_name as mcp_tool_name
from runtime.providers.base import ModelProvider, ToolSpec
from runtime.skills import USE_SKILL_NAME, UseSkillTool, discover_skills
from runtime.tools.base import Tool, ToolContext, ToolOutput

if TYPE_CHECKING:
    from runtime.engine.hook_files import LoadedHooks
    from runtime.mcp.manager import McpManager
    from runtime.mcp.workspaces import WorkspaceManagers

log = logging.getLogger("runtime.engine")

Decision = Literal["allow", "ask", "deny"]
NoticeLevel = Literal["info", "warning", "error"]


def default_agent() -> AgentConfig:
    return AgentConfig(
        instructions=(
            "Work step by step. Use the tools to look before you answer. Ask the person with "
            "ask_user when a choice is theirs to make."
        ),
        description="The general-purpose agent.",
    )


def tool_allowed(agent: AgentConfig, name: str) -> bool:
    if agent.tools is None or name == ASK_USER:
        return True
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in agent.tools)


def unknown_tool_warnings(
    config: Config, agent_name: str, workspace: Path, builtin: Iterable[str]
) -> list[str]:
    """One warning per name in agent ``agent_name``'s ``tools`` that names no tool (a typo:
    the agent silently lacked it), with the file, line and key that set it and the closest
    known name. Patterns are not checked, nor the tool part of ``server__tool`` (a server's
    tools are known only once it starts); its server part is (``githb__*`` named no server)."""
    agent = config.agents.get(agent_name)
    if agent is None or agent.tools is None:
        return []
    known = sorted({*builtin, ASK_USER, USE_SKILL_NAME})
    delegates = {DELEGATE_PREFIX + name for name in ("default", *config.agents)}
    warnings = []
    for index, name in enumerate(agent.tools):
        if name in known or name in delegates:
            continue
        message = _unknown_tool(name, known, sorted(config.mcp_servers))
        if message is not None:
            loc = ("agents", agent_name, "tools", index)
            warnings.append(located_error(message, loc, workspace).message)
    return warnings


def _unknown_tool(name: str, known: list[str], servers: list[str]) -> str | None:
    """What is wrong with ``name`` of an agent's ``tools``, or None while it may name a tool.
    An MCP tool's name starts with its server's name as ``mcp_tool_name`` writes it (``my.srv``
    → ``my_srv__``), whatever the server's own tools turn out to be."""
    if MCP_SEPARATOR in name:
        prefixes = {mcp_tool_name(server, ""): server for server in servers}
        if any(name.startswith(prefix) for prefix in prefixes):
            return None
        server, tool = name.split(MCP_SEPARATOR, 1)
        if any(char in server for char in "*?["):
            return None
        close = difflib.get_close_matches(
            server, [p.removesuffix(MCP_SEPARATOR) for p in prefixes], n=1
        )
        hint = (
            f"did you mean {close[0] + MCP_SEPARATOR + tool!r}?"
            if close
            else f"servers: {', '.join(servers)}"
            if servers
            else "none is configured"
        )
        return f"no MCP server named {server!r} for {name!r} ({hint}); the agent runs without it"
    if any(char in name for char in "*?["):
        return None
    close = difflib.get_close_matches(name, known, n=1)
    hint = (
        f"did you mean {close[0]!r}?"
        if close
        else f"tools: {', '.join(known)}, and an MCP server's as server__tool"
    )
    return f"no tool named {name!r} ({hint}); the agent runs without it"


class DelegateTool:
    """A delegate agent as its parent sees it: a tool that takes a task."""

    read_only = False
    approval_default: Literal["allow"] = "allow"

    def __init__(self, agent_name: str, description: str) -> None:
        self.agent_name = agent_name
        self.name = DELEGATE_PREFIX + agent_name
        self.description = description or f"Hand a task to the {agent_name} agent."
        self.input_schema: dict[str, Any] = {
            "type": "object",
            "properties": {
                "task": {"type": "string", "minLength": 1, "description": "What to do."}
            },
            "required": ["task"],
            "additionalProperties": False,
        }

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        raise ToolError("delegation is run by the engine")

    def approval_detail(self, arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        return {}


@dataclass
class _McpFiles:
    step: int
    paths: tuple[Path, ...]
    stamps: tuple[FileStamp, ...]
    servers: dict[str, Any]
    """The MCP servers the files named then."""


class Catalog:
    """Agents, providers (created on first use), per-workspace configuration and tool sets."""

    def __init__(
        self,
        *,
        config: Config,
        workspace: Path,
        providers: ProviderFactory,
        tools: dict[str, Tool],
        mcp: McpManager | None = None,
        check_model: Callable[[str], None] | None = None,
    ) -> None:
        self.config = config
        self._check_model = check_model
        self.workspace = workspace
        self.mcp = mcp
        """This folder's MCP servers (an ``McpManager``), or None."""
        self._mcp_managers: WorkspaceManagers | None = None
        self._config_warned: set[str] = set()
        self._agents_warned: set[tuple[str, str]] = set()
        """(workspace, agent) whose unknown tool names were said (``take_agent_notices``)."""
        self._config_errors: dict[str, list[str]] = {}
        """A workspace's configuration files that could not be read again after an edit: said
        once each (``take_mcp_notices``)."""
        self._workspace_configs: dict[str, Config] = {str(workspace): config}
        self._config_stamps: dict[str, HookFilesStamp] = {
            str(workspace): files_stamp(hook_config_files(Path(workspace)))
        }
        """workspace → its config files as they were when its config was read (or given): a
        hook added before the hooks' first use is read then, not taken as known."""
        self._provider_factory = providers
        self._providers: dict[str, ModelProvider] = {}
        self._builtin_tools = tools
        self._run_allowed: dict[str, set[str]] = {}
        self._hooks: dict[str, LoadedHooks] = {}
        self._step = 0
        """Counts the steps begun (``new_step``): the hooks' files are stat'd once per step."""
        self._hooks_checked: dict[str, int] = {}
        """workspace → the step at which its hooks' files were last stat'd."""
        self._mcp_files: dict[str, _McpFiles] = {}
        """workspace → its configuration files as last looked at (``_follow_mcp_files``)."""

    def provider(self, reference: str) -> ModelProvider:
        provider = self._providers.get(reference)
        if provider is None:
            provider = self._provider_factory(reference)
            self._providers[reference] = provider
        return provider

    def check_model(self, reference: str, *, agent: str | None = None) -> None:
        """ConfigError when ``reference`` cannot be used, before a run is stored for it; cheap
        (no SDK import) when a check was given, else by building the provider. When it is the
        ``model`` of ``agent`` in this folder's config, or its ``[defaults] model``, the error
        names file, line and key."""
        try:
            if self._check_model is not None:
                self._check_model(reference)
            else:
                self.provider(reference)
        except ConfigError as exc:
            loc: tuple[str, ...]
            if agent is not None and self.agent(agent).model == reference:
                loc = ("agents", agent, "model")
            elif self.config.defaults.model == reference and not os.environ.get(ENV_MODEL):
                # A typo there read "unknown model provider 'x'" with no hint of where the
                # model came from (a trial): --model, AGENT_TUI_MODEL or which config file.
                # (AGENT_TUI_MODEL, when set, is what the config's defaults.model holds.)
                loc = ("defaults", "model")
            else:
                raise
            raise located_error(exc.message, loc, Path(self.workspace)) from None

    def config_for(self, workspace: str | None) -> Config:
        """The configuration of a job's workspace (its agents and permissions), which may not
        be the folder this process was opened in."""
        if workspace is None:
            return self.config
        config = self._workspace_configs.get(workspace)
        if config is None:
            from runtime.config import load_config

            self._config_stamps[workspace] = files_stamp(hook_config_files(Path(workspace)))
            try:
                config = load_config(Path(workspace))
            except (ConfigError, OSError) as exc:
                log.warning("using this folder's config for %s: %s", workspace, exc)
                config = self.config
            self._workspace_configs[workspace] = config
        return config

    def agent(self, name: str, workspace: str | None = None) -> AgentConfig:
        config = self.config_for(workspace)
        if name not in config.agents and name != "default":  # the built-in one is always known
            config = self._read_again_if_changed(workspace)
        config.check_agent(name)
        agent = config.agents.get(name)
        return agent if agent is not None else default_agent()

    def _read_again_if_changed(self, workspace: str | None) -> Config:
        """The workspace's config read again when its files changed since it was read from them
        (an agent added to agent-tui.toml while the TUI ran was "unknown" until a restart,
        while ``agent-tui run`` knew it; so was one in a file made after a start in a folder
        with none); as it was otherwise, or when a program gave it (no ``folder``), or cannot
        be read now."""
        key = str(self.workspace) if workspace is None else workspace
        config = self.config_for(key)
        stamp = files_stamp(hook_config_files(Path(key)))
        if config.folder is None or self._config_stamps.get(key) == stamp:
            return config
        from runtime.config import load_config

        try:
            fresh = load_config(Path(key))
        except (ConfigError, OSError) as exc:
            log.warning("keeping the config read before for %s: %s", key, exc)
            return config
        self._config_stamps[key] = stamp
        self._workspace_configs[key] = fresh
        if Path(key) == self.workspace:
            self.config = fresh
        return fresh

    def save_always_rule(self, tool_name: str, workspace: str) -> None:
        from runtime.approvals import save_always_rule

        try:
            save_always_rule(Path(workspace), tool_name)
        except OSError as exc:
            raise ConfigError(f"could not save the rule for {tool_name}: {exc}") from None
        config = self.config_for(workspace)
        allow = [*config.permissions.allow, tool_name]
        permissions = config.permissions.model_copy(update={"allow": allow})
        updated = config.model_copy(update={"permissions": permissions})
        self._workspace_configs[workspace] = updated
        if Path(workspace) == self.workspace:
            self.config = updated

    async def tools_for(
        self, agent: AgentConfig, *, workspace: str, with_mcp: bool = True
    ) -> dict[str, Tool]:
        tools: dict[str, Tool] = {}
        for name, tool in self._builtin_tools.items():
            if tool_allowed(agent, name):
                tools[name] = tool
        self._follow_mcp_files(workspace)
        mcp = self.mcp_for(workspace) if with_mcp else None
        if mcp is not None:
            for tool in await mcp.tools():
                if tool_allowed(agent, tool.name):
                    tools[tool.name] = tool
        for delegate in agent.delegates:
            delegate_config = self.agent(delegate, workspace)
            delegate_tool = DelegateTool(delegate, delegate_config.description)
            tools[delegate_tool.name] = delegate_tool
        if tool_allowed(agent, USE_SKILL_NAME):
            skills = discover_skills(Path(workspace)).skills.values()
            if any(skill.model_invocable for skill in skills):
                tools[USE_SKILL_NAME] = UseSkillTool(list(skills))
        return tools

    def mcp_for(self, workspace: str) -> McpManager | None:
        """The MCP servers of a job's workspace, from that workspace's own configuration (this
        folder's ``mcp`` for jobs here); each workspace's are made on first use."""
        if self._mcp_managers is None:
            from runtime.mcp.workspaces import WorkspaceManagers

            preset = {self.workspace: self.mcp} if self.mcp is not None else None
            self._mcp_managers = WorkspaceManagers(
                load=lambda path: self.config_for(str(path)).mcp_servers, preset=preset
            )
        return self._mcp_managers.for_workspace(workspace)

    def mcp_down(self, workspace: str) -> dict[str, str]:
        """Why each of the workspace's MCP servers that could not start did not (by server
        name); empty when none failed, or none was started yet."""
        manager = self._mcp_managers.for_workspace(workspace) if self._mcp_managers else None
        return dict(manager.errors) if manager is not None else {}

    def _follow_mcp_files(self, workspace: str) -> None:
        """Once per step: when the workspace's configuration files changed, its MCP servers
        follow what they say now (a server fixed, added or removed in ``.mcp.json`` is used at
        the next step; a new-user trial's fixed command was ignored until a restart, and the
        error named the old one). Only the servers the files name are compared: a change of
        anything else in them (an "always" rule saved) restarts nothing."""
        from runtime.config import config_files, load_config

        seen = self._mcp_files.get(workspace)
        if seen is not None and seen.step == self._step:
            return
        paths = seen.paths if seen is not None else config_files(Path(workspace))
        stamps = tuple(file_stamp(path) for path in paths)
        if seen is not None and seen.stamps == stamps:
            seen.step = self._step
            return
        servers: dict[str, Any] = {}
        if any(stamp is not None for stamp in stamps):
            try:
                servers = dict(load_config(Path(workspace)).mcp_servers)
            except (ConfigError, OSError) as exc:
                log.warning("MCP servers of %s not re-read: %s", workspace, exc)
                servers = seen.servers if seen is not None else {}
                # Said, not only logged: a trial's typo went unnoticed while the old settings
                # stayed in effect. Once per edit (the files' stamps are kept below).
                self._config_errors.setdefault(workspace, []).append(
                    f"{exc} — not applied: the settings read before stay in effect until it is"
                    " fixed."
                )
        self._mcp_files[workspace] = _McpFiles(self._step, paths, stamps, servers)
        if seen is None or seen.servers == servers:
            return
        self.mcp_for(workspace)  # the managers exist
        assert self._mcp_managers is not None
        self._mcp_managers.reconfigure(workspace, servers)

    def take_mcp_notices(self, workspace: str) -> list[tuple[NoticeLevel, str]]:
        """``(level, text)`` of what a person should see about the workspace's MCP setup since
        the last call: a configuration file edited into an error, its configuration's warnings
        (once per workspace: skipped ``.mcp.json`` entries, unset ``${VAR}``), then its servers'
        notices (start-up failures, warnings)."""
        notices: list[tuple[NoticeLevel, str]] = [
            ("warning", error) for error in self._config_errors.pop(workspace, [])
        ]
        if workspace not in self._config_warned and str(Path(workspace)) not in self._config_warned:
            self._config_warned.update({workspace, str(Path(workspace))})
            notices += [("warning", warning) for warning in self.config_for(workspace).warnings]
        if self._mcp_managers is not None:
            manager = self._mcp_managers.for_workspace(workspace)
            if manager is not None:
                notices += [(notice.level, notice.text) for notice in manager.take_notices()]
        return notices

    def take_agent_notices(self, agent_name: str, workspace: str) -> list[str]:
        """Warnings about agent ``agent_name``'s tools in ``workspace`` (names that name no
        tool), the first time a run of that agent starts there."""
        key = (str(Path(workspace)), agent_name)
        if key in self._agents_warned:
            return []
        self._agents_warned.add(key)
        config = self.config_for(workspace)
        return unknown_tool_warnings(config, agent_name, Path(workspace), self._builtin_tools)

    def context_window(self, provider: ModelProvider, workspace: str | None = None) -> int:
        """The window compaction measures against: ``[defaults] context_window`` or the
        provider's."""
        configured = self.config_for(workspace).defaults.context_window
        return configured or provider.context_window

    def new_step(self) -> None:
        """A step of some execution begins: what is read from files once per step (the hooks)
        is looked at again at its next use."""
        self._step += 1

    def hooks_for(self, workspace: str) -> tuple[HooksConfig, ClaudeHookReport]:
        """The ``[hooks]`` of the workspace's config, then the Claude Code settings entries
        that map, with the report of what was used and skipped. Read again when one of their
        files changed since (a ``stat`` per file, at the first use in each step)."""
        from runtime.engine.hook_files import current_hooks

        found = self._hooks.get(workspace)
        if found is not None and self._hooks_checked.get(workspace) == self._step:
            return found.hooks, found.report
        self._hooks_checked[workspace] = self._step
        fresh = current_hooks(
            found,
            workspace,
            lambda: self.config_for(workspace).hooks,
            read_at=self._config_stamps.get(workspace),
        )
        self._hooks[workspace] = fresh
        return fresh.hooks, fresh.report

    def allowed_for_run(self, run_id: str) -> set[str]:
        """Tools the person allowed for the rest of this run ("allow for this run")."""
        return self._run_allowed.setdefault(run_id, set())

    def offered(self, specs: list[ToolSpec], workspace: str) -> list[ToolSpec]:
        """The tools offered to the model: one the permission rules deny is left out (it could
        never run: a new-user trial watched the model call one and fail). Its calls are still
        decided, and refused with the rule, should the model name it anyway."""
        from runtime.approvals import denying_rule
        from runtime.permissions import current_permissions

        permissions = current_permissions(Path(workspace), self.config_for(workspace))
        if not permissions.deny:
            return specs
        return [spec for spec in specs if denying_rule(spec.name, permissions) is None]

    def decider(self, workspace: str) -> Callable[[str, Tool, set[str]], Decision]:
        """``decide`` for the calls of one step decided together (with no wait between them):
        the permission files are looked at once, at the first decision."""
        from runtime.approvals import ApprovalPolicy
        from runtime.permissions import current_permissions

        read: list[Permissions] = []

        def decide(name: str, tool: Tool, allowed_here: set[str]) -> Decision:
            if not read:
                read.append(current_permissions(workspace, self.config_for(workspace)))
            policy = ApprovalPolicy(read[0], run_allowed=allowed_here)
            return policy.decide(name, default=tool.approval_default)

        return decide

    async def aclose(self) -> None:
        for provider in self._providers.values():
            with contextlib.suppress(Exception):
                await provider.aclose()
        if self._mcp_managers is not None:
            with contextlib.suppress(Exception):
                await self._mcp_managers.aclose()
        elif self.mcp is not None:
            with contextlib.suppress(Exception):
                await self.mcp.aclose()
