"""The @-mention picker on a 50,000-file workspace: listing it (git and a walk with .gitignore
rules) and ranking per keystroke.

Run: ``.venv/bin/python bench/mention_bench.py [--files N]``. Baseline: ``git ls-files`` alone
(the floor for listing) and a plain substring filter over the same paths (the floor for ranking).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time
from pathlib import Path

from tui.file_index import fuzzy_rank, list_files

QUERIES = ["s", "sr", "src/", "src/mod", "mod42", "m42f7", "readme", "zzzz"]


def make_tree(root: Path, count: int) -> None:
    """``count`` files in 500 folders, plus an ignored build folder of 5,000 more."""
    for index in range(count):
        folder = root / "src" / f"pkg{index % 50}" / f"mod{index % 500}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"file{index}.py").write_bytes(b"")
    ignored = root / "build"
    ignored.mkdir()
    for index in range(5000):
        (ignored / f"out{index}.o").write_bytes(b"")
    (root / ".gitignore").write_text("build/\n")
    (root / "README.md").write_text("# bench\n")


def timed(fn, repeat: int = 3) -> tuple[float, object]:  # type: ignore[no-untyped-def]
    best = float("inf")
    result: object = None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=50_000)
    args = parser.parse_args()
    load = os.getloadavg()[0]
    print(f"machine load (1 min): {load:.2f} on {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp)
        make_tree(root, args.files)
        walk_s, walked = timed(lambda: list_files(root), repeat=1)
        assert isinstance(walked, list)
        print(f"walk with .gitignore: {len(walked):,} files in {walk_s * 1000:.0f} ms")
        subprocess.run(["git", "init", "-q", str(root)], check=True)
        git_bare_s, _ = timed(
            lambda: subprocess.run(
                ["git", "-C", str(root), "ls-files", "-z", "-co", "--exclude-standard"],
                capture_output=True,
                check=True,
            )
        )
        git_s, listed = timed(lambda: list_files(root))
        assert isinstance(listed, list) and len(listed) == len(walked)
        print(
            f"git listing: {len(listed):,} files in {git_s * 1000:.0f} ms "
            f"(bare git ls-files: {git_bare_s * 1000:.0f} ms, {git_s / git_bare_s:.1f}x)"
        )
        worst = 0.0
        for query in QUERIES:
            rank_s, ranked = timed(lambda q=query: fuzzy_rank(q, listed, limit=12))
            base_s, _ = timed(lambda q=query: [p for p in listed if q in p.lower()][:12])
            worst = max(worst, rank_s)
            assert isinstance(ranked, list)
            top = ranked[0].path if ranked else "-"
            print(
                f"  rank {query!r:10} {rank_s * 1000:6.1f} ms "
                f"(substring filter {base_s * 1000:5.1f} ms)  top: {top}"
            )
        print(f"worst keystroke: {worst * 1000:.1f} ms over {len(listed):,} paths (goal ≤ 50 ms)")


if __name__ == "__main__":
    main()
