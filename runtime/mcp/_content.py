"""A tool result as the model reads it: text joined, images as images (described in the text
as ``[image: png 640×480, 12 KB]``), structured content once, other binary content described —
never pasted as base64."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types

from runtime.images import (
    ToolImage,
    decode_base64,
    describe_binary,
    describe_image,
    image_size,
    sendable,
    sniff_media_type,
)


@dataclass
class Rendered:
    text: str
    structured: dict[str, Any] | None
    images: list[ToolImage] = field(default_factory=list)


class _Collector:
    def __init__(self) -> None:
        self.images: list[ToolImage] = []
        self._seen: dict[bytes, str] = {}

    def binary(self, kind: str, media_type: str, data: str) -> str:
        """The description of base64 ``data``; an image the model can take is kept (once)."""
        raw = decode_base64(data)
        if raw is None:
            return describe_binary(kind, media_type, len(data) * 3 // 4)
        if raw in self._seen:
            return self._seen[raw]
        if media_type.startswith("image/") or kind == "image":
            image = ToolImage(data=raw, media_type=sniff_media_type(raw) or media_type)
            label = describe_image(image.media_type, len(raw), image_size(raw))
            if sendable(image):
                self.images.append(image)
            else:
                label = label.removesuffix("]") + ", not sent: the model cannot take it]"
        else:
            label = describe_binary(kind, media_type, len(raw))
        self._seen[raw] = label
        return label

    def block(self, block: types.ContentBlock) -> str:
        match block:
            case types.TextContent():
                return block.text
            case types.ImageContent():
                return self.binary("image", block.mime_type, block.data)
            case types.AudioContent():
                return self.binary("audio", block.mime_type, block.data)
            case types.ResourceLink():
                return f"[resource link: {block.uri}" + (f" ({block.name})]" if block.name else "]")
            case types.EmbeddedResource():
                resource = block.resource
                if isinstance(resource, types.TextResourceContents):
                    return resource.text
                mime = resource.mime_type or "application/octet-stream"
                kind = "image" if mime.startswith("image/") else "resource"
                label = self.binary(kind, mime, resource.blob)
                return label if kind == "image" else f"{label[:-1]}, {resource.uri}]"
        return f"[{getattr(block, 'type', 'unknown')} content]"  # pragma: no cover

    def strip(self, value: Any) -> Any:
        """Structured content with binary parts (image/audio blocks, resource blobs) replaced by
        their descriptions; images among them are kept like image blocks."""
        if isinstance(value, list):
            return [self.strip(item) for item in value]
        if not isinstance(value, dict):
            return value
        kind = value.get("type")
        if kind in ("image", "audio") and isinstance(value.get("data"), str):
            mime = str(value.get("mimeType") or value.get("mime_type") or f"{kind}/unknown")
            return self.binary(str(kind), mime, value["data"])
        if isinstance(value.get("blob"), str):
            mime = str(value.get("mimeType") or "application/octet-stream")
            return self.binary(
                "image" if mime.startswith("image/") else "resource", mime, value["blob"]
            )
        return {key: self.strip(item) for key, item in value.items()}


def _repeats_text(structured: Any, texts: list[str]) -> bool:
    """Whether the structured content only repeats the text blocks (servers are told to send
    both). Wrappers of one key count as a repeat of what they wrap: FastMCP-style servers send
    ``{"result": value}``, server-filesystem ``{"content": text}``."""
    candidates = [structured]
    while isinstance(candidates[-1], dict) and len(candidates[-1]) == 1:
        candidates.append(next(iter(candidates[-1].values())))
    if isinstance(candidates[-1], list) and candidates[-1] == texts:
        return True  # the content blocks themselves, binary already described
    joined = "\n".join(texts)
    for text in [*texts, joined] if len(texts) > 1 else texts:
        for candidate in candidates:
            if isinstance(candidate, str) and candidate.strip() == text.strip():
                return True
            try:
                if json.loads(text) == candidate:
                    return True
            except ValueError:
                continue
    return False


def render(result: types.CallToolResult, *, structured_primary: bool = False) -> Rendered:
    """The result's text for the model, its structured content (when it is an object) and its
    images.

    Structured content that repeats the content blocks is not sent again. When it differs, the
    form the server marks as primary is sent: with an ``outputSchema`` (``structured_primary``)
    the structured content (and the non-text blocks), otherwise the text and then the JSON.
    """
    collector = _Collector()
    texts = [collector.block(block) for block in result.content]
    structured = result.structured_content
    if structured is not None:
        stripped = collector.strip(structured)
        if not _repeats_text(stripped, texts):
            encoded = json.dumps(stripped, ensure_ascii=False, sort_keys=True)
            if structured_primary:
                others = [
                    text
                    for block, text in zip(result.content, texts, strict=True)
                    if not isinstance(block, types.TextContent)
                ]
                texts = [encoded, *others]
            else:
                texts.append(encoded)
    kept = structured if isinstance(structured, dict) else None
    if kept is not None and collector.images:
        stripped_kept = collector.strip(kept)  # no base64 in what is stored as structured
        kept = stripped_kept if isinstance(stripped_kept, dict) else None
    return Rendered("\n".join(texts), kept, collector.images)


def render_result(
    result: types.CallToolResult, *, structured_primary: bool = False
) -> tuple[str, dict[str, Any] | None]:
    """``render`` without the images: the text and the structured content."""
    rendered = render(result, structured_primary=structured_primary)
    return rendered.text, rendered.structured
