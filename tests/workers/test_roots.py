"""Which workspaces a worker can reach (``runtime.workers.unreachable``)."""

from __future__ import annotations

from pathlib import Path

from runtime.workers import WorkerReport, unreachable


def test_a_workspace_under_a_root_is_reachable_and_others_are_named(tmp_path: Path) -> None:
    root = tmp_path / "projects"
    (root / "alpha" / "deep").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    roots = [root.resolve()]
    assert unreachable(str(root), roots) is None
    assert unreachable(str(root / "alpha" / "deep"), roots) is None
    why = unreachable(str(tmp_path / "elsewhere"), roots)
    assert why is not None and "not under this worker's roots" in why
    assert unreachable(str(root / "gone"), roots) == (
        f"its workspace {root / 'gone'} is not a folder on this machine"
    )


def test_a_link_into_a_root_counts_where_it_leads_and_a_lookalike_prefix_does_not(
    tmp_path: Path,
) -> None:
    root = tmp_path / "projects"
    (root / "alpha").mkdir(parents=True)
    (tmp_path / "projects-old").mkdir()
    (tmp_path / "link").symlink_to(root / "alpha")
    (root / "escape").symlink_to(tmp_path / "projects-old")
    roots = [root.resolve()]
    assert unreachable(str(tmp_path / "link"), roots) is None
    assert unreachable(str(tmp_path / "projects-old"), roots) is not None
    assert unreachable(str(root / "escape"), roots) is not None


def test_a_report_as_json_names_its_kind_and_leaves_out_what_it_lacks() -> None:
    report = WorkerReport(kind="claimed", owner_id="h:1:x", text="claimed run r", run_id="r", seq=4)
    assert report.as_json() == {
        "kind": "worker_claimed",
        "owner_id": "h:1:x",
        "text": "claimed run r",
        "run_id": "r",
        "seq": 4,
    }
