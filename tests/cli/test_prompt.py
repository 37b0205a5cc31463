"""The terminal prompts for approvals, questions and forms, driven with scripted lines."""

from __future__ import annotations

import asyncio
import contextlib
import io
from pathlib import Path
from typing import Any

import pytest

from runtime.answers import APPROVAL_SCHEMA, question_schema, validate_answer
from runtime.api import Runtime
from runtime.config import Config
from runtime.errors import InvalidResponse
from runtime.models import InputKind, InputRequest
from tests.fakes.mcp_servers import FAVOURITES_SCHEMA
from tui._cli.driver import EventPrinter, Observer, drive
from tui._cli.prompt import GaveUp, Prompter, coerce_field


class ScriptedLines:
    def __init__(self, *lines: str) -> None:
        self._lines = list(lines)

    async def readline(self) -> str | None:
        return self._lines.pop(0) if self._lines else None


def _request(kind: InputKind, **fields: Any) -> InputRequest:
    return InputRequest(
        id="req1", run_id="run1", job_id="job1", kind=kind, created_at=0.0, **fields
    )


APPROVAL = _request(
    InputKind.APPROVAL,
    prompt="Allow write_file?",
    schema=APPROVAL_SCHEMA,
    detail={"tool": "write_file", "arguments": {"path": "a.txt", "content": "hi"}},
)
OPTIONS = ["Red", "Green"]
QUESTION = _request(
    InputKind.QUESTION, prompt="Which colour?", options=OPTIONS, schema=question_schema(OPTIONS)
)
FORM = _request(
    InputKind.ELICITATION,
    prompt="Booking details",
    detail={"server": "hotel"},
    schema={
        "type": "object",
        "properties": {
            "guests": {"type": "integer", "minimum": 1},
            "breakfast": {"type": "boolean"},
            "room": {"enum": ["single", "double"]},
            "note": {"type": "string"},
        },
        "required": ["guests", "room"],
    },
)


async def _answer(request: InputRequest, *lines: str) -> tuple[Any, str]:
    err = io.StringIO()
    value = await Prompter(ScriptedLines(*lines), err).answer(request)
    return value, err.getvalue()


@pytest.mark.parametrize(
    ("key", "decision"),
    [("y", "allow_once"), ("a", "allow_run"), ("A", "allow_always"), ("n", "deny")],
)
async def test_approval_keys_give_each_decision(key: str, decision: str) -> None:
    value, shown = await _answer(APPROVAL, key)
    assert value == {"decision": decision, "reason": None}
    assert "write_file" in shown and '"path": "a.txt"' in shown


async def test_an_unknown_approval_key_asks_again_then_takes_a_reason() -> None:
    value, shown = await _answer(APPROVAL, "x", "r", "too risky")
    assert value == {"decision": "deny", "reason": "too risky"}
    assert "Please answer y, a, A, n or r." in shown


async def test_a_question_takes_an_option_number_after_a_wrong_one() -> None:
    value, shown = await _answer(QUESTION, "5", "", "2")
    assert value == "Green"
    assert "1. Red" in shown and "option 5 does not exist" in shown


async def test_a_form_asks_each_field_with_type_coercion() -> None:
    value, shown = await _answer(FORM, "", "zero", "0", "2", "yes", "3", "double", "")
    assert value == {
        "action": "accept",
        "content": {"guests": 2, "breakfast": True, "room": "double"},
    }
    assert "hotel" in shown
    assert "not a whole number" in shown
    assert "minimum" in shown or "less than" in shown
    assert "choose one of single, double" in shown


async def test_a_form_takes_json_or_a_decline_on_its_first_line() -> None:
    value, _ = await _answer(FORM, '{"guests": 1, "room": "single"}')
    assert value == {"action": "accept", "content": {"guests": 1, "room": "single"}}
    value, _ = await _answer(FORM, "decline")
    assert value == {"action": "decline"}
    value, shown = await _answer(FORM, '{"guests": 0}', "cancel")
    assert value == {"action": "cancel"}
    assert "does not fit the form" in shown


async def test_end_of_input_gives_up() -> None:
    with pytest.raises(GaveUp):
        await _answer(QUESTION)


def test_field_coercion_follows_the_schema_type() -> None:
    assert coerce_field({"type": "number"}, "2.5") == 2.5
    assert coerce_field({"type": "boolean"}, "no") is False
    assert coerce_field({"enum": ["a", "b"]}, "2") == "b"
    assert coerce_field({"type": "array", "items": {"type": "string"}}, "x, y") == ["x", "y"]
    with pytest.raises(ValueError):
        coerce_field({"type": "boolean"}, "perhaps")


class SilentLines:
    """A terminal where nobody types: each read waits until cancelled."""

    async def readline(self) -> str | None:
        await asyncio.Event().wait()
        return None


async def test_a_prompt_answered_elsewhere_is_left_and_the_run_followed_to_its_end(
    db_path: Path, workspace: Path
) -> None:
    """Found by a new-user trial: `respond` in a terminal reached the run's next question,
    which the TUI answered; the CLI kept waiting at its `>` and refused what was typed then."""
    runtime = await Runtime.open(
        db_path=db_path, workspace=workspace, config=Config(), model="demo:instant"
    )
    try:
        run = await runtime.start("summarise")
        first = await runtime.wait(run.id, timeout=10)
        assert first.request is not None
        out, err = io.StringIO(), io.StringIO()
        printer = EventPrinter(out, err, json_mode=False, main_run_id=run.id)
        observer = Observer(
            runtime, run.job_id, after=await runtime.store.last_seq(), printer=printer
        )
        observer.start()
        driving = asyncio.create_task(
            drive(runtime, run.id, observer, Prompter(SilentLines(), err))
        )
        answered = 0
        async with asyncio.timeout(30):
            while not driving.done():
                boundary = await runtime.wait(run.id)
                request = boundary.request
                if request is None:
                    break
                # Elsewhere: as `agent-tui respond` in another shell, or the TUI, would.
                value: Any = request.options[0]
                if request.kind is InputKind.APPROVAL:
                    value = {"decision": "allow_once", "reason": None}
                await runtime.respond(run.id, request.id, value)
                answered += 1
            code = await driving
        await observer.stop()
    finally:
        await runtime.close()
    assert answered >= 2  # the question, then the approval: each left at its prompt here
    assert code == 0
    assert err.getvalue().count("was answered elsewhere; going on with the run.") == answered


