"""`agent-tui doctor`: what the CLI would use, and whether each piece works. Never prints a
secret's value, only whether it is set.

It fails (exit 1, "Some checks failed") on what would stop agent-tui later: a damaged database,
a database ``run`` could not write or create (its folder read-only, say: the same line),
a broken configuration, a model reference `run` would refuse (the default one, or an agent's),
a theme the TUI does not have, a hook whose program is a path that cannot run, an MCP server
that does not start, and a run left queued or running by a process that is gone (which the
next agent-tui to execute something recovers). Each problem is one line starting with
``error:``. It opens the database read-only: no lease, no recovery."""

from __future__ import annotations

import os
import re
import shlex
import sqlite3
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from runtime.api import Runtime
from runtime.config import ENV_MCP_TIMEOUT, ENV_MODEL, STARTUP_TIMEOUT, env_startup_timeout
from runtime.errors import AgentTuiError, ConfigError, DatabaseError, DatabaseNotCreated
from runtime.store.checks import read_only_uri
from runtime.store.migrations import LATEST_VERSION
from runtime.store.schema import expected_shape, schema_problems, shape_of
from runtime.store.stored_content import register_functions
from runtime.tools.sandbox import describe_sandbox
from tui._cli.commands import CLOSE_SECONDS, Context
from tui._cli.listing import OWNER_GONE
from tui._cli.parser import EXIT_FAILED, EXIT_OK
from tui._cli.settings import (
    ENV_KEYS,
    SECRET_ENV_KEYS,
    key_status,
    load_config,
    log_path,
    writable_problem,
)

if TYPE_CHECKING:
    from runtime.config import Config
    from runtime.hooks import ClaudeHookReport, HookEntry, HooksConfig
    from runtime.models import Run


def _inspect_database(path: Path) -> tuple[int, list[str], list[str]]:
    """``PRAGMA user_version``, ``PRAGMA integrity_check``'s complaints and the schema check's
    problems, read without changing the file (read-only)."""
    connection = sqlite3.connect(read_only_uri(path), uri=True)
    register_functions(connection)  # integrity_check may read the search index's view
    try:
        version = int(connection.execute("PRAGMA user_version").fetchone()[0])
        integrity = [str(r[0]) for r in connection.execute("PRAGMA integrity_check")]
        schema: list[str] = []
        if version > LATEST_VERSION:
            schema = [f"version {version} is newer than this agent-tui ({LATEST_VERSION})"]
        elif version > 0:
            schema = schema_problems(shape_of(connection), expected_shape(version))
        elif connection.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        ).fetchone():
            # Version 0 with tables: not a new database but another program's (which every
            # command refuses), whose integrity is fine and whose schema is not ours at all.
            schema = ["an SQLite database of another program, not an agent-tui database"]
        return version, [line for line in integrity if line != "ok"], schema
    finally:
        connection.close()


@dataclass
class _Opened:
    """What the runtime, opened read-only, said."""

    default_model: str
    model_notice: str | None
    runs_left: list[Run] = field(default_factory=list)
    """Queued or running runs whose process is gone (``runtime.interrupted.owner_gone``)."""


async def _open_and_close(
    ctx: Context, db_path: Path | str, config: Config | None, *, look_at_runs: bool
) -> _Opened:
    import asyncio
    import contextlib

    from runtime.compose import open_store

    runtime = await Runtime.open(
        db_path=db_path,
        workspace=ctx.workspace,
        config=config,
        model=ctx.model,
        read_only=True,
        # Checking creates nothing: a PostgreSQL database agent-tui never set up is said so.
        store=open_store(db_path, read_only=True, create=False),
    )
    try:
        opened = _Opened(runtime.default_model, runtime.model_notice)
        if look_at_runs:
            opened.runs_left = await _runs_left(runtime)
        return opened
    finally:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(CLOSE_SECONDS):
                await runtime.close()


