"""Commands the runtime's messages name for a person to type ("retry it (agent-tui retry ID)").

The runtime does not know which database its client opened (``--db``, ``AGENT_TUI_DB``, a
``postgresql://`` URL), so it writes each command with the bare program name, always through
``command``; a client that shows such a message names its database in them
(``tui._cli.settings.naming_the_database``), and a bare ``agent-tui`` typed in a shell opens
that database rather than the default one. Standard library only, importing nothing.
"""

from __future__ import annotations

PROGRAM = "agent-tui"
COMMANDS = frozenset({"archive", "cancel", "follow-up", "fork", "respond", "retry", "unarchive"})
"""The commands a message may name: a client finds ``agent-tui NAME `` by these names."""


def command(name: str, *arguments: str) -> str:
    """``agent-tui NAME ARGUMENTS`` as a message names it, for a client to complete."""
    if name not in COMMANDS:
        raise ValueError(f"not a command messages name: {name!r}")
    return " ".join((PROGRAM, name, *arguments))