async def test_a_line_printed_while_a_prompt_waits_starts_a_line_of_its_own(
    db_path: Path, workspace: Path
) -> None:
    """Found by a new-user trial: the TUI allowed a write that `agent-tui run` was asking about
    in a terminal; the run went on in that process, which printed "> ✓ write_file (44 chars)"
    on the prompt's line."""
    runtime = await Runtime.open(
        db_path=db_path, workspace=workspace, config=Config(), model="demo:instant"
    )
    try:
        run = await runtime.start("summarise")
        first = await runtime.wait(run.id, timeout=10)
        assert first.request is not None
        err = io.StringIO()
        printer = EventPrinter(io.StringIO(), err, json_mode=False, main_run_id=run.id)
        observer = Observer(
            runtime, run.job_id, after=await runtime.store.last_seq(), printer=printer
        )
        driving = asyncio.create_task(
            drive(runtime, run.id, observer, Prompter(SilentLines(), err))
        )
        async with asyncio.timeout(10):
            while not err.getvalue().endswith("Answer (1-3 or text): "):
                await asyncio.sleep(0.01)
        printer.note("  ✓ read_file (40 chars)")  # as the run's next events are printed
        await runtime.respond(run.id, first.request.id, first.request.options[0])
        async with asyncio.timeout(10):
            while "going on with the run" not in err.getvalue():
                await asyncio.sleep(0.01)
        driving.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await driving
    finally:
        await runtime.close()
    shown = err.getvalue()
    left = shown[shown.index("Answer (1-3 or text): ") : shown.index("going on with the run")]
    assert left.startswith("Answer (1-3 or text): \n  ✓ read_file (40 chars)\n")
    assert "\n\n" not in left  # leaving the prompt ends no line a second time


async def test_a_form_s_email_and_date_fields_ask_again_until_they_hold_one() -> None:
    # Found by a new-user trial: "ada" went to the server as an email address.
    form = _request(
        InputKind.ELICITATION,
        prompt="Contact",
        schema={
            "type": "object",
            "properties": {
                "email": {"type": "string", "format": "email"},
                "born": {"type": "string", "format": "date"},
            },
            "required": ["email"],
        },
    )
    value, shown = await _answer(form, "", "ada", "ada@example.org", "10 Dec 1815", "1815-12-10")
    assert value == {
        "action": "accept",
        "content": {"email": "ada@example.org", "born": "1815-12-10"},
    }
    assert "email: 'ada' is not an email address — try again." in shown
    assert "born: '10 Dec 1815' is not a date (YYYY-MM-DD) — try again." in shown


FAVOURITES = _request(
    InputKind.ELICITATION,
    prompt="Your favourites",
    detail={"server": "basic"},
    schema=FAVOURITES_SCHEMA,
)


async def test_a_form_s_titled_choices_are_listed_with_titles_and_taken_by_title_or_number() -> (
    None
):
    # Found by a new-user trial: `hero` read "(string, optional)", and typing "Superman" or
    # "2" was refused as "not valid under any of the given schemas".
    value, shown = await _answer(FAVOURITES, "", "", "Piano, 4", "superman", "Salmon, 3", "2")
    assert value == {
        "action": "accept",
        "content": {
            "opening": "It was a dark and stormy night.",
            "instruments": ["Piano", "Drums"],
            "hero": "hero-1",
            "fish": ["fish-2", "fish-3"],
            "pet": "pet-2",
        },
    }
    assert "hero (one of hero-1 (Superman), hero-2 (Green Lantern), hero-3 (Wonder Woman)" in shown
    assert "fish (a list of fish-1 (Tuna), fish-2 (Salmon), fish-3 (Trout), optional)" in shown
    assert "instruments (a list of Guitar, Piano, Violin, Drums, Bass; 1 to 2 of them" in shown
    assert "pet (one of pet-1 (Cats), pet-2 (Dogs), pet-3 (Birds), optional)" in shown
    assert "not valid under" not in shown


async def test_a_choice_that_names_none_is_asked_again_listing_them() -> None:
    value, shown = await _answer(FAVOURITES, "", "", "", "Batman", "3", "", "")
    assert value["content"]["hero"] == "hero-3"
    assert (
        "hero: choose one of hero-1 (Superman), hero-2 (Green Lantern), hero-3 (Wonder Woman)"
        " — try again." in shown
    )


def test_a_json_answer_naming_a_choice_by_its_title_is_refused_listing_the_values() -> None:
    with pytest.raises(InvalidResponse) as refused:
        validate_answer(
            FAVOURITES, {"action": "accept", "content": {"opening": "Hi", "hero": "Superman"}}
        )
    assert refused.value.message == (
        "answer does not fit the form: hero: 'Superman' is not one of hero-1 (Superman),"
        " hero-2 (Green Lantern), hero-3 (Wonder Woman)"
    )