async def _runs_left(runtime: Runtime) -> list[Run]:
    """The queued and running runs of processes that are provably gone (killed, crashed): the
    store still says they run, and nothing does until an agent-tui that executes runs opens the
    database and recovers them. Read only, as recovery decides it (``runtime.owners``)."""
    from runtime.interrupted import interrupted_runs, owner_gone
    from runtime.owners import gone_owners

    gone = frozenset(await gone_owners(runtime.store))
    if not gone:
        return []
    return [
        run
        for run in await interrupted_runs(runtime, limit=None, gone=gone)
        if owner_gone(run, gone)
    ]


async def cmd_doctor(ctx: Context) -> int:
    out = ctx.print

    out(f"agent-tui doctor — workspace {ctx.workspace}")
    out("")
    db_exists = not isinstance(ctx.db_path, str) and ctx.db_path.exists()
    unwritable = writable_problem(ctx.db_path)
    database_ok = _check_database(ctx, db_exists=db_exists, unwritable=unwritable)
    healthy = database_ok and unwritable is None
    log = log_path(ctx.db_path)
    note = "" if log.exists() else " (none yet: written when there is something to log)"
    out(f"Log file: {log}{note}")

    out("")
    out("Configuration:")
    config, config_ok = _check_config(ctx)
    healthy = config_ok and healthy

    out("")
    out("Environment:")
    for name in ENV_KEYS:
        status = key_status(name)
        label = "(secret) " if name in SECRET_ENV_KEYS else ""
        out(f"  {name}: {label}{status}")
    out(f"  {ENV_MCP_TIMEOUT}: {_mcp_timeout_status()}")

    out("")
    out("Shell sandbox:")
    out(f"  {describe_sandbox()}")

    out("")
    open_database = (db_exists or isinstance(ctx.db_path, str)) and database_ok
    healthy = await _check_runtime(ctx, config, open_database=open_database) and healthy

    out("")
    out("MCP servers:")
    healthy = await _check_mcp(ctx, config) and healthy

    if config is not None:
        out("")
        _print_extensions(ctx, config)

    out("")
    out("All fine." if healthy else "Some checks failed (see above).")
    return EXIT_OK if healthy else EXIT_FAILED


def _check_database(ctx: Context, *, db_exists: bool, unwritable: str | None) -> bool:
    """Prints where the database is, what keeps agent-tui from writing it (``unwritable``: the
    line ``run`` refuses with) and, for an SQLite file that exists, its version, integrity and
    schema; False when something is wrong with what it holds (one that cannot be written is
    still read and checked, as ``runs``, ``show`` and ``export`` can)."""
    out = ctx.print
    if isinstance(ctx.db_path, str):
        from tui._cli.settings import shown

        out(f"Database: {shown(ctx.db_path)} (PostgreSQL; checked by opening it below)")
        return True
    out(f"Database: {ctx.db_path}")
    if not db_exists:
        if unwritable is None:
            out("  not created yet (it is created on the first run)")
        else:
            out("  not created yet")
            out(f"  error: {unwritable}")
        return True
    if unwritable is not None:
        out(f"  error: {unwritable}")
    try:
        version, damage, schema = _inspect_database(ctx.db_path)
    except sqlite3.DatabaseError as exc:
        out(f"  error: cannot read it as a database ({exc})")
        return False
    except DatabaseError as exc:  # a write-ahead log it cannot read in a read-only folder
        out(f"  error: {exc.message}")
        return False
    healthy = True
    out(f"  schema version {version}")
    if damage:
        out(f"  integrity check: error: {'; '.join(damage[:5])}")
        healthy = False
    else:
        out("  integrity check: ok")
    if schema:
        out(f"  schema check: error: {'; '.join(schema)}")
        healthy = False
    else:
        out("  schema check: ok")
    return healthy


def _mcp_timeout_status() -> str:
    """``MCP_TIMEOUT``, and the start-up time the MCP servers that set none get."""
    value = os.environ.get(ENV_MCP_TIMEOUT, "").strip()
    seconds, problem = env_startup_timeout(os.environ)
    if seconds is not None:
        shown = f"{value} ms"
    elif problem is not None:
        shown = f"{value!r}, not a positive number of milliseconds"
    else:
        shown = "not set"
    given = seconds if seconds is not None else STARTUP_TIMEOUT
    return f"{shown}: MCP servers without a startup_timeout get {given:g} s to start"


