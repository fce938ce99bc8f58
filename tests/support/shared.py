"""What a test run makes once for all its pytest-xdist workers: each worker is a process with its own session, so a
session fixture runs once per worker; one whose result is a file (a built wheel) builds it once, under a lock, in
the run's temporary directory that the workers share, and the others wait for it and use it."""

from __future__ import annotations

import fcntl
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.net import xdist_worker


def made_once(tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], Path]) -> Path:
    """`make(folder)`'s result, made once per run in a folder `name` of the run's shared temporary directory (the
    session's own in a serial run); the path it returned is kept beside the folder for the other workers."""
    root = tmp_path_factory.getbasetemp()
    if xdist_worker() is not None:
        root = root.parent  # pytest-of-<user>/pytest-<n>/: the workers' basetemps are its popen-gw<i> folders
    folder, made = root / name, root / f"{name}.made"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also if this worker dies
        if made.exists():
            return Path(made.read_text())
        folder.mkdir(exist_ok=True)
        result = make(folder)
        made.write_text(str(result))
        return result
