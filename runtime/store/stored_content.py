"""How the SQLite store keeps a message's content: its JSON text, or that text zlib-compressed
(a BLOB) when that saves space.

A tool message of three 1 KB results is ~3.5 KB of JSON that zlib keeps in ~1.1 KB, and the
message rows were most of a database's size. The column's type is the format flag: a TEXT value
is JSON, a BLOB value is compressed JSON, so rows written before compression (and small ones,
which zlib would not shrink) stay as they are. PostgreSQL needs none of this: it compresses
large values itself (TOAST).

SQL cannot read inside a compressed value, so the searchable text of a message is extracted by
the SQL function ``agent_tui_message_text(content)``, which every connection that indexes,
searches or deletes messages registers (``register_functions``). It returns exactly what the
schema's JSON expression did before (text blocks and tool result contents, one per line), so the
search index stays valid across the change. Content with images is never compressed: deleting a
job finds the images still referenced elsewhere by their hash in the stored JSON.
"""

from __future__ import annotations

import json
import sqlite3
import zlib
from collections import OrderedDict
from typing import Any

from pydantic import TypeAdapter

COMPRESS_FROM_BYTES = 256
"""Content shorter than this stays JSON text: zlib's header and its dictionary-less start
would save little."""

MESSAGE_TEXT_FUNCTION = "agent_tui_message_text"


def encode_content(json_bytes: bytes, *, has_images: bool) -> str | bytes:
    """The value to store for content whose JSON is ``json_bytes``."""
    if has_images or len(json_bytes) < COMPRESS_FROM_BYTES:
        return json_bytes.decode()
    packed = _compressed(json_bytes)
    if len(packed) * 10 > len(json_bytes) * 9:  # saves under 10%: keep it readable
        return json_bytes.decode()
    return packed


_LOOKAHEAD = 262
"""zlib's MIN_LOOKAHEAD: a window reaches back this much less than its size."""
COMPRESS_LEVEL = 1
"""zlib's fastest level: on store_bench's messages (source text, 0.7 and 3.5 KB of JSON) it
kept 0.387 of the bytes against level 6's 0.363, in three quarters of the time (57 against
78 us a step): the database grew from 1.34x to 1.35x the raw bytes (budget 1.5x) and a step
cost about 0.03 CPU ms less."""


def _compressed(data: bytes) -> bytes:
    """``zlib.compress(data, COMPRESS_LEVEL)``'s bytes, faster for the few KiB a message holds.

    zlib's set-up for its default 32 KiB window and 128 KiB hash table cost more than
    compressing 1-4 KiB (44 against 12 us for 1 KiB, 62 against 29 us for 4 KiB, here): the
    window is made just large enough to hold all of the data, and the hash table smaller with
    it. A window that holds all of it (and zlib's look-ahead of 262 bytes) reaches every match
    the default one would: the output came out the same size as zlib's own at this level on
    every size tried. Any zlib reader takes it (the window size is in the stream's header).
    At level 1 the full hash table (memory level 8) cost no more than a smaller one."""
    window = min(15, max(9, (len(data) + _LOOKAHEAD - 1).bit_length()))
    packer = zlib.compressobj(COMPRESS_LEVEL, zlib.DEFLATED, window, 8)
    return packer.compress(data) + packer.flush()


def content_json(value: str | bytes) -> str | bytes:
    """The JSON of a stored content value (text or bytes, both accepted by ``json.loads`` and
    pydantic's ``validate_json``)."""
    return zlib.decompress(value) if isinstance(value, bytes) else value


def _sql_text(value: Any) -> str:
    """What SQLite's ``json_extract`` gives for a non-string JSON value, as text."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (int, float)):
        return str(value)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


_JSON_VALUE: TypeAdapter[Any] = TypeAdapter(Any)


def parse_json(data: str | bytes) -> Any:
    """``json.loads(data)``: pydantic-core's parser gives the same values in under half the
    time (the search indexing parses every message), and ``json`` parses what it refuses (an
    escaped lone surrogate)."""
    try:
        return _JSON_VALUE.validate_json(data)
    except ValueError:  # pydantic's ValidationError is one
        return json.loads(data)


KNOWN_TEXTS_KEPT = 256
"""Stored values whose text ``remember_text`` keeps for the search indexing, at most (the
indexing takes them every CHECKPOINT_EVERY = 100 commits, most of a message each)."""
KNOWN_TEXT_CHARS = 16 * 1024
"""A text longer than this is not kept (its indexing costs far more than its parse)."""
KNOWN_VALUE_SIZE = 32 * 1024
"""Nor is one whose stored value (the key it is kept by) is larger than this: a message with
little text may hold a large tool input (a file written whole). What is kept stays under about
12 MB even when nothing takes it."""
_known_texts: OrderedDict[str | bytes, str] = OrderedDict()
"""Stored value -> its text, for the values this process wrote and has not indexed yet."""


def remember_text(value: str | bytes, text: str) -> None:
    """Note that ``message_text(value)`` is ``text``, known when the value was made from the
    message's blocks: the search indexing (a batch every CHECKPOINT_EVERY commits, on the
    store's worker) then takes it instead of decompressing and parsing the value again (a
    third of the indexing's cost, store_bench). The text is a function of the value, so any
    connection of this process may take it; a value indexed elsewhere, or dropped as the
    oldest of KNOWN_TEXTS_KEPT, is read from the value as before. The dict's single calls are
    atomic under the GIL: the caller's thread adds, the worker takes."""
    if len(text) > KNOWN_TEXT_CHARS or len(value) > KNOWN_VALUE_SIZE:
        return
    _known_texts[value] = text
    while len(_known_texts) > KNOWN_TEXTS_KEPT:
        try:
            _known_texts.popitem(last=False)
        except KeyError:  # emptied by the worker meanwhile
            break


def message_text(value: str | bytes | None) -> str:
    """The searchable text of stored content: its text blocks and tool result contents, one
    per line ('' when it has none)."""
    if value is None:
        return ""
    known = _known_texts.pop(value, None)
    if known is not None:
        return known
    try:
        blocks = parse_json(content_json(value))
    except (ValueError, zlib.error):
        return ""
    parts: list[str] = []
    if not isinstance(blocks, list):
        return ""
    for block in blocks:
        if not isinstance(block, dict) or block.get("type") not in ("text", "tool_result"):
            continue
        part = block.get("text")
        if part is None:
            part = block.get("content")
        if part is not None:
            parts.append(part if isinstance(part, str) else _sql_text(part))
    return "\n".join(parts)


def register_functions(conn: sqlite3.Connection) -> None:
    """Make the schema's views and triggers usable on ``conn``."""
    conn.create_function(MESSAGE_TEXT_FUNCTION, 1, message_text, deterministic=True)
