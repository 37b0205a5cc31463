"""What `agent-tui show` says about a run's place in its job, read as a person reads it."""

from __future__ import annotations

from runtime.models import Run, RunState
from tui._cli.render import show_text


def _run(**fields: object) -> Run:
    base: dict[str, object] = {
        "id": "run-2",
        "job_id": "job-1",
        "agent": "default",
        "model": "demo",
        "state": RunState.COMPLETED,
        "revision": 3,
        "input": "and then?",
        "created_at": 1.0,
        "updated_at": 2.0,
    }
    return Run.model_validate({**base, **fields})


def _history_line(run: Run) -> str:
    [line] = [line for line in show_text(run, None, [], [], None, []) if "history:" in line]
    return line.strip()


def test_a_follow_up_names_the_last_message_of_the_run_before_it_as_show_lists_it() -> None:
    run = _run(history_run_id="run-1", history_position=5)
    assert _history_line(run) == "history: run run-1 up to message [5] comes first"


def test_a_follow_up_of_a_run_with_no_message_does_not_say_message_minus_one() -> None:
    """Found by a new-user trial: a retried run read "up to message -1"."""
    run = _run(history_run_id="run-1", history_position=-1)
    assert _history_line(run) == "history: run run-1, none of its messages, comes first"
