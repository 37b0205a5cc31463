"""The shape of answers to input requests, shared by every client (CLI, TUI, tests).

- approval:    ``{"decision": "allow_once" | "allow_run" | "allow_always" | "deny",
                 "reason": str | None}``
- question:    the answer text (a chosen option's text, or free text when allowed)
- elicitation: ``{"action": "accept", "content": {...}}`` | ``{"action": "decline"}`` |
               ``{"action": "cancel"}``; ``content`` is validated against the server's schema.

``parse_cli_answer`` turns the CLI's ANSWER argument (DESIGN §11) into that shape;
``validate_answer`` checks a value against its request and returns it normalised, or raises
``InvalidResponse`` — before anything changes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import date, datetime
from typing import TYPE_CHECKING, Any

from runtime.canonical import arguments_digest
from runtime.errors import AlreadyAnswered, InvalidInput, InvalidResponse, RunStateConflict
from runtime.kinds import InputKind, InputRequestState, RunState

if TYPE_CHECKING:
    import jsonschema

    from runtime.models import InputRequest, Run
    from runtime.store.base import Store

APPROVAL_DECISIONS = ("allow_once", "allow_run", "allow_always", "deny")
ELICITATION_ACTIONS = ("accept", "decline", "cancel")

APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "decision": {"enum": list(APPROVAL_DECISIONS)},
        "reason": {"type": ["string", "null"]},
    },
    "required": ["decision"],
    "additionalProperties": False,
}


def question_schema(options: list[str], *, allow_free_text: bool = True) -> dict[str, Any]:
    if options and not allow_free_text:
        return {"type": "string", "enum": list(options)}
    return {"type": "string", "minLength": 1}


_CLI_APPROVALS = {
    "allow": "allow_once",
    "y": "allow_once",
    "yes": "allow_once",
    "allow-run": "allow_run",
    "allow-always": "allow_always",
    "deny": "deny",
    "n": "deny",
    "no": "deny",
}


def parse_cli_answer(request: InputRequest, text: str) -> Any:
    """The CLI's ANSWER string as a value for ``request`` (not yet validated)."""
    text = text.strip()
    match request.kind:
        case InputKind.APPROVAL:
            word, _, reason = text.partition(":")
            decision = _CLI_APPROVALS.get(word.strip().lower())
            if decision is None:
                raise InvalidResponse(
                    f"answer {text!r} is not an approval: use allow, allow-run, allow-always "
                    "or deny[:reason]"
                )
            if decision != "deny" and reason:
                raise InvalidResponse("only deny takes a reason (deny:REASON)")
            return {"decision": decision, "reason": reason.strip() or None}
        case InputKind.QUESTION:
            if text.isdigit() and request.options:
                number = int(text)
                if not 1 <= number <= len(request.options):
                    raise InvalidResponse(
                        f"option {number} does not exist: choose 1 to {len(request.options)}"
                    )
                return request.options[number - 1]
            return text
        case InputKind.ELICITATION:
            if text.lower() in ("decline", "cancel"):
                return {"action": text.lower()}
            try:
                content = json.loads(text)
            except json.JSONDecodeError as exc:
                raise InvalidResponse(
                    f"answer is not a JSON object ({exc.msg}); give a JSON object, "
                    "'decline' or 'cancel'"
                ) from None
            if not isinstance(content, dict):
                raise InvalidResponse("answer must be a JSON object, 'decline' or 'cancel'")
            return {"action": "accept", "content": content}


_FORMATS = {
    "email": "an email address",
    "uri": "a URI with its scheme (https://…)",
    "date": "a date (YYYY-MM-DD)",
    "date-time": "a date and time (YYYY-MM-DDTHH:MM:SS and a time zone, Z or +01:00)",
}
"""The string formats an MCP form may ask for (``StringSchema.format``), as a person reads
them. jsonschema only annotates ``format`` unless told to check it, and checks ``uri`` and
``date-time`` only with optional packages: a trial's form sent the server ``ada`` as an
email address and ``example.com`` as a URI."""
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+")
_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:\S+")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_DATE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")


def _is_format(name: str, value: object) -> bool:
    """Whether ``value`` is a string of format ``name`` (anything else is not checked)."""
    if not isinstance(value, str):
        return True
    match name:
        case "email":
            return _EMAIL.fullmatch(value) is not None
        case "uri":
            return _URI.fullmatch(value) is not None
        case "date":
            return _DATE.fullmatch(value) is not None and _parses(date.fromisoformat, value)
        case "date-time":
            iso = value[:-1] + "+00:00" if value[-1:] in "Zz" else value
            return _DATE_TIME.fullmatch(value) is not None and _parses(datetime.fromisoformat, iso)
    return True


def _parses(parse: Callable[[str], object], value: str) -> bool:
    try:
        parse(value)
    except ValueError:  # 2026-02-30: the right shape, no such day
        return False
    return True


def _validator(schema: dict[str, Any]) -> jsonschema.Draft202012Validator:
    import jsonschema  # only when an answer is checked: a CLI query never loads it

    formats = jsonschema.FormatChecker(formats=())
    for name in _FORMATS:
        formats.checks(name)(_checker(name))
    return jsonschema.Draft202012Validator(schema, format_checker=formats)