def _check_config(ctx: Context) -> tuple[Config | None, bool]:
    """Prints the config files read, their warnings and the problems of what they say; the
    configuration (None when it is broken: the error is printed) and whether it is fine."""
    out = ctx.print
    try:
        config = load_config(ctx.workspace)
    except AgentTuiError as exc:
        out(f"  error: {exc.message}")
        return None, False
    sources = list(config.sources)
    if sources:
        for source in sources:
            out(f"  read {source}")
    else:
        out("  no config files found (using defaults)")
    for warning in [*config.warnings, *_agent_tool_warnings(config, ctx.workspace)]:
        out(f"  warning: {warning}")
    problems = [
        *_agent_model_problems(config, ctx.workspace),
        *_theme_problems(config),
        *_hook_problems(_hooks_in_effect(ctx, config)[0], ctx.workspace),
    ]
    for problem in problems:
        out(f"  error: {problem}")
    return config, not problems


def _agent_model_problems(config: Config, workspace: Path) -> list[str]:
    """The agents whose model ``run`` would refuse (the check it makes before storing a run),
    each with the file, line and key that set it, as ``run`` says it. The default model is
    checked with the runtime, which decides it (``_check_runtime``)."""
    from runtime.config import located_error
    from runtime.model_refs import check_reference

    problems = []
    for name, agent in sorted(config.agents.items()):
        if agent.model is None:
            continue  # the default model
        try:
            check_reference(agent.model)
        except ConfigError as exc:
            located = located_error(exc.message, ("agents", name, "model"), workspace)
            problems.append(located.message)
    return problems


def _agent_tool_warnings(config: Config, workspace: Path) -> list[str]:
    """Names in an agent's ``tools`` that name no tool (the agent runs without it), as the
    first run of that agent says them."""
    from runtime.engine.catalog import unknown_tool_warnings
    from runtime.tools.builtin import builtin_tools

    builtin = builtin_tools()
    return [
        warning
        for name in sorted(config.agents)
        for warning in unknown_tool_warnings(config, name, workspace, builtin)
    ]


def _theme_problems(config: Config) -> list[str]:
    """A ``[defaults] theme`` the TUI does not have (it would start in its default theme)."""
    wanted = config.defaults.theme
    if not wanted:
        return []
    from themes import theme_names

    known = theme_names()
    if wanted in known:
        return []
    return [f"[defaults] theme: no theme named {wanted!r} (themes: {', '.join(sorted(known))})"]


def _hooks_in_effect(ctx: Context, config: Config) -> tuple[HooksConfig, ClaudeHookReport]:
    """The configured hooks with the Claude Code entries agent-tui uses (DESIGN §16), and the
    report of which Claude Code entries were used or skipped."""
    from runtime.hooks import load_claude_hooks

    claude, report = load_claude_hooks(ctx.workspace)
    hooks = config.hooks
    for event in ("before_tool", "after_tool"):
        hooks = hooks.with_entries(event, getattr(claude, event))
    return hooks, report


HOOK_EVENTS = ("before_tool", "after_tool", "on_input_required", "on_run_finished")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


def _hook_problems(hooks: HooksConfig, workspace: Path) -> list[str]:
    problems = []
    for event in HOOK_EVENTS:
        entry: HookEntry
        for entry in getattr(hooks, event):
            why = hook_program_problem(entry.command, workspace)
            if why is not None:
                where = f" ({entry.source})" if entry.source else ""
                problems.append(f"hook {event} {entry.matcher}{where}: {why}")
    return problems


def hook_program_problem(command: str, workspace: Path) -> str | None:
    """Why the program of a hook's command cannot run, when that program is a path
    (``./hooks/check.sh``, ``/opt/bin/check``, ``~/bin/check``; relative to the workspace, where
    hooks run): it does not exist, is a folder, or is not executable. A bare name is the shell's
    to find on PATH, and a program spelled with shell syntax (``$VAR``, a backquote) is not
    checked: only the shell knows what it becomes."""
    try:
        words = shlex.split(command)
    except ValueError:  # unbalanced quotes: the shell will say
        return None
    while words and _ASSIGNMENT.match(words[0]):
        words = words[1:]  # NAME=value before the program
    if not words or "/" not in words[0] or any(char in words[0] for char in "$`"):
        return None
    program = words[0]
    path = Path(program).expanduser()
    if not path.is_absolute():
        path = workspace / path
    if not path.exists():
        return f"{program} does not exist ({path})"
    if path.is_dir():
        return f"{program} is a folder, not a program ({path})"
    if not os.access(path, os.X_OK):
        return f"{program} is not executable (chmod +x {path})"
    return None


