"""A tool call refused before it ran fails with an error saying who refused it, which the model
reads as the call's result: the permission rules, the person (in its approval) or a
``before_tool`` hook, named by its shown command (``HookEntry.label``: its secrets masked).
The texts are made here and read back here (``denial``), so a client shows a denial as one,
naming who refused it, instead of as any failed call."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Denial", "by_hook", "by_person", "by_rules", "denial", "did_not_run", "never_ran"]

_DENIED = " denied this tool call"
_PERSON = "the person"
_RULES = "the permission rules"
_RULES_TAIL = "; do not try it again"
_NOT_RUN = "the call did not run: "


@dataclass(frozen=True)
class Denial:
    by: str
    """Who refused: "the permission rules", "the person", "hook `./check.sh`" (with the
    file it came from, when that is not agent-tui.toml)."""
    reason: str = ""

    def line(self) -> str:
        """``denied by hook `./check.sh`: poetry.lock is generated`` (one line a client
        shows at a glance)."""
        return f"denied by {self.by}" + (f": {self.reason}" if self.reason else "")


def _with_reason(who: str, reason: str | None) -> str:
    return f"{who}{_DENIED}" + (f": {reason}" if reason else "")


def by_rules(tool_name: str) -> str:
    return f"{_RULES} deny {tool_name}{_RULES_TAIL}"


def by_person(reason: str | None) -> str:
    return _with_reason(_PERSON, reason)


def by_hook(label: str, reason: str | None) -> str:
    """``label``: the hook as ``HookEntry.label`` names it (its shown command)."""
    return _with_reason(label, reason)


def denial(error: str | None) -> Denial | None:
    """Who refused the call that failed with ``error``, when one of the functions above made
    that text; None for any other failure."""
    if not error:
        return None
    if error.startswith(f"{_RULES} deny ") and error.endswith(_RULES_TAIL):
        return Denial(_RULES)
    who, denied, rest = error.partition(_DENIED)
    if not denied or (rest and not rest.startswith(": ")):
        return None
    if who == _PERSON or (who.startswith("hook `") and "`" in who[6:]):
        return Denial(who, rest[2:])
    return None


def did_not_run(failure: str) -> str:
    """The error of a call stopped before it ran by something that broke (a ``before_tool``
    hook that failed), not by a refusal."""
    return f"{_NOT_RUN}{failure}"


def never_ran(error: str | None) -> bool:
    """Whether a call that failed with ``error`` was stopped before it ran (refused, or its
    hook broke): a delegation stopped so started no sub-run."""
    return denial(error) is not None or bool(error and error.startswith(_NOT_RUN))
