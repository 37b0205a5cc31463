"""Answers checked against their request before anything changes: the string formats an MCP
form may ask for (email, uri, date, date-time) are checked, and said in words."""

from __future__ import annotations

import pytest

from runtime.answers import field_errors, validate_answer
from runtime.errors import InvalidResponse
from runtime.models import InputKind, InputRequest

CONTACT = {
    "type": "object",
    "properties": {
        "email": {"type": "string", "format": "email"},
        "homepage": {"type": "string", "format": "uri"},
        "born": {"type": "string", "format": "date"},
        "meeting": {"type": "string", "format": "date-time"},
    },
}
GOOD = {
    "email": "ada@example.org",
    "homepage": "https://example.org/ada",
    "born": "1815-12-10",
    "meeting": "2026-12-07T10:30:00Z",
}


def _form() -> InputRequest:
    return InputRequest(
        id="req1",
        run_id="run1",
        job_id="job1",
        kind=InputKind.ELICITATION,
        created_at=0.0,
        prompt="Contact",
        schema=CONTACT,
    )


def test_values_of_each_format_are_accepted_as_they_are() -> None:
    answer = {"action": "accept", "content": GOOD}
    assert validate_answer(_form(), answer) == answer
    assert field_errors(CONTACT, GOOD) == {}


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("email", "ada", "'ada' is not an email address"),
        ("homepage", "example.org", "'example.org' is not a URI with its scheme (https://…)"),
        ("born", "10/12/1815", "'10/12/1815' is not a date (YYYY-MM-DD)"),
        ("born", "2026-02-30", "'2026-02-30' is not a date (YYYY-MM-DD)"),
        ("meeting", "2026-12-07 10:30", "'2026-12-07 10:30' is not a date and time"),
    ],
)
def test_a_value_that_is_not_of_its_format_is_refused_saying_what_is_wanted(
    field: str, value: str, said: str
) -> None:
    # Found by a new-user trial: server-everything's form sent "ada" as an email address.
    with pytest.raises(InvalidResponse) as refused:
        validate_answer(_form(), {"action": "accept", "content": GOOD | {field: value}})
    assert f"{field}: {said}" in refused.value.message
    assert said in field_errors(CONTACT, GOOD | {field: value})[field]
