"""A tool result as text the model reads: text joined, structured content as JSON, binary
content described rather than pasted."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

import mcp_types as types


def _decoded_size(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        return len(data) * 3 // 4


def _block_text(block: types.ContentBlock) -> str:
    match block:
        case types.TextContent():
            return block.text
        case types.ImageContent():
            return f"[image: {block.mime_type}, {_decoded_size(block.data)} bytes]"
        case types.AudioContent():
            return f"[audio: {block.mime_type}, {_decoded_size(block.data)} bytes]"
        case types.ResourceLink():
            return f"[resource link: {block.uri}" + (f" ({block.name})]" if block.name else "]")
        case types.EmbeddedResource():
            resource = block.resource
            if isinstance(resource, types.TextResourceContents):
                return resource.text
            mime = resource.mime_type or "application/octet-stream"
            return f"[resource: {resource.uri}, {mime}, {_decoded_size(resource.blob)} bytes]"
    return f"[{getattr(block, 'type', 'unknown')} content]"  # pragma: no cover - future types


def _repeats_text(structured: Any, texts: list[str]) -> bool:
    """Whether the structured content only repeats the text blocks (servers are told to send
    both). Wrappers of one key count as a repeat of what they wrap: FastMCP-style servers send
    ``{"result": value}``, server-filesystem ``{"content": text}``."""
    candidates = [structured]
    while isinstance(candidates[-1], dict) and len(candidates[-1]) == 1:
        candidates.append(next(iter(candidates[-1].values())))
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


def render_result(
    result: types.CallToolResult, *, structured_primary: bool = False
) -> tuple[str, dict[str, Any] | None]:
    """The result's text for the model and its structured content (when it is an object).

    Structured content that repeats the text blocks is not sent again. When it differs, the
    form the server marks as primary is sent: with an ``outputSchema`` (``structured_primary``)
    the structured content (and the non-text blocks), otherwise the text and then the JSON.
    """
    texts = [_block_text(block) for block in result.content]
    structured = result.structured_content
    if structured is not None and not _repeats_text(structured, texts):
        encoded = json.dumps(structured, ensure_ascii=False, sort_keys=True)
        if structured_primary:
            others = [
                text
                for block, text in zip(result.content, texts, strict=True)
                if not isinstance(block, types.TextContent)
            ]
            texts = [encoded, *others]
        else:
            texts.append(encoded)
    return "\n".join(texts), structured if isinstance(structured, dict) else None
