"""The public runtime API (DESIGN §7). Clients (the TUI, the CLI, tests) use only this."""

from runtime.engine.retries import UnknownChoice, describe_call
from runtime.runtime import Boundary, Runtime, arguments_digest

__all__ = ["Boundary", "Runtime", "UnknownChoice", "arguments_digest", "describe_call"]
