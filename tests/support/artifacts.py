"""Files a test run keeps for people to look at (a report's screenshot): copied into $SENDHOST_TEST_ARTIFACTS when
it names a directory (.ci/run sets it to ci-artifacts/ in its checkout), else left in the test's tmp_path."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

ARTIFACTS_ENV = "SENDHOST_TEST_ARTIFACTS"


def keep(path: Path, name: str) -> Path | None:
    """Copy `path` to the artifacts directory as `name`; where it went (None: no directory named)."""
    folder = os.environ.get(ARTIFACTS_ENV)
    if not folder:
        return None
    target = Path(folder) / name
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(path, target)
    return target
