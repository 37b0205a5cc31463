"""The engine's pieces wired together: each is given its collaborators, none builds another."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runtime.bus import EventBus
from runtime.clock import Clock
from runtime.config import Config
from runtime.engine.catalog import Catalog
from runtime.engine.delegation import Delegation
from runtime.engine.dispatch import Dispatch
from runtime.engine.execution import Executions, Launcher, ProviderFactory, SleepFn
from runtime.engine.executor import Executor
from runtime.engine.extensions import Extensions
from runtime.engine.leases import Leases
from runtime.engine.model_call import ModelCall
from runtime.engine.pump import Pump
from runtime.engine.tool_calls import ToolCalls
from runtime.store.base import Store
from runtime.tools.base import Tool


@dataclass
class Engine:
    catalog: Catalog
    pump: Pump
    delegation: Delegation
    leases: Leases
    executor: Executor
    bus: EventBus
    executions: Executions
    dispatch: Dispatch
    model_call: ModelCall


def build_engine(
    *,
    store: Store,
    owner_id: str,
    config: Config,
    workspace: Path,
    providers: ProviderFactory,
    tools: dict[str, Tool],
    mcp: Any,
    clock: Clock,
    sleep: SleepFn,
    lease_seconds: float,
    read_only: bool,
    launcher: Launcher,
    check_model: Callable[[str], None] | None = None,
) -> Engine:
    bus = EventBus()
    executions: Executions = {}
    catalog = Catalog(
        config=config,
        workspace=workspace,
        providers=providers,
        tools=tools,
        mcp=mcp,
        check_model=check_model,
    )
    pump = Pump(store, bus, executions)
    delegation = Delegation(
        store=store,
        catalog=catalog,
        pump=pump,
        launcher=launcher,
        executions=executions,
        owner_id=owner_id,
    )
    leases = Leases(
        store=store,
        owner_id=owner_id,
        lease_seconds=lease_seconds,
        executions=executions,
        pump=pump,
        delegation=delegation,
        read_only=read_only,
    )
    model_call = ModelCall(
        store=store,
        catalog=catalog,
        pump=pump,
        bus=bus,
        clock=clock,
        sleep=sleep,
        owner_id=owner_id,
    )
    tool_calls = ToolCalls(
        store=store, catalog=catalog, pump=pump, delegation=delegation, owner_id=owner_id
    )
    extensions = Extensions(store=store, pump=pump)
    executor = Executor(
        extensions=extensions,
        store=store,
        owner_id=owner_id,
        catalog=catalog,
        pump=pump,
        model_call=model_call,
        tool_calls=tool_calls,
        delegation=delegation,
        executions=executions,
    )
    dispatch = Dispatch(
        store=store,
        owner_id=owner_id,
        executions=executions,
        leases=leases,
        pump=pump,
        launch=launcher.launch,
    )
    return Engine(
        catalog, pump, delegation, leases, executor, bus, executions, dispatch, model_call
    )
