"""The error of a call refused before it ran says who refused it, and reads back as a denial;
any other failure does not (``runtime.denials``)."""

from __future__ import annotations

from runtime.denials import Denial, by_hook, by_person, by_rules, denial
from runtime.hooks import HookEntry


def test_each_refusal_reads_back_as_who_refused_it_and_why() -> None:
    hook = HookEntry(command="TOKEN=s3cret ./hooks/check.sh --strict", source="settings.json")
    made = {
        by_rules("shell"): Denial("the permission rules"),
        by_person("not on main"): Denial("the person", "not on main"),
        by_person(None): Denial("the person"),
        by_hook(hook.label(), "use `cargo update`: it denied this tool call"): Denial(
            "hook `./hooks/check.sh --strict` (settings.json)",
            "use `cargo update`: it denied this tool call",
        ),
    }
    for error, expected in made.items():
        assert denial(error) == expected, error
    refused = denial(by_hook(hook.label(), "no"))
    assert refused is not None
    assert refused.line() == "denied by hook `./hooks/check.sh --strict` (settings.json): no"


def test_a_tools_own_failure_is_no_denial() -> None:
    for error in (
        None,
        "",
        "no such file: missing.txt",
        "the permission rules deny everything, says the README",
        "curl: the server denied this tool call",
        "hook `x` denied this tool call, then more",
    ):
        assert denial(error) is None, error
