from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.harness import Cli


@pytest.fixture
def cli(tmp_path: Path, workspace: Path) -> Cli:
    return Cli.create(tmp_path, workspace)
