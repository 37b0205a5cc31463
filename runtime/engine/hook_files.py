"""The hooks in effect in a workspace, kept while their files stay as they were: the
``[hooks]`` of the agent-tui config files and the Claude Code settings entries that map. The
catalog stats the files at the first use in each step; a file written, created or removed since
is read again (the config's hooks, or the Claude Code entries, whichever changed), so an edit
takes effect from the next step without restarting the process."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from runtime.errors import ConfigError
from runtime.hooks import (
    ClaudeHookReport,
    FileStamp,
    HooksConfig,
    hook_files_stamps,
    load_claude_hooks,
)

log = logging.getLogger("runtime.engine")

__all__ = ["LoadedHooks", "current_hooks"]


@dataclass(frozen=True)
class LoadedHooks:
    configured: HooksConfig
    """The ``[hooks]`` of the agent-tui config."""
    config_stamp: FileStamp
    claude: HooksConfig
    claude_stamp: FileStamp
    report: ClaudeHookReport

    @cached_property
    def hooks(self) -> HooksConfig:
        hooks = self.configured
        for event in ("before_tool", "after_tool"):
            hooks = hooks.with_entries(event, getattr(self.claude, event))
        return hooks


def _reload_configured(workspace: Path, previous: HooksConfig) -> HooksConfig:
    from runtime.config import load_config

    try:
        return load_config(workspace).hooks
    except (ConfigError, OSError) as exc:
        log.warning("keeping the hooks read before for %s: %s", workspace, exc)
        return previous


def current_hooks(
    loaded: LoadedHooks | None,
    workspace: Path | str,
    configured: Callable[[], HooksConfig],
    *,
    read_at: FileStamp | None = None,
) -> LoadedHooks:
    """``loaded`` when none of its files changed, else what they hold now. The first read takes
    the config's hooks from ``configured`` (the workspace's config as the process holds it),
    unless the config files changed since it was read (``read_at``: their stamp then): a hook
    added between the start and the first tool call was taken as known and never ran (found
    by a new-user trial: a deny hook ignored by the TUI, applied by ``agent-tui run``)."""
    config_stamp, claude_stamp = hook_files_stamps(workspace)
    if loaded is not None and (loaded.config_stamp, loaded.claude_stamp) == (
        config_stamp,
        claude_stamp,
    ):
        return loaded
    folder = Path(workspace)
    if loaded is None:
        hooks = configured()
        if read_at is not None and read_at != config_stamp:
            hooks = _reload_configured(folder, hooks)
        claude, report = load_claude_hooks(folder)
        return LoadedHooks(hooks, config_stamp, claude, claude_stamp, report)
    hooks = loaded.configured
    if loaded.config_stamp != config_stamp:
        hooks = _reload_configured(folder, loaded.configured)
    claude, report = loaded.claude, loaded.report
    if loaded.claude_stamp != claude_stamp:
        claude, report = load_claude_hooks(folder)
    return LoadedHooks(hooks, config_stamp, claude, claude_stamp, report)