def _checker(name: str) -> Callable[[object], bool]:
    return lambda value: _is_format(name, value)


def _message(error: jsonschema.ValidationError) -> str:
    """jsonschema's message, in words for a format (not "'ada' is not a 'email'") and for a
    choice titled by ``oneOf``/``anyOf`` (not "is not valid under any of the given schemas")."""
    wanted = _FORMATS.get(str(error.validator_value)) if error.validator == "format" else None
    if wanted:
        return f"{error.instance!r} is not {wanted}"
    options = error.validator_value if error.validator in ("oneOf", "anyOf") else None
    if isinstance(options, list) and all(isinstance(o, dict) and "const" in o for o in options):
        return f"{error.instance!r} is not one of " + ", ".join(
            f"{o['const']}" + (f" ({o['title']})" if o.get("title") else "") for o in options
        )
    return error.message


def _schema_errors(schema: dict[str, Any], value: Any) -> list[str]:
    validator = _validator(schema)
    messages = []
    for error in sorted(validator.iter_errors(value), key=lambda e: list(e.path)):
        where = ".".join(str(p) for p in error.path)
        messages.append(f"{where}: {_message(error)}" if where else _message(error))
    return messages


def field_problem(schema: dict[str, Any], value: Any) -> str | None:
    """What is wrong with ``value`` as the value of one field of ``schema`` (a property's
    schema), if anything: the first of ``_schema_errors``."""
    errors = _schema_errors(schema, value)
    return errors[0] if errors else None


def field_errors(schema: dict[str, Any], value: Any) -> dict[str, str]:
    """Validation messages by top-level field name ('' for the whole value), for forms."""
    validator = _validator(schema)
    result: dict[str, str] = {}
    for error in validator.iter_errors(value):
        if error.validator == "required" and isinstance(error.instance, dict):
            missing = [k for k in error.validator_value if k not in error.instance]
            for key in missing:
                result.setdefault(str(key), "required")
            continue
        key = str(error.path[0]) if error.path else ""
        result.setdefault(key, _message(error))
    return result


def validate_answer(request: InputRequest, value: Any) -> Any:
    """Check ``value`` against ``request``; return it normalised or raise InvalidResponse."""
    match request.kind:
        case InputKind.APPROVAL:
            errors = _schema_errors(APPROVAL_SCHEMA, value)
            if errors:
                raise InvalidResponse("invalid approval answer: " + "; ".join(errors))
            reason = value.get("reason")
            return {"decision": value["decision"], "reason": reason or None}
        case InputKind.QUESTION:
            if not isinstance(value, str) or not value.strip():
                raise InvalidResponse("the answer to a question must be non-empty text")
            schema = request.answer_schema or question_schema(request.options)
            errors = _schema_errors(schema, value.strip())
            if errors:
                choices = ", ".join(request.options)
                raise InvalidResponse(f"answer does not fit the question ({choices}): {errors[0]}")
            return value.strip()
        case InputKind.ELICITATION:
            if not isinstance(value, dict) or value.get("action") not in ELICITATION_ACTIONS:
                raise InvalidResponse(
                    "an elicitation answer is {'action': 'accept', 'content': {...}}, "
                    "{'action': 'decline'} or {'action': 'cancel'}"
                )
            if value["action"] != "accept":
                return {"action": value["action"]}
            content = value.get("content")
            if not isinstance(content, dict):
                raise InvalidResponse("an accepted elicitation needs a JSON object as content")
            errors = _schema_errors(request.answer_schema or {"type": "object"}, content)
            if errors:
                raise InvalidResponse("answer does not fit the form: " + "; ".join(errors))
            return {"action": "accept", "content": content}


async def checked_answer(
    store: Store, run_id: str, request_id: str, value: Any, *, idempotency_key: str | None
) -> tuple[InputRequest, Run, Any]:
    """The request, its run and the answer normalised (``validate_answer``), or the coded error
    that refuses it before anything changes (DESIGN §4.3): the request is another run's, was
    answered already (unless the same answer is replayed by its idempotency key) or cancelled,
    the run does not wait for input, or the tool call's arguments changed since the request was
    made (their digest)."""
    from runtime.interrupted import not_waiting_for_input

    request = await store.get_input_request(request_id)
    if request.run_id != run_id:
        raise InvalidInput(f"request {request_id} does not belong to run {run_id}")
    if request.state is InputRequestState.ANSWERED and idempotency_key is None:
        raise AlreadyAnswered(f"request {request_id} was already answered")
    if request.state is InputRequestState.CANCELLED:
        raise RunStateConflict(f"request {request_id} was cancelled")
    run = await store.get_run(run_id)
    if run.state is not RunState.INPUT_REQUIRED and idempotency_key is None:
        raise RunStateConflict(not_waiting_for_input(run))
    answer = validate_answer(request, value)
    if request.tool_call_id and request.arguments_digest:
        call = await store.get_tool_call(request.tool_call_id)
        if arguments_digest(call.arguments) != request.arguments_digest:
            raise InvalidResponse(
                "the tool call's arguments changed since the request was made; "
                "the answer was refused"
            )
    return request, run, answer
