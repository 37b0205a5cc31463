"""One ``McpManager`` per workspace: a job's MCP servers come from its own workspace's config,
and a process that runs jobs of several workspaces starts each workspace's servers on first use.

    managers = WorkspaceManagers(load=lambda path: load_config(path).mcp_servers)
    manager = managers.for_workspace(job.workspace)   # None when it configures no server
    tools = await manager.tools() if manager else []
    ...
    await managers.aclose()
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the SDK is imported only once a workspace configures a server
    from runtime.mcp.manager import McpManager, ServerConfig

logger = logging.getLogger(__name__)


class WorkspaceManagers:
    def __init__(
        self,
        load: Callable[[Path], Mapping[str, ServerConfig]],
        *,
        preset: Mapping[Path, McpManager] | None = None,
    ) -> None:
        """``load(workspace)`` gives that workspace's servers (from its config; it may raise,
        then the workspace has none and the reason is logged). ``preset`` managers are used as
        they are for their workspaces (and closed with the rest)."""
        self._load = load
        self._keys: dict[str, Path] = {}
        """A workspace as given → its resolved path (resolved once per process)."""
        self._managers: dict[Path, McpManager | None] = {
            Path(path).resolve(): manager for path, manager in (preset or {}).items()
        }

    def for_workspace(self, workspace: str | Path) -> McpManager | None:
        """The workspace's manager, made on first use (servers start when it is first used)."""
        key = self._keys.get(str(workspace))
        if key is None:
            key = self._keys[str(workspace)] = Path(workspace).resolve()
        if key not in self._managers:
            try:
                servers = dict(self._load(key))
            except Exception as exc:
                logger.warning("MCP servers of %s not loaded: %s", key, exc)
                servers = {}
            manager: McpManager | None = None
            if servers:
                from runtime.mcp.manager import McpManager

                manager = McpManager(servers, workspace=key)
            self._managers[key] = manager
        return self._managers[key]

    def reconfigure(self, workspace: str | Path, servers: Mapping[str, ServerConfig]) -> list[str]:
        """The workspace's servers are ``servers`` from now on (its configuration files
        changed); the names of those that changed (``McpManager.reconfigure``)."""
        key = Path(workspace).resolve()
        manager = self.for_workspace(workspace)
        if manager is not None:
            return manager.reconfigure(servers)
        if not servers:
            return []
        from runtime.mcp.manager import McpManager

        self._managers[key] = McpManager(dict(servers), workspace=key)
        return sorted(servers)

    async def aclose(self) -> None:
        managers = [manager for manager in self._managers.values() if manager is not None]
        self._managers.clear()
        for manager in managers:
            await manager.aclose()
