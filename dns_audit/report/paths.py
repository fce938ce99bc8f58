"""Paths in reports: relative to the repository root, as GitHub code scanning and annotations expect."""

from __future__ import annotations

import os
from pathlib import Path


def repository_root(start: Path) -> Path | None:
    """GITHUB_WORKSPACE when set (the checkout on a runner), else the nearest directory holding `.git`."""
    workspace = os.environ.get("GITHUB_WORKSPACE")
    if workspace:
        return Path(workspace).resolve()
    for directory in (start, *start.parents):
        if (directory / ".git").exists():
            return directory
    return None


def repo_relative(path: str) -> str:
    """`path` relative to the repository root (POSIX form); relative to the working directory outside one."""
    absolute = Path(path).resolve()
    root = repository_root(absolute.parent)
    for base in (root, Path.cwd().resolve()):
        if base is None:
            continue
        try:
            return absolute.relative_to(base).as_posix()
        except ValueError:
            continue
    return absolute.as_posix()
