"""The composition root: configuration → store → providers → tools and MCP → a ``Runtime``.

``Runtime.open`` calls ``open_runtime``; nothing here is imported by the engine or the facade
at import time."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Required, TypedDict, TypeVar

from runtime.clock import Clock, SystemClock
from runtime.config import Config
from runtime.engine.execution import LEASE_SECONDS, ProviderFactory, SleepFn
from runtime.errors import InvalidInput
from runtime.locations import is_postgres_url
from runtime.owners import new_owner_id
from runtime.providers.base import ModelProvider
from runtime.store.base import Store
from runtime.tools.base import Tool

if TYPE_CHECKING:
    from runtime.runtime import Runtime

R = TypeVar("R", bound="Runtime")


def registry_factory(env: Mapping[str, str]) -> ProviderFactory:
    """Providers by model reference (``anthropic:…``, ``openai:…``, ``demo``), imported lazily."""

    def factory(reference: str) -> ModelProvider:
        from runtime.providers.registry import resolve_provider

        return resolve_provider(reference, env=env)

    return factory


def reference_checker(env: Mapping[str, str]) -> Callable[[str], None]:
    """Checks a model reference (and its key) without importing any provider's SDK."""

    def check(reference: str) -> None:
        from runtime.model_refs import check_reference

        check_reference(reference, env=env)

    return check


def open_store(
    db_path: str | Path,
    *,
    clock: Clock | None = None,
    read_only: bool = False,
    create: bool = True,
) -> Store:
    """The store for a database: a ``postgresql://`` URL opens PostgreSQL (the ``postgres``
    extra), anything else is an SQLite file path. ``read_only``: for a process that only looks
    (``runs``, ``show``, ``export``, DESIGN §4.4), whose SQLite store then does no upkeep of
    its own (search indexing) when it searches or closes. ``create=False``: a PostgreSQL
    schema agent-tui never set up is refused (``DatabaseNotCreated``), not created (an SQLite
    file that does not exist is its caller's to refuse)."""
    if is_postgres_url(db_path):
        from runtime.store.postgres import PostgresStore

        return PostgresStore(db_path, clock=clock, create=create)
    from runtime.store.sqlite import SqliteStore

    return SqliteStore(Path(db_path), clock=clock, read_only=read_only)


class OpenOptions(TypedDict, total=False):
    """The keywords of ``Runtime.open``: those of ``open_runtime``, which documents them."""

    db_path: Required[str | Path]
    workspace: Required[str | Path]
    config: Config | None
    model: str | None
    providers: ProviderFactory | None
    tools: dict[str, Tool] | None
    clock: Clock | None
    sleep: SleepFn
    env: Mapping[str, str] | None
    lease_seconds: float
    store: Store | None
    mcp: Any
    read_only: bool


async def open_runtime(
    cls: type[R],
    *,
    db_path: str | Path,
    workspace: str | Path,
    config: Config | None = None,
    model: str | None = None,
    providers: ProviderFactory | None = None,
    tools: dict[str, Tool] | None = None,
    clock: Clock | None = None,
    sleep: SleepFn = asyncio.sleep,
    env: Mapping[str, str] | None = None,
    lease_seconds: float = LEASE_SECONDS,
    store: Store | None = None,
    mcp: Any = None,
    read_only: bool = False,
) -> R:
    """Open the database (migrating it) and start the engine (``Runtime.start_engine``)."""
    environ = os.environ if env is None else env
    workspace_path = Path(workspace).resolve()
    if not workspace_path.is_dir():
        raise InvalidInput(f"workspace {workspace_path} is not a folder")
    if config is None:
        from runtime.config import load_config

        config = load_config(workspace_path, env=environ)
    default_model = model or environ.get("AGENT_TUI_MODEL") or config.defaults.model
    if not default_model:
        from runtime.providers.registry import default_model_reference

        default_model = default_model_reference(environ)
    check_model = None
    if providers is None:
        providers = registry_factory(environ)
        check_model = reference_checker(environ)
    if tools is None:
        from runtime.tools.builtin import builtin_tools

        tools = dict(builtin_tools())
    if mcp is None and config.mcp_servers and not read_only:
        from runtime.mcp import McpManager

        mcp = McpManager(dict(config.mcp_servers), workspace=workspace_path)
    clock = clock or SystemClock()
    if store is None:
        store = open_store(db_path, clock=clock, read_only=read_only)
    await store.open()
    runtime = cls(
        store,
        workspace=workspace_path,
        config=config,
        owner_id=new_owner_id(),
        default_model=default_model,
        providers=providers,
        tools=tools,
        mcp=mcp,
        clock=clock,
        sleep=sleep,
        lease_seconds=lease_seconds,
        read_only=read_only,
        check_model=check_model,
    )
    try:
        await runtime.start_engine()
    except BaseException:
        await store.close()
        raise
    return runtime
