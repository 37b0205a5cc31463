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
    """Whether the structured content only repeats a text block (servers are told to send both;
    FastMCP-style servers wrap a plain return value as ``{"result": value}``)."""
    candidates = [structured]
    if isinstance(structured, dict) and set(structured) == {"result"}:
        candidates.append(structured["result"])
    for text in texts:
        for candidate in candidates:
            if isinstance(candidate, str) and candidate == text:
                return True
            try:
                if json.loads(text) == candidate:
                    return True
            except ValueError:
                continue
    return False


def render_result(result: types.CallToolResult) -> tuple[str, dict[str, Any] | None]:
    """The result's text for the model and its structured content (when it is an object)."""
    texts = [_block_text(block) for block in result.content]
    structured = result.structured_content
    if structured is not None and not _repeats_text(structured, texts):
        texts.append(json.dumps(structured, ensure_ascii=False, sort_keys=True))
    return "\n".join(texts), structured if isinstance(structured, dict) else None
