"""Rewinding files to a checkpoint: snapshots before every approved write, restored byte for
byte; files changed outside agent-tui since are reported and left alone unless included."""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from runtime.api import Runtime
from runtime.config import Config
from runtime.models import Checkpoint, InputKind, RunState
from runtime.rewind import apply_rewind, plan_rewind, with_file_history
from runtime.store.sqlite import SqliteStore
from runtime.tools.builtin import builtin_tools
from tests.fakes.scripted import ScriptedProvider, Turn

ORIGINAL = "Notes — café\nthe answer is 42\n".encode()


def _edit(old: str, new: str) -> tuple[str, dict[str, str]]:
    return ("edit_file", {"path": "notes.txt", "old_string": old, "new_string": new})


SCRIPT = [
    Turn("Step one.", [_edit("42", "43")]),
    Turn(
        "Step two.", [_edit("43", "44"), ("write_file", {"path": "new/other.txt", "content": "b"})]
    ),
    Turn("Step three.", [_edit("44", "45")]),
    Turn("Done."),
]


@pytest.fixture
async def runtime(db_path: Path, workspace: Path) -> AsyncIterator[Runtime]:
    """A runtime whose write_file / edit_file record file history, as the app opens it."""
    (workspace / "notes.txt").write_bytes(ORIGINAL)
    provider = ScriptedProvider(list(SCRIPT))
    store = SqliteStore(db_path)

    async def no_sleep(seconds: float) -> None:
        return None

    opened = await Runtime.open(
        db_path=db_path,
        workspace=workspace,
        config=Config(),
        model="scripted:test",
        providers=lambda reference: provider,
        tools=with_file_history(builtin_tools(), store),
        store=store,
        sleep=no_sleep,
    )
    try:
        yield opened
    finally:
        await opened.close()


async def _three_approved_steps(
    runtime: Runtime, workspace: Path
) -> tuple[list[Checkpoint], dict[int, bytes]]:
    """Run the script, approving every call once; the file's bytes after each step."""
    run = await runtime.start("edit the notes three times")
    after_step: dict[int, bytes] = {0: ORIGINAL}
    while True:
        boundary = await runtime.wait(run.id, timeout=20)
        current = await runtime.get_run(run.id)
        after_step[current.step] = (workspace / "notes.txt").read_bytes()
        if boundary.request is None:
            break
        assert boundary.request.kind is InputKind.APPROVAL
        await runtime.respond(
            run.id, boundary.request.id, {"decision": "allow_once", "reason": None}
        )
    assert boundary.run.state is RunState.COMPLETED
    checkpoints = await runtime.checkpoints(run.id)
    return checkpoints, after_step


def _content_at(checkpoint: Checkpoint, steps: int) -> bytes:
    text = ORIGINAL.decode()
    for n in range(min(checkpoint.step, steps)):
        text = text.replace(str(42 + n), str(43 + n))
    return text.encode()


async def test_three_approved_edits_rewound_to_the_first_checkpoint_are_byte_identical(
    runtime: Runtime, workspace: Path, db_path: Path
) -> None:
    checkpoints, _ = await _three_approved_steps(runtime, workspace)
    assert (workspace / "notes.txt").read_bytes() == ORIGINAL.replace(b"42", b"45")
    first = checkpoints[0]
    assert first.step == 1  # made after the first step's edit
    expected = _content_at(first, 3)
    assert expected == ORIGINAL.replace(b"42", b"43")

    plan = await plan_rewind(runtime.store, first.id)
    by_path = {change.path: change for change in plan.changes}
    assert set(by_path) == {"notes.txt", "new/other.txt"}
    notes = by_path["notes.txt"]
    assert notes.writes == 2 and not notes.changed_outside and notes.action == "restore"
    assert "-the answer is 45" in notes.diff() and "+the answer is 43" in notes.diff()
    assert by_path["new/other.txt"].action == "remove"
    done = apply_rewind(plan)
    assert {change.path for change in done} == {"notes.txt", "new/other.txt"}
    assert (workspace / "notes.txt").read_bytes() == expected
    assert not (workspace / "new" / "other.txt").exists()

    # Each content is stored once, whatever number of snapshots name it.
    with sqlite3.connect(db_path) as conn:
        shas = [row[0] for row in conn.execute("SELECT sha256 FROM blobs")]
        assert len(shas) == len(set(shas))
        assert hashlib.sha256(ORIGINAL).hexdigest() in shas
        assert conn.execute("SELECT count(*) FROM file_snapshots").fetchone()[0] == 4


async def test_a_file_edited_by_hand_is_reported_and_not_overwritten_without_confirmation(
    runtime: Runtime, workspace: Path
) -> None:
    checkpoints, _ = await _three_approved_steps(runtime, workspace)
    first = checkpoints[0]
    hand = workspace / "new" / "other.txt"
    hand.write_text("my own words\n")

    plan = await plan_rewind(runtime.store, first.id)
    assert [c.path for c in plan.changed_outside] == ["new/other.txt"]
    assert [c.path for c in plan.safe] == ["notes.txt"]
    done = apply_rewind(plan)
    assert [c.path for c in done] == ["notes.txt"]
    assert hand.read_text() == "my own words\n"
    assert (workspace / "notes.txt").read_bytes() == ORIGINAL.replace(b"42", b"43")

    again = await plan_rewind(runtime.store, first.id)
    assert [c.path for c in again.changes] == ["new/other.txt"]
    done = apply_rewind(again, include_changed_outside=True)
    assert [c.path for c in done] == ["new/other.txt"]
    assert not hand.exists()


async def test_nothing_to_rewind_after_the_last_checkpoint(
    runtime: Runtime, workspace: Path
) -> None:
    checkpoints, _ = await _three_approved_steps(runtime, workspace)
    plan = await plan_rewind(runtime.store, checkpoints[-1].id)
    assert plan.changes == []
