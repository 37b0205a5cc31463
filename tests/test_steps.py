"""The step a run is on, as every client numbers it (runtime.steps)."""

from __future__ import annotations

from runtime.kinds import RunState
from runtime.models import Run
from runtime.steps import step_shown


def _run(step: int, *, max_steps: int = 50) -> Run:
    return Run.model_validate(
        {
            "id": "r1",
            "job_id": "j1",
            "agent": "default",
            "model": "demo",
            "state": RunState.RUNNING,
            "revision": 1,
            "input": "x",
            "step": step,
            "max_steps": max_steps,
            "created_at": 0.0,
            "updated_at": 0.0,
        }
    )


def test_a_working_runs_step_in_progress_is_its_model_call_then_that_steps_tools() -> None:
    # The first model call: no step counted yet, step 1 in progress.
    assert step_shown(_run(0), working=True, calls_open=False) == 1
    # Its message committed counts step 1; the tools it asked for are step 1's too.
    assert step_shown(_run(1), working=True, calls_open=True) == 1
    # Its tools done: the next model call is step 2.
    assert step_shown(_run(1), working=True, calls_open=False) == 2


def test_a_run_that_does_not_work_shows_the_steps_it_took() -> None:
    assert step_shown(_run(0), working=False, calls_open=False) == 0
    assert step_shown(_run(3), working=False, calls_open=True) == 3  # waits on an approval


def test_the_step_in_progress_is_never_past_the_runs_limit() -> None:
    assert step_shown(_run(50), working=True, calls_open=False) == 50
    assert step_shown(_run(2, max_steps=2), working=True, calls_open=False) == 2
