"""Random sequences of store operations, with crashes and a second owner on the same file,
checked after every step against the rules of DESIGN §4-§6."""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
import tempfile
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
from runtime.models import InputKind, RunState, ToolCallState
from runtime.store.base import NewInputRequest
from runtime.store.sqlite import SqliteStore
from tests.store.helpers import assistant, new_run, tool_calls

T = TypeVar("T")
OWNERS = ("owner-a", "owner-b")
LEASE = 10.0
TERMINAL = {"completed", "failed", "cancelled"}


class StoreMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="store-machine-"))
        self.path = self.dir / "machine.db"
        self.loop = asyncio.new_event_loop()
        self.clock = ManualClock()
        self.stores: dict[str, SqliteStore] = {}
        self.tokens: dict[str, tuple[str, str]] = {}  # run id → (owner, token) we last got
        self.terminal: dict[str, str] = {}
        self.issued: dict[str, list[tuple[str, str]]] = {}  # every token ever claimed
        self.max_seq = 0
        self.reader: sqlite3.Connection | None = None

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(asyncio.wait_for(coro, 30))

    @initialize()
    def open_two_owners(self) -> None:
        for owner in OWNERS:
            self._open(owner)
            self.run(self.stores[owner].register_owner(owner, lease_seconds=LEASE))
        self.reader = sqlite3.connect(self.path)
        self.reader.row_factory = sqlite3.Row

    def _open(self, owner: str) -> None:
        store = SqliteStore(self.path, clock=self.clock)
        self.run(store.open())
        self.stores[owner] = store

    def teardown(self) -> None:
        for store in self.stores.values():
            self.run(store.close())
        if self.reader is not None:
            self.reader.close()
        self.loop.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    # --- helpers -----------------------------------------------------------------------------

    def seq(self) -> int:
        assert self.reader is not None
        return int(self.reader.execute("SELECT coalesce(max(seq), 0) FROM events").fetchone()[0])

    def token(self, run_id: str) -> tuple[SqliteStore, str]:
        owner, token = self.tokens.get(run_id, ("owner-a", "no-token"))
        return self.stores[owner], token

    def pick(self, pick: int, *states: str) -> str | None:
        """One of the runs in ``states`` (any run when none given), or None."""
        assert self.reader is not None
        sql = "SELECT id FROM runs"
        if states:
            sql += " WHERE state IN ({})".format(", ".join("?" * len(states)))
        ids = [r[0] for r in self.reader.execute(sql + " ORDER BY n", states)]
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
        assert self.reader is not None
        run_id = self.pick(pick, "running", "input_required", "queued")
        if run_id is None:
            return
        ids = [
            r[0]
            for r in self.reader.execute("SELECT id FROM tool_calls WHERE run_id = ?", (run_id,))
        ]
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
        assert self.reader is not None
        run_id = self.pick(pick)
        if run_id is None:
            return
        open_calls = self.reader.execute(
            "SELECT count(*) FROM tool_calls WHERE run_id = ? AND state IN ('pending', 'running')",
            (run_id,),
        ).fetchone()[0]
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
        assert self.reader is not None
        run_id = self.pick(pick)
        if run_id is None:
            return
        row = self.reader.execute(
            "SELECT id FROM input_requests WHERE run_id = ? ORDER BY n DESC", (run_id,)
        ).fetchone()
        if row is None:
            return
        before = self.seq()
        try:
            self.run(
                self.stores[owner].answer_input_request(
                    row[0], answer="a", idempotency_key=key and f"{key}-{row[0]}"
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
        store = self.stores[owner]
        db = store._db
        assert db is not None
        self.run(db.execute("BEGIN IMMEDIATE"))
        self.run(db.execute("UPDATE runs SET state = 'completed', revision = revision + 1"))
        self.run(
            db.execute(
                "INSERT INTO events (job_id, run_id, kind, created_at, payload)"
                " VALUES ('x', 'x', 'run_state_changed', 0, '{}')"
            )
        )
        self.run(db.close())
        store._db = None
        self._open(owner)

    # --- invariants --------------------------------------------------------------------------

    @invariant()
    def the_log_explains_every_row(self) -> None:
        if self.reader is None:
            return
        rows = self.reader.execute("SELECT seq, payload FROM events ORDER BY seq").fetchall()
        seqs = [r[0] for r in rows]
        assert seqs == sorted(set(seqs)), "seq strictly increases"
        assert not seqs or seqs[-1] >= self.max_seq, "seq never goes back"
        self.max_seq = max(seqs, default=0)
        run_state: dict[str, str | None] = {}
        tool_state: dict[str, str | None] = {}
        messages: dict[str, int] = {}
        for _, payload in rows:
            event = json.loads(payload)
            if event["kind"] == "run_state_changed":
                assert run_state.get(event["run_id"]) == event["from"], "run events chain"
                run_state[event["run_id"]] = event["to"]
            elif event["kind"] == "tool_state_changed":
                assert tool_state.get(event["tool_call_id"]) == event["from"], "tool events chain"
                tool_state[event["tool_call_id"]] = event["to"]
            elif event["kind"] == "message_committed":
                message_id = event["message"]["id"]
                messages[message_id] = messages.get(message_id, 0) + 1
        db_runs = {r["id"]: r["state"] for r in self.reader.execute("SELECT id, state FROM runs")}
        assert run_state == db_runs, "replaying events gives each run's state"
        db_tools = {
            r["id"]: r["state"] for r in self.reader.execute("SELECT id, state FROM tool_calls")
        }
        assert tool_state == db_tools, "replaying events gives each tool call's state"
        db_messages = {r[0] for r in self.reader.execute("SELECT id FROM messages")}
        assert messages == dict.fromkeys(db_messages, 1), "one event per message"

    @invariant()
    def terminal_states_never_change(self) -> None:
        if self.reader is None:
            return
        for run_id, state in self.reader.execute("SELECT id, state FROM runs"):
            if run_id in self.terminal:
                assert state == self.terminal[run_id]
            elif state in TERMINAL:
                self.terminal[run_id] = state

    @invariant()
    def no_run_is_held_by_two_owners(self) -> None:
        if self.reader is None:
            return
        for row in self.reader.execute("SELECT id, state, owner_id, execution_token FROM runs"):
            holders = [
                owner
                for owner, token in self.issued.get(row["id"], [])
                if token == row["execution_token"]
            ]
            if row["state"] in ("queued", *TERMINAL):
                assert row["execution_token"] is None
            if row["state"] == "running":
                assert row["execution_token"] is not None
                assert holders == [row["owner_id"]]


StoreMachine.TestCase.settings = settings(
    max_examples=30,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_store_state_machine = StoreMachine.TestCase
