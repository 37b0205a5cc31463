"""Message content stored compressed (migration 11), on real SQLite files: what is compressed,
that it reads back whole, that search and deletion see its text, and that the rows and search
index of a version 10 database stay valid."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import zlib
from pathlib import Path

import pytest

from runtime.models import (
    ContentBlock,
    ImageBlock,
    Role,
    RunState,
    TextBlock,
    ThinkingBlock,
    ToolCallState,
    ToolResultBlock,
    ToolUseBlock,
)
from runtime.store.base import NewMessage, ToolStateChange
from runtime.store.migrations import _MESSAGE_TEXT, LATEST_VERSION, migrate
from runtime.store.sqlite import SqliteStore, _stored_content
from runtime.store.stored_content import (
    COMPRESS_LEVEL,
    content_json,
    encode_content,
    message_text,
    register_functions,
)
from tests.store.helpers import running_run, step_with_tools

# Varied text, as a real tool result is (a repeated phrase would compress far better).
SOURCE = Path(asyncio.__file__).with_name("base_events.py").read_text(encoding="utf-8")


def _stored(path: Path) -> dict[str, tuple[str, int, str | bytes]]:
    """message id → (SQLite type of its content, stored length, stored value)."""
    conn = sqlite3.connect(path)
    try:
        return {
            r[0]: (r[1], r[2], r[3])
            for r in conn.execute(
                "SELECT id, typeof(content), length(CAST(content AS BLOB)), content FROM messages"
            )
        }
    finally:
        conn.close()


def _fts_integrity(path: Path) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    register_functions(conn)
    try:
        # Raises "database disk image is malformed" when the index and the messages differ.
        conn.execute("INSERT INTO messages_fts (messages_fts, rank) VALUES ('integrity-check', 1)")
    finally:
        conn.close()


async def test_a_large_tool_message_is_stored_compressed_and_reads_back_whole(
    tmp_path: Path,
) -> None:
    path = tmp_path / "agent.db"
    results = [SOURCE[i * 1500 : i * 1500 + 1200] for i in range(3)]
    async with SqliteStore(path) as store:
        run, token = await running_run(store)
        calls = await step_with_tools(store, run, token, "read_file", "read_file", "read_file")
        content = [
            ToolResultBlock(tool_use_id=c.provider_id, tool_call_id=c.id, content=text)
            for c, text in zip(calls, results, strict=True)
        ]
        running = [ToolStateChange(tool_call_id=c.id, to=ToolCallState.RUNNING) for c in calls]
        await store.set_tool_states(run.id, token=token, changes=running)
        _, tool_message, _ = await store.finish_step(
            run.id,
            token=token,
            tool_changes=[
                ToolStateChange(tool_call_id=c.id, to=ToolCallState.COMPLETED, result=text)
                for c, text in zip(calls, results, strict=True)
            ],
            message=NewMessage(role=Role.TOOL, content=content),
            checkpoint_step=1,
        )
        assert tool_message is not None
        short, _ = await store.commit_message(
            run.id,
            token=token,
            message=NewMessage(role=Role.ASSISTANT, content=[TextBlock(text="Done.")]),
        )
        messages = {m.id: m for m in (await store.list_messages(run.id))}
        assert messages[tool_message.id].content == content
        # The result each call reports is the one its tool message carries.
        for call, text in zip(calls, results, strict=True):
            assert (await store.get_tool_call(call.id)).result == text
    stored = _stored(path)
    kind, length, _ = stored[tool_message.id]
    json_length = len(json.dumps([b.model_dump(mode="json") for b in content]))
    assert kind == "blob" and length < json_length / 2
    # A short message stays JSON text, readable by any SQLite tool.
    assert stored[short.id][0] == "text" and json.loads(stored[short.id][2])[0]["text"] == "Done."
    async with SqliteStore(path) as store:  # and after reopening
        assert (await store.list_messages(run.id))[-2].content == content


async def test_search_finds_and_snippets_words_inside_compressed_content(tmp_path: Path) -> None:
    path = tmp_path / "agent.db"
    text = SOURCE[:2000] + "\nthe quokka sleeps here\n" + SOURCE[2000:4000]
    async with SqliteStore(path) as store:
        run, token = await running_run(store)
        calls = await step_with_tools(store, run, token, "read_file")
        message, _ = await store.commit_message(
            run.id,
            token=token,
            message=NewMessage(
                role=Role.TOOL,
                content=[
                    ToolResultBlock(
                        tool_use_id=calls[0].provider_id, tool_call_id=calls[0].id, content=text
                    )
                ],
            ),
        )
        hits = await store.search_messages("quokka")
        assert [h.message_id for h in hits] == [message.id]
        assert "quokka" in hits[0].snippet
        assert _stored(path)[message.id][0] == "blob"
        # Deleting the job takes its text out of the index (the trigger reads the blob).
        await store.finish_run(run.id, token=token, to=RunState.COMPLETED)
        await store.set_job_archived(run.job_id, True)
        await store.delete_job(run.job_id)
        assert await store.search_messages("quokka") == []
    _fts_integrity(path)


async def test_content_with_images_stays_json_so_deleting_a_job_keeps_a_shared_blob(
    tmp_path: Path,
) -> None:
    path = tmp_path / "agent.db"
    async with SqliteStore(path) as store:
        png = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8
        sha = await store.put_blob(png, "image/png")
        # One job snapshots a file whose bytes are the image another job's tool returned.
        first, first_token = await running_run(store)
        [snapshot_call] = await step_with_tools(store, first, first_token, "write_file")
        await store.record_file_snapshot(snapshot_call.id, "logo.png", png)
        second, second_token = await running_run(store, owner_id="owner-2")
        [call] = await step_with_tools(store, second, second_token, "read_file")
        image = ImageBlock(media_type="image/png", sha256=sha, size=len(png))
        message, _ = await store.commit_message(
            second.id,
            token=second_token,
            message=NewMessage(
                role=Role.TOOL,
                content=[
                    ToolResultBlock(
                        tool_use_id=call.provider_id,
                        tool_call_id=call.id,
                        content=SOURCE[:3000],  # large enough to be compressed otherwise
                        images=[image],
                    )
                ],
            ),
        )
        assert _stored(path)[message.id][0] == "text"
        await store.finish_run(first.id, token=first_token, to=RunState.COMPLETED)
        await store.set_job_archived(first.job_id, True)
        removed = await store.delete_job(first.job_id)
        assert removed["blobs"] == 0
        assert await store.get_blob(sha) == ("image/png", png)


@pytest.mark.parametrize(
    "content",
    [
        [{"type": "text", "text": "plain words"}],
        [
            {"type": "text", "text": "first"},
            {"type": "thinking", "thinking": "not searched"},
            {"type": "tool_use", "id": "t", "tool_call_id": "c", "name": "n", "input": {}},
            {"type": "tool_result", "tool_use_id": "t", "tool_call_id": "c", "content": "ré"},
            {"type": "text", "text": "last"},
        ],
        [{"type": "thinking", "thinking": "nothing searchable"}],
        [],
    ],
)
def test_the_text_function_gives_what_the_json_expression_gave(content: list[object]) -> None:
    """The index of a version 10 database was built by the JSON expression; deleting one of
    its messages now gives the index the function's text, which must be the same."""
    conn = sqlite3.connect(":memory:")
    try:
        stored = json.dumps(content, ensure_ascii=False)
        (expected,) = conn.execute(
            f"SELECT coalesce({_MESSAGE_TEXT.format(content='?')}, '')", (stored,)
        ).fetchone()
    finally:
        conn.close()
    assert message_text(stored) == expected


