"""`agent-tui rewind CHECKPOINT_ID [--files] [--yes] [--force]` on files the demo agent wrote
through the real command line (its write_file records the content it replaces)."""

from __future__ import annotations

import json

import pytest

from runtime.providers.demo import NOTES_FILE
from tests.cli.harness import Cli, boundary_of, json_lines

pytestmark = pytest.mark.slow


def _completed_demo_run(cli: Cli) -> list[dict[str, object]]:
    """Run the demo to completion (question answered, write approved); its checkpoints."""
    started = cli.run("run", "summarise this folder", "--json", "--model", "demo:instant")
    assert started.returncode == 3, started.stderr
    run_id = boundary_of(json_lines(started.stdout))["run_id"]
    answered = cli.run("respond", run_id, "1", "--json")
    assert answered.returncode == 3, answered.stderr
    approved = cli.run("respond", run_id, "allow", "--json")
    assert approved.returncode == 0, approved.stderr
    assert (cli.workspace / NOTES_FILE).exists()
    shown = json.loads(cli.run("show", run_id, "--json").stdout)
    return list(shown["checkpoints"])


def test_rewind_shows_the_diff_then_restores_with_files_and_yes(cli: Cli) -> None:
    checkpoints = _completed_demo_run(cli)
    first = str(checkpoints[0]["id"])
    notes = cli.workspace / NOTES_FILE
    written = notes.read_bytes()

    preview = cli.run("rewind", first)
    assert preview.returncode == 0, preview.stderr
    assert f"remove {NOTES_FILE}" in preview.stdout
    assert "--- " + NOTES_FILE + " (now)" in preview.stdout
    assert "Nothing changed" in preview.stderr
    assert notes.read_bytes() == written

    refused = cli.run("rewind", first, "--files")
    assert refused.returncode == 2 and "--yes" in refused.stderr
    assert notes.read_bytes() == written

    restored = cli.run("rewind", first, "--files", "--yes")
    assert restored.returncode == 0, restored.stderr
    assert f"removed {NOTES_FILE}" in restored.stdout
    assert not notes.exists()
    again = cli.run("rewind", first)
    assert again.returncode == 0 and "Nothing to rewind" in again.stdout


def test_the_rewind_hint_names_the_database_it_looked_in(cli: Cli) -> None:
    """Found by a README audit: every other hint carried `--db` for a database that is not the
    default, but the preview's "To restore these files: agent-tui rewind …" did not, so the
    command as printed looked in the default database."""
    first = str(_completed_demo_run(cli)[0]["id"])
    preview = cli.run("rewind", first)
    assert preview.returncode == 0, preview.stderr
    assert f"agent-tui --db {cli.db} rewind {first} --files" in preview.stderr
    assert f"agent-tui --db {cli.db} fork {first} PROMPT" in preview.stderr


def test_a_hand_edited_file_is_listed_and_kept_unless_forced(cli: Cli) -> None:
    checkpoints = _completed_demo_run(cli)
    first = str(checkpoints[0]["id"])
    notes = cli.workspace / NOTES_FILE
    notes.write_text("my own notes\n")

    # Found by a trial: the preview's hint said `--files`, which restores none of them.
    preview = cli.run("rewind", first)
    assert preview.returncode == 0, preview.stderr
    assert "(changed since this job last wrote it: left alone)" in preview.stdout
    assert f"To restore them anyway: agent-tui --db {cli.db} rewind {first} --files --force" in (
        preview.stderr
    )
    kept = cli.run("rewind", first, "--files", "--yes")
    assert kept.returncode == 0, kept.stderr
    assert "changed since this job last wrote it" in kept.stdout
    assert f"left alone: {NOTES_FILE}" in kept.stderr
    assert notes.read_text() == "my own notes\n"

    forced = cli.run("rewind", first, "--files", "--yes", "--force")
    assert forced.returncode == 0, forced.stderr
    assert not notes.exists()


def test_rewind_of_an_unknown_checkpoint_is_one_clear_line(cli: Cli) -> None:
    cli.make_database()
    result = cli.run("rewind", "nope")
    assert result.returncode == 2
    assert "no checkpoint id starts with 'nope'" in result.stderr
    assert "Traceback" not in result.stderr


def test_rewind_start_goes_back_before_the_jobs_first_step(cli: Cli) -> None:
    """No checkpoint comes before a job's first step (one ends each step), so what the first
    step wrote could not be rewound (found by a trial); ``--start JOB_ID`` is the job's start."""
    checkpoints = _completed_demo_run(cli)
    job_id = str(checkpoints[0]["job_id"])
    notes = cli.workspace / NOTES_FILE

    preview = cli.run("rewind", "--start", job_id)
    assert preview.returncode == 0, preview.stderr
    assert f"remove {NOTES_FILE}" in preview.stdout
    assert "+++ /dev/null" in preview.stdout  # the file it created goes
    assert f"agent-tui --db {cli.db} rewind --start {job_id} --files" in preview.stderr
    assert "fork" not in preview.stderr  # a fork starts from a checkpoint, and none is named
    assert notes.exists()

    restored = cli.run("rewind", "--start", job_id, "--files", "--yes")
    assert restored.returncode == 0, restored.stderr
    assert f"removed {NOTES_FILE}" in restored.stdout and not notes.exists()
    again = cli.run("rewind", "--start", job_id)
    assert "Nothing to rewind" in again.stdout and "since its start" in again.stdout


def test_rewind_names_a_checkpoint_or_a_jobs_start_one_of_them(cli: Cli) -> None:
    checkpoints = _completed_demo_run(cli)
    neither = cli.run("rewind")
    assert neither.returncode == 2
    assert "rewind --start JOB_ID" in neither.stderr
    both = cli.run("rewind", str(checkpoints[0]["id"]), "--start", str(checkpoints[0]["job_id"]))
    assert both.returncode == 2
