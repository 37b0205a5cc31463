"""Model providers: the protocol (``base``), Claude, OpenAI-compatible servers, the demo model.

Pick one by model reference with ``resolve_provider``; vendor SDKs load only when used.
"""

from runtime.providers.base import ModelEvent, ModelProvider, ModelRequest, ToolSpec
from runtime.providers.registry import default_model_reference, resolve_provider

__all__ = [
    "ModelEvent",
    "ModelProvider",
    "ModelRequest",
    "ToolSpec",
    "default_model_reference",
    "resolve_provider",
]