@pytest.mark.parametrize(
    "content",
    [
        [TextBlock(text="plain words")],
        [TextBlock(text=SOURCE[:2000]), TextBlock(text="second, é \u2028 \x00 end")],
        [
            ThinkingBlock(thinking="not searched"),
            ToolUseBlock(id="t", tool_call_id="c", name="n", input={"path": "x"}),
            ToolResultBlock(tool_use_id="t", tool_call_id="c", content=SOURCE[:3000]),
            ToolResultBlock(tool_use_id="u", tool_call_id="d", content=" padded\n"),
            ToolResultBlock(tool_use_id="v", tool_call_id="e", content=""),
            TextBlock(text="last"),
        ],
        [
            ToolResultBlock(
                tool_use_id="t",
                tool_call_id="c",
                content=SOURCE[:3000],
                images=[ImageBlock(media_type="image/png", sha256="ab" * 32, size=3)],
            )
        ],
        [ThinkingBlock(thinking="nothing searchable")],
        [],
    ],
)
def test_the_text_noted_when_content_is_stored_is_the_text_read_from_the_stored_value(
    content: list[ContentBlock],
) -> None:
    """The search indexing takes the text noted at the commit instead of reading the value:
    the two must agree, or the index would differ from what a later delete takes out."""
    from runtime.store import stored_content

    value = _stored_content(content)
    assert value in stored_content._known_texts  # else both reads below parse the value
    noted = message_text(value)  # taken from what the commit noted
    assert value not in stored_content._known_texts
    assert message_text(value) == noted  # read from the value itself


