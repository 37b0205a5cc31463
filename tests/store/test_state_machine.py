"""Random sequences of store operations, with crashes and a second owner on the same storage,
checked after every step against the rules of DESIGN §4-§6. Everything is read back through the
``Store`` protocol, so every backend in ``tests.store.backends`` runs the same machine."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import unittest
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
)

from runtime import errors
from runtime.clock import ManualClock
from runtime.events import MessageCommitted, RunStateChanged, ToolStateChanged
from runtime.models import InputKind, Run, RunState, ToolCall, ToolCallState
from runtime.store.base import NewInputRequest, Store
from tests.store.backends import BACKENDS, Backend
from tests.store.helpers import assistant, new_run, tool_calls

T = TypeVar("T")
OWNERS = ("owner-a", "owner-b")
LEASE = 10.0
TERMINAL = {"completed", "failed", "cancelled"}


class StoreMachine(RuleBasedStateMachine):
    backend: Backend

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="store-machine-"))
        self.loop = asyncio.new_event_loop()
        self.clock = ManualClock()
        self.stores: dict[str, Store] = {}
        self.tokens: dict[str, tuple[str, str]] = {}  # run id → (owner, token) we last got
        self.terminal: dict[str, str] = {}
        self.issued: dict[str, list[tuple[str, str]]] = {}  # every token ever claimed
        self.max_seq = 0
        self.opened = False

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(asyncio.wait_for(coro, 30))

    @initialize()
    def open_two_owners(self) -> None:
        for owner in OWNERS:
            self._open(owner)
            self.run(self.stores[owner].register_owner(owner, lease_seconds=LEASE))
        self.opened = True

    def _open(self, owner: str) -> None:
        store = self.backend.make(self.dir, "machine.db", self.clock)
        self.run(store.open())
        self.stores[owner] = store

    def teardown(self) -> None:
        for store in self.stores.values():
            self.run(store.close())
        self.loop.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    # --- helpers -----------------------------------------------------------------------------

    def seq(self) -> int:
        return self.run(self.reader.last_seq())

    @property
    def reader(self) -> Store:
        return self.stores[OWNERS[0]]

    def token(self, run_id: str) -> tuple[Store, str]:
        owner, token = self.tokens.get(run_id, ("owner-a", "no-token"))
        return self.stores[owner], token

    def runs(self) -> list[Run]:
        """Every run, oldest first."""
        page = self.run(self.reader.list_runs(limit=10_000))
        assert page.next_cursor is None
        return page.items[::-1]

    def calls(self, run_id: str) -> list[ToolCall]:
        return self.run(self.reader.list_tool_calls(run_id))

    def pick(self, pick: int, *states: str) -> str | None:
        """One of the runs in ``states`` (any run when none given), or None."""
        ids = [r.id for r in self.runs() if not states or r.state in states]
        return ids[pick % len(ids)] if ids else None

    def expect_events(self, before: int, count: int) -> None:
        assert self.seq() - before == count, f"expected {count} event(s) for one change"

    # --- rules -------------------------------------------------------------------------------

    @rule(owner=st.sampled_from(OWNERS), text=st.sampled_from(["hi", None]))
    def create(self, owner: str, text: str | None) -> None:
        before = self.seq()
        self.run(self.stores[owner].create_run(new_run(text, owner_id=owner)))
        self.expect_events(before, 2 if text is not None else 1)

    @rule(owner=st.sampled_from(OWNERS), calls=st.integers(1, 3))
    def start_a_step(self, owner: str, calls: int) -> None:
        """A run created, claimed and its first tool calls reserved and started."""
        store = self.stores[owner]
        before = self.seq()
        run = self.run(
            store.claim_run(self.run(store.create_run(new_run("go"))).id, owner_id=owner)
        )
        assert run.execution_token
        self.tokens[run.id] = (owner, run.execution_token)
        self.issued.setdefault(run.id, []).append((owner, run.execution_token))
        names = ["read_file", "shell", "search"][:calls]
        _, reserved = self.run(
            store.commit_message(
                run.id,
                token=run.execution_token,
                message=assistant("step"),
                tool_calls=tool_calls(*names),
            )
        )
        self.run(
            store.set_tool_state(
                reserved[0].id, token=run.execution_token, to=ToolCallState.RUNNING
            )
        )
        self.expect_events(before, 2 + 1 + 1 + calls + 1)

    @rule(pick=st.integers(0, 50), owner=st.sampled_from(OWNERS), any_run=st.booleans())
    def claim(self, pick: int, owner: str, any_run: bool) -> None:
        run_id = self.pick(pick) if any_run else self.pick(pick, "queued")
        if run_id is None:
            return
        before = self.seq()
        try:
            run = self.run(self.stores[owner].claim_run(run_id, owner_id=owner))
        except errors.RunStateConflict:
            self.expect_events(before, 0)
            return
        assert run.execution_token
        self.tokens[run_id] = (owner, run.execution_token)
        self.issued.setdefault(run_id, []).append((owner, run.execution_token))
        self.expect_events(before, 1)

    @rule(pick=st.integers(0, 50), calls=st.integers(0, 3), idempotent=st.booleans())
    def commit(self, pick: int, calls: int, idempotent: bool) -> None:
        run_id = self.pick(pick, "running")
        if run_id is None:
            return
        store, token = self.token(run_id)
        before = self.seq()
        names = ["read_file", "shell", "search"][:calls]
        try:
            self.run(
                store.commit_message(
                    run_id,
                    token=token,
                    message=assistant("step"),
                    tool_calls=tool_calls(*names, idempotent=idempotent),
                )
            )
        except errors.OwnershipLost:
            self.expect_events(before, 0)
            return
        self.expect_events(before, 1 + calls)

    @rule(pick=st.integers(0, 50), to=st.sampled_from(list(ToolCallState)))
    def move_tool(self, pick: int, to: ToolCallState) -> None:
        run_id = self.pick(pick, "running", "input_required", "queued")
        if run_id is None:
            return
        ids = [c.id for c in self.calls(run_id)]
        if not ids:
            return
        store, token = self.token(run_id)
        before = self.seq()
        try:
            self.run(store.set_tool_state(ids[pick % len(ids)], token=token, to=to))
        except (errors.OwnershipLost, errors.IllegalTransition):
            self.expect_events(before, 0)
            return
        self.expect_events(before, 1)

    @rule(
        pick=st.integers(0, 50),
        to=st.sampled_from([RunState.COMPLETED, RunState.FAILED, RunState.QUEUED]),
    )
    def finish(self, pick: int, to: RunState) -> None:
        run_id = self.pick(pick)
        if run_id is None:
            return
        store, token = self.token(run_id)
        before = self.seq()
        try:
            self.run(store.finish_run(run_id, token=token, to=to))
        except (errors.OwnershipLost, errors.IllegalTransition):
            self.expect_events(before, 0)
            return
        self.expect_events(before, 1)

    @rule(pick=st.integers(0, 50), owner=st.sampled_from(OWNERS))
    def cancel(self, pick: int, owner: str) -> None:
        run_id = self.pick(pick)
        if run_id is None:
            return
        open_calls = sum(
            c.state in (ToolCallState.PENDING, ToolCallState.RUNNING) for c in self.calls(run_id)
        )
        before = self.seq()
        try:
            self.run(self.stores[owner].cancel_run(run_id, reason="test"))
        except errors.RunStateConflict:
            self.expect_events(before, 0)
            return
        self.expect_events(before, 1 + open_calls)

    @rule(pick=st.integers(0, 50))
    def ask(self, pick: int) -> None:
        run_id = self.pick(pick, "running", "input_required")
        if run_id is None:
            return
        store, token = self.token(run_id)
        before = self.seq()
        request = NewInputRequest(kind=InputKind.QUESTION, prompt="Which?")
        try:
            self.run(store.open_input_request(run_id, token=token, request=request))
        except (errors.OwnershipLost, errors.IllegalTransition):
            self.expect_events(before, 0)
            return
        self.expect_events(before, 1)

    @rule(pick=st.integers(0, 50), owner=st.sampled_from(OWNERS), key=st.sampled_from([None, "k"]))
    def answer(self, pick: int, owner: str, key: str | None) -> None:
        run_id = self.pick(pick)
        if run_id is None:
            return
        requests = self.run(self.reader.list_input_requests(run_id))
        if not requests:
            return
        request_id = requests[-1].id
        before = self.seq()
        try:
            self.run(
                self.stores[owner].answer_input_request(
                    request_id, answer="a", idempotency_key=key and f"{key}-{request_id}"
                )
            )
        except (errors.AlreadyAnswered, errors.RunStateConflict):
            self.expect_events(before, 0)
            return
        assert self.seq() - before in (0, 1)  # 0 when a receipt answered a retry

    @rule(pick=st.integers(0, 50))
    def checkpoint(self, pick: int) -> None:
        run_id = self.pick(pick, "running")
        if run_id is None:
            return
        store, token = self.token(run_id)
        before = self.seq()
        try:
            self.run(store.create_checkpoint(run_id, token=token, step=1))
        except errors.OwnershipLost:
            self.expect_events(before, 0)
            return
        self.expect_events(before, 1)

    @rule(owner=st.sampled_from(OWNERS), by=st.sampled_from(OWNERS))
    def owner_dies_and_is_recovered(self, owner: str, by: str) -> None:
        self.run(self.stores[owner].release_owner(owner))
        self.run(self.stores[by].recover_expired())
        self.run(self.stores[owner].register_owner(owner, lease_seconds=LEASE))

    @rule()
    def leases_expire_and_are_recovered(self) -> None:
        self.clock.advance(LEASE + 1)
        self.run(self.stores["owner-a"].recover_expired())
        for owner in OWNERS:
            try:
                self.run(self.stores[owner].heartbeat(owner))
                raise AssertionError("an expired, recovered owner kept its lease")
            except errors.OwnershipLost:
                self.run(self.stores[owner].register_owner(owner, lease_seconds=LEASE))

    @rule(owner=st.sampled_from(OWNERS))
    def crash_mid_transaction(self, owner: str) -> None:
        """Writes without a commit, then the connection goes away (as when a process dies)."""
        if self.backend.crash is None:
            return
        self.run(self.backend.crash(self.stores[owner]))
        self._open(owner)

    # --- invariants --------------------------------------------------------------------------

    @invariant()
    def the_log_explains_every_row(self) -> None:
        if not self.opened:
            return
        events = self.run(self.reader.read_events(limit=1_000_000))
        seqs = [e.seq for e in events]
        assert seqs == sorted(set(seqs)), "seq strictly increases"
        assert not seqs or seqs[-1] >= self.max_seq, "seq never goes back"
        self.max_seq = max(seqs, default=0)
        run_state: dict[str, str | None] = {}
        tool_state: dict[str, str | None] = {}
        messages: dict[str, int] = {}
        for event in events:
            if isinstance(event, RunStateChanged):
                assert run_state.get(event.run_id) == event.from_state, "run events chain"
                run_state[event.run_id] = event.to_state
            elif isinstance(event, ToolStateChanged):
                assert tool_state.get(event.tool_call_id) == event.from_state, "tool events chain"
                tool_state[event.tool_call_id] = event.to_state
            elif isinstance(event, MessageCommitted):
                messages[event.message.id] = messages.get(event.message.id, 0) + 1
        runs = self.runs()
        assert run_state == {r.id: r.state for r in runs}, "replaying events gives run states"
        db_tools = {c.id: c.state for r in runs for c in self.calls(r.id)}
        assert tool_state == db_tools, "replaying events gives each tool call's state"
        db_messages = {
            m.id for r in runs for m in self.run(self.reader.list_messages(r.id, limit=10_000))
        }
        assert messages == dict.fromkeys(db_messages, 1), "one event per message"

    @invariant()
    def terminal_states_never_change(self) -> None:
        if not self.opened:
            return
        for run in self.runs():
            if run.id in self.terminal:
                assert run.state == self.terminal[run.id]
            elif run.state in TERMINAL:
                self.terminal[run.id] = run.state

    @invariant()
    def no_run_is_held_by_two_owners(self) -> None:
        if not self.opened:
            return
        for run in self.runs():
            holders = [
                owner
                for owner, token in self.issued.get(run.id, [])
                if token == run.execution_token
            ]
            if run.state in ("queued", *TERMINAL):
                assert run.execution_token is None
            if run.state == "running":
                assert run.execution_token is not None
                assert holders == [run.owner_id]


def _machine_for(backend: Backend) -> type[StoreMachine]:
    machine = type(f"StoreMachine_{backend.name}", (StoreMachine,), {"backend": backend})
    machine.TestCase.settings = settings(
        max_examples=30,
        stateful_step_count=25,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    if backend.unavailable:
        machine.TestCase = unittest.skip(f"{backend.name}: {backend.unavailable}")(machine.TestCase)
    return machine


for _name, _backend in BACKENDS.items():
    globals()[f"test_store_state_machine_{_name}"] = _machine_for(_backend).TestCase
