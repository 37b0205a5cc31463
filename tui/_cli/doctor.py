"""`agent-tui doctor`: what the CLI would use, and whether each piece works. Never prints a
secret's value, only whether it is set."""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from runtime.api import Runtime
from runtime.errors import AgentTuiError
from runtime.store.migrations import LATEST_VERSION
from runtime.store.schema import expected_shape, schema_problems, shape_of
from runtime.store.stored_content import register_functions
from runtime.tools.sandbox import describe_sandbox
from tui._cli.commands import CLOSE_SECONDS, Context
from tui._cli.parser import EXIT_FAILED, EXIT_OK
from tui._cli.settings import ENV_KEYS, SECRET_ENV_KEYS, key_status, load_config, log_path

if TYPE_CHECKING:
    from runtime.config import Config

MCP_CHECK_SECONDS = 30.0


def _inspect_database(path: Path) -> tuple[int, list[str], list[str]]:
    """``PRAGMA user_version``, ``PRAGMA integrity_check``'s complaints and the schema check's
    problems, read without changing the file (read-only)."""
    uri = f"{path.resolve().as_uri()}?mode=ro"
    connection = sqlite3.connect(uri, uri=True)
    register_functions(connection)  # integrity_check may read the search index's view
    try:
        version = int(connection.execute("PRAGMA user_version").fetchone()[0])
        integrity = [str(r[0]) for r in connection.execute("PRAGMA integrity_check")]
        schema: list[str] = []
        if version > LATEST_VERSION:
            schema = [f"version {version} is newer than this agent-tui ({LATEST_VERSION})"]
        elif version > 0:
            schema = schema_problems(shape_of(connection), expected_shape(version))
        return version, [line for line in integrity if line != "ok"], schema
    finally:
        connection.close()


async def _open_and_close(
    ctx: Context, db_path: Path | str, config: Config | None
) -> tuple[str, str | None]:
    import asyncio
    import contextlib

    runtime = await Runtime.open(
        db_path=db_path, workspace=ctx.workspace, config=config, model=ctx.model, read_only=True
    )
    try:
        return runtime.default_model, runtime.model_notice
    finally:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(CLOSE_SECONDS):
                await runtime.close()


async def cmd_doctor(ctx: Context) -> int:
    out = ctx.print

    out(f"agent-tui doctor — workspace {ctx.workspace}")
    out("")
    db_exists = not isinstance(ctx.db_path, str) and ctx.db_path.exists()
    healthy = _check_database(ctx, db_exists=db_exists)
    log = log_path(ctx.db_path)
    note = "" if log.exists() else " (none yet: written when there is something to log)"
    out(f"Log file: {log}{note}")

    out("")
    out("Configuration:")
    config = _check_config(ctx)
    healthy = config is not None and healthy

    out("")
    out("Environment:")
    for name in ENV_KEYS:
        status = key_status(name)
        label = "(secret) " if name in SECRET_ENV_KEYS else ""
        out(f"  {name}: {label}{status}")

    out("")
    out("Shell sandbox:")
    out(f"  {describe_sandbox()}")

    out("")
    open_database = (db_exists or isinstance(ctx.db_path, str)) and healthy
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


def _check_database(ctx: Context, *, db_exists: bool) -> bool:
    """Prints where the database is and, for an SQLite file that exists, its version, integrity
    and schema; False when something is wrong with it."""
    out = ctx.print
    if isinstance(ctx.db_path, str):
        from tui._cli.settings import shown

        out(f"Database: {shown(ctx.db_path)} (PostgreSQL; checked by opening it below)")
        return True
    out(f"Database: {ctx.db_path}")
    if not db_exists:
        out("  not created yet (it is created on the first run)")
        return True
    try:
        version, damage, schema = _inspect_database(ctx.db_path)
    except sqlite3.DatabaseError as exc:
        out(f"  error: cannot read it as a database ({exc})")
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


def _check_config(ctx: Context) -> Config | None:
    """Prints the config files read and their warnings; None when the configuration is broken
    (the error is printed)."""
    out = ctx.print
    try:
        config = load_config(ctx.workspace)
    except AgentTuiError as exc:
        out(f"  error: {exc.message}")
        return None
    sources = list(config.sources)
    if sources:
        for source in sources:
            out(f"  read {source}")
    else:
        out("  no config files found (using defaults)")
    for warning in config.warnings:
        out(f"  warning: {warning}")
    return config


async def _check_runtime(ctx: Context, config: Config | None, *, open_database: bool) -> bool:
    """Opens the runtime read-only and prints the default model; False when it cannot be opened.
    Without ``open_database`` (no file yet, or a broken one) a scratch database stands in, so the
    configuration and model are still checked."""
    out = ctx.print
    if config is None:
        out("Default model: not checked: fix the configuration first")
        return True
    try:
        if open_database:
            model, notice = await _open_and_close(ctx, ctx.db_path, config)
            out("Database opens: yes")
        else:
            with tempfile.TemporaryDirectory(prefix="agent-tui-doctor-") as scratch:
                model, notice = await _open_and_close(ctx, Path(scratch) / "probe.db", config)
    except AgentTuiError as exc:
        out(f"Runtime: error: {exc.message}")
        return False
    out(f"Default model: {model}")
    if notice:
        out(f"  {notice}")
    return True


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
        reports = await manager.check(timeout=MCP_CHECK_SECONDS)
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
    from runtime.hooks import load_claude_hooks

    claude, report = load_claude_hooks(ctx.workspace)
    hooks = config.hooks
    for event in ("before_tool", "after_tool"):
        hooks = hooks.with_entries(event, getattr(claude, event))
    described = describe_extensions(
        ctx.workspace, agent=config.defaults.agent, hooks=hooks, claude_hooks=report
    )
    for line in report_lines(described):
        ctx.print(line)