def test_the_texts_noted_for_the_indexing_stay_bounded_when_nothing_indexes_them() -> None:
    """Another process may index what this one wrote: what it noted is dropped oldest first,
    and a long text is never kept."""
    from runtime.store import stored_content

    for index in range(stored_content.KNOWN_TEXTS_KEPT + 50):
        _stored_content([TextBlock(text=f"message {index} " + SOURCE[:400])])
    _stored_content([TextBlock(text=SOURCE[: stored_content.KNOWN_TEXT_CHARS + 1])])
    # Little text, a large value: a file written whole is a tool input, not searchable text.
    written = os.urandom(stored_content.KNOWN_VALUE_SIZE).hex()
    _stored_content(
        [
            TextBlock(text="I will write it."),
            ToolUseBlock(
                id="t", tool_call_id="c", name="write_file", input={"path": "a", "content": written}
            ),
        ]
    )
    kept = stored_content._known_texts
    assert len(kept) <= stored_content.KNOWN_TEXTS_KEPT
    assert all(len(text) <= stored_content.KNOWN_TEXT_CHARS for text in kept.values())
    assert all(len(value) <= stored_content.KNOWN_VALUE_SIZE for value in kept)
    kept.clear()


def test_text_the_fast_json_parser_refuses_is_read_as_json_reads_it() -> None:
    stored = '[{"type": "text", "text": "lone \\ud800 surrogate"}]'
    assert message_text(stored) == json.loads(stored)[0]["text"] == "lone \ud800 surrogate"


def test_compressed_and_plain_forms_give_the_same_text() -> None:
    import zlib

    stored = json.dumps([{"type": "text", "text": SOURCE[:500]}])
    assert message_text(zlib.compress(stored.encode())) == message_text(stored) == SOURCE[:500]


async def test_a_version_10_database_keeps_its_rows_and_index_and_compresses_new_ones(
    tmp_path: Path,
) -> None:
    path = tmp_path / "agent.db"
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, path=str(path), upto=10)
    conn.execute(
        "INSERT INTO jobs (id, title, workspace, agent, created_at, updated_at)"
        " VALUES ('job1', 'Old job', '/w', 'default', 1.0, 2.0)"
    )
    conn.execute(
        "INSERT INTO runs (id, job_id, agent, model, state, revision, input, max_steps,"
        " created_at, updated_at) VALUES ('run1', 'job1', 'default', 'demo', 'completed', 3,"
        " 'x', 50, 1.0, 2.0)"
    )
    old_text = "an old wombat\n" + SOURCE[:1500]
    conn.execute(
        "INSERT INTO messages (id, run_id, job_id, position, role, content, created_at)"
        " VALUES ('m0', 'run1', 'job1', 0, 'user', json_array(json_object('type', 'text',"
        " 'text', ?)), 1.0)",
        (old_text,),
    )
    # Indexed as version 10 indexed it: by the JSON expression.
    conn.execute(
        "INSERT INTO messages_fts (rowid, text) SELECT n,"
        f" coalesce({_MESSAGE_TEXT.format(content='content')}, '') FROM messages"
    )
    conn.close()
    async with SqliteStore(path) as store:
        [old] = await store.list_messages("run1")
        assert old.content == [TextBlock(text=old_text)]
        assert [h.message_id for h in await store.search_messages("wombat")] == ["m0"]
        run, token = await running_run(store)
        new, _ = await store.commit_message(
            run.id,
            token=token,
            message=NewMessage(
                role=Role.ASSISTANT, content=[TextBlock(text="a new wombat\n" + SOURCE[:1500])]
            ),
        )
        assert {h.message_id for h in await store.search_messages("wombat")} == {"m0", new.id}
        # Deleting the old job removes its JSON-indexed text from the index exactly.
        await store.set_job_archived("job1", True)
        await store.delete_job("job1")
        assert [h.message_id for h in await store.search_messages("wombat")] == [new.id]
    stored = _stored(path)
    assert stored[new.id][0] == "blob" and "m0" not in stored
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == LATEST_VERSION
    conn.close()
    _fts_integrity(path)


@pytest.mark.parametrize("size", [256, 511, 512, 513, 4_096, 4_097, 32_768, 100_000])
def test_content_compressed_with_a_window_fitted_to_it_is_as_small_as_zlibs_default(
    size: int,
) -> None:
    """The window is sized to the content (for speed); across the sizes where it changes, the
    stored bytes read back whole with plain zlib and are no larger than zlib's default window
    gives at the same level."""
    data = (SOURCE * 3)[1_000 : 1_000 + size].encode()
    stored = encode_content(data, has_images=False)
    assert isinstance(stored, bytes)
    assert zlib.decompress(stored) == data == content_json(stored)
    assert len(stored) <= len(zlib.compress(data, COMPRESS_LEVEL))
