"""The files beside a mailbox's refresh token: the token itself (rotated in place), the access token every agent
on the host shares (`.access`), and the lock one refresh takes (`.lock`). Every write is whole or absent: a temp
file in the same directory, fsynced, renamed over the old one, mode 0600 from the start."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def token_files(refresh_token_file: Path) -> tuple[Path, Path, Path]:
    """The refresh token's file, the shared access token's and the refresh lock's, all beside each other."""
    return (refresh_token_file, refresh_token_file.with_name(refresh_token_file.name + ".access"),
            refresh_token_file.with_name(refresh_token_file.name + ".lock"))


def write_private(path: Path, text: str) -> None:
    """Replace `path` with `text`, atomically and durably, readable by its owner only."""
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")  # mkstemp: mode 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    # the rename itself survives a crash only once the directory is on disk
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def read_text(path: Path) -> str:
    return path.read_text(encoding="utf-8").strip()


def read_json(path: Path) -> dict[str, Any] | None:
    """The JSON object in `path`; None when it is missing or not one (a shared cache is only ever a hint)."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def write_json(path: Path, value: dict[str, Any]) -> None:
    write_private(path, json.dumps(value, sort_keys=True))


@contextlib.contextmanager
def host_lock(path: Path) -> Iterator[None]:
    """Hold the exclusive lock on `path` (created 0600): one refresh at a time among the host's processes, and
    `mailbox authorize` writes a new grant's tokens under it too. The kernel drops it when the process dies, so a
    killed agent never leaves it taken."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