async def _check_runtime(ctx: Context, config: Config | None, *, open_database: bool) -> bool:
    """Opens the runtime read-only, prints the default model and whether ``run`` could use it,
    and the runs a process that is gone left; False when something of it is wrong. Without
    ``open_database`` (no file yet, or a broken one) a scratch database stands in, so the
    configuration and model are still checked."""
    from runtime.model_refs import check_reference
    from tui._cli import render

    out = ctx.print
    if config is None:
        out("Default model: not checked: fix the configuration first")
        return True
    try:
        opened = None
        if open_database:
            try:
                opened = await _open_and_close(ctx, ctx.db_path, config, look_at_runs=True)
                out("Database opens: yes")
            except DatabaseNotCreated:
                out("Database opens: yes; no agent-tui tables yet (made on the first run)")
        if opened is None:
            with tempfile.TemporaryDirectory(prefix="agent-tui-doctor-") as scratch:
                opened = await _open_and_close(
                    ctx, Path(scratch) / "probe.db", config, look_at_runs=False
                )
    except AgentTuiError as exc:
        out(f"Runtime: error: {exc.message}")
        return False
    healthy = True
    out(f"Default model: {opened.default_model}")
    try:
        check_reference(opened.default_model)  # what `run` checks before it stores a run
    except ConfigError as exc:
        problem = exc.message
        from_a_file = config.defaults.model == opened.default_model
        if from_a_file and ctx.model is None and not os.environ.get(ENV_MODEL):
            from runtime.config import located_error

            # The config file's [defaults] model: named with file, line and key as `run` does.
            problem = located_error(problem, ("defaults", "model"), ctx.workspace).message
        out(f"  error: {problem}")
        healthy = False
    else:
        if opened.model_notice:
            out(f"  {opened.model_notice}")
    if opened.runs_left:
        out("Runs left by a process that is gone:")
    for run in opened.runs_left:
        out(
            f"  error: run {run.id} ({run.state.value}): {OWNER_GONE}; "
            f"resume it with: {render.COMMAND} retry {run.id}"
        )
        healthy = False
    return healthy


async def _check_mcp(ctx: Context, config: Config | None) -> bool:
    servers = dict(config.mcp_servers) if config is not None else {}
    if not servers:
        ctx.print("  none configured")
        return True
    try:
        from runtime.mcp import McpManager
    except ImportError:
        for name in servers:
            ctx.print(f"  {name}: cannot check (MCP support is not available in this build)")
        return False
    manager = McpManager(servers, workspace=ctx.workspace)
    try:
        reports = await manager.check()  # each server within its startup_timeout
    finally:
        await manager.aclose()
    healthy = True
    for report in reports:
        if report.ok:
            names = ", ".join(report.tools) or "no tools"
            ctx.print(
                f"  {report.name} ({report.transport}): starts — {len(report.tools)} tools: {names}"
            )
            for unsupported in report.unsupported:
                ctx.print(f"    not offered: {unsupported}")
        else:
            ctx.print(f"  {report.name} ({report.transport}): error: {report.error}")
            healthy = False
    return healthy


def _print_extensions(ctx: Context, config: Config) -> None:
    """Instructions, skills, commands, hooks (and which Claude Code entries were used or
    skipped) and phases in effect here (DESIGN §16)."""
    from runtime.engine.extensions import describe_extensions, report_lines

    hooks, report = _hooks_in_effect(ctx, config)
    described = describe_extensions(
        ctx.workspace, agent=config.defaults.agent, hooks=hooks, claude_hooks=report
    )
    for line in report_lines(described):
        ctx.print(line)
