"""Images in tool results (DESIGN §9): sniffed, sized, described for people and stored once by
hash; sent to models as image blocks. Audio and other binary content are only described."""

from __future__ import annotations

import base64
import os
import struct
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from runtime.errors import NotFoundError
from runtime.models import ImageBlock, Message, ToolResultBlock

if TYPE_CHECKING:
    from runtime.store.base import Store

MODEL_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
"""What the model APIs accept as images; other image types are described instead."""
EXTENSIONS = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/webp": "webp"}
MAX_IMAGE_BYTES = 5 * 1024 * 1024
"""Claude refuses larger images; a larger one is described instead."""


@dataclass(frozen=True)
class ToolImage:
    """An image a tool returned (bytes, not yet stored)."""

    data: bytes
    media_type: str


def sniff_media_type(data: bytes) -> str | None:
    """The image type from the first bytes, when it is one the models accept."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def image_size(data: bytes) -> tuple[int, int] | None:
    """``(width, height)`` read from the header of a PNG, GIF, JPEG or WebP; None otherwise."""
    try:
        kind = sniff_media_type(data)
        if kind == "image/png" and data[12:16] == b"IHDR":
            width, height = struct.unpack(">II", data[16:24])
            return int(width), int(height)
        if kind == "image/gif":
            width, height = struct.unpack("<HH", data[6:10])
            return int(width), int(height)
        if kind == "image/jpeg":
            return _jpeg_size(data)
        if kind == "image/webp":
            return _webp_size(data)
    except struct.error:
        return None
    return None


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    index = 2
    while index + 9 < len(data):
        if data[index] != 0xFF:
            index += 1
            continue
        marker = data[index + 1]
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
            index += 2
            continue
        (length,) = struct.unpack(">H", data[index + 2 : index + 4])
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height, width = struct.unpack(">HH", data[index + 5 : index + 9])
            return int(width), int(height)
        index += 2 + length
    return None


def _webp_size(data: bytes) -> tuple[int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8X":
        width = int.from_bytes(data[24:27], "little") + 1
        height = int.from_bytes(data[27:30], "little") + 1
        return width, height
    if chunk == b"VP8 ":
        width, height = struct.unpack("<HH", data[26:30])
        return int(width) & 0x3FFF, int(height) & 0x3FFF
    if chunk == b"VP8L":
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    return None


def human_size(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{round(size / 1024)} KB"
    return f"{size / (1024 * 1024):.1f} MB"


def describe_image(media_type: str, size: int, dimensions: tuple[int, int] | None) -> str:
    """``[image: png 640×480, 12 KB]``."""
    kind = media_type.removeprefix("image/")
    shape = f" {dimensions[0]}×{dimensions[1]}" if dimensions else ""
    return f"[image: {kind}{shape}, {human_size(size)}]"


def describe_binary(kind: str, media_type: str, size: int) -> str:
    """``[audio: audio/wav, 48 KB]`` — binary content the model is told about, never sent."""
    return f"[{kind}: {media_type}, {human_size(size)}]"


def decode_base64(data: str) -> bytes | None:
    try:
        return base64.b64decode(data, validate=False)
    except ValueError:
        return None


def sendable(image: ToolImage) -> bool:
    """Whether a model can be sent this image (a type it accepts, within the size limit)."""
    kind = sniff_media_type(image.data)
    return kind is not None and kind in MODEL_IMAGE_TYPES and len(image.data) <= MAX_IMAGE_BYTES


async def store_images(store: Store, images: Sequence[ToolImage]) -> list[ImageBlock]:
    """Store each image once by hash (``put_blob``) and return the blocks that refer to them,
    for ``ToolResultBlock.images``. Images a model cannot take are left out (the result's text
    describes them)."""
    blocks: list[ImageBlock] = []
    for image in images:
        if not sendable(image):
            continue
        media_type = sniff_media_type(image.data) or image.media_type
        digest = await store.put_blob(image.data, media_type)
        width, height = image_size(image.data) or (None, None)
        blocks.append(
            ImageBlock(
                media_type=media_type,
                sha256=digest,
                size=len(image.data),
                width=width,
                height=height,
            )
        )
    return blocks


async def with_image_data(store: Store, messages: Sequence[Message]) -> list[Message]:
    """The messages with each tool result image's bytes loaded (``ImageBlock.data``, base64)
    for a model request; the stored messages never hold them."""
    return await RequestImages(store).attach(messages)


class RequestImages:
    """Loads the bytes of tool-result images for an execution's model requests: each image is
    read from the store once, and each request looks only at the messages added since the last
    one (a step costs the same whatever the length of the history)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._data: dict[str, str] = {}
        """sha256 → base64 bytes."""
        self._last: Message | None = None
        """The last message scanned: a request's messages after it are the new ones."""
        self._loaded: dict[str, Message] = {}
        """message id → the message with its images' bytes."""

    async def attach(self, messages: Sequence[Message]) -> list[Message]:
        start = 0
        if self._last is not None:
            # From the end: a request carries the last one's messages and a few more (or,
            # after a compaction or a reload, not the last scanned one: all are looked at).
            for index in range(len(messages) - 1, -1, -1):
                if messages[index] is self._last:
                    start = index + 1
                    break
        for message in messages[start:]:
            if message.id not in self._loaded and any(
                isinstance(b, ToolResultBlock) and b.images for b in message.content
            ):
                self._loaded[message.id] = await self._load(message)
        if messages:
            self._last = messages[-1]
        if not self._loaded:
            return list(messages)
        return [self._loaded.get(message.id, message) for message in messages]

    async def _load(self, message: Message) -> Message:
        content = []
        for block in message.content:
            if isinstance(block, ToolResultBlock) and block.images:
                images = []
                for image in block.images:
                    if image.sha256 not in self._data:
                        try:
                            _, data = await self._store.get_blob(image.sha256)
                        except NotFoundError:  # gone: the result's text still describes it
                            continue
                        self._data[image.sha256] = base64.b64encode(data).decode("ascii")
                    images.append(image.model_copy(update={"data": self._data[image.sha256]}))
                block = block.model_copy(update={"images": images})
            content.append(block)
        return message.model_copy(update={"content": content})


async def save_image(store: Store, image: ImageBlock, folder: Path) -> Path:
    """Write a stored image to ``folder`` as ``agent-tui-image-<hash>.<ext>`` (atomically: a
    temp file, then rename) for a person to open; the same image always gets the same name."""
    media_type, data = await store.get_blob(image.sha256)
    extension = EXTENSIONS.get(media_type, "bin")
    path = folder / f"agent-tui-image-{image.sha256[:12]}.{extension}"
    folder.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=folder)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    return path
