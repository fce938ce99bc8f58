"""Directories and files that are ours alone: created 0700 / 0600, refused when they belong to someone else or
are reached through a symbolic link. Shared by the embedded Redis (sendhost.embedded) and the embedded PostgreSQL
(sender.embedded), which keep their state side by side in the state directory.

They only ever narrow a mode, never widen one: a directory sendhost did not create keeps whatever its owner gave it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from sendhost.errors import ConfigError

OWN_DIRECTORY = "set SENDHOST_STATE_DIR to a directory of your own"


def private_dir(path: Path, what: str, fix: str = OWN_DIRECTORY) -> Path:
    """Create `path` 0700 (or find it), require that it belongs to us and close it to everyone else."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = os.stat(path)
    except OSError as exc:
        raise ConfigError(f"cannot create {what} {path}: {exc.strerror}; {fix}") from None
    if not stat.S_ISDIR(info.st_mode):
        raise ConfigError(f"{what} {path} is not a directory; {fix}")
    if info.st_uid != os.geteuid():
        raise ConfigError(f"{what} {path} belongs to uid {info.st_uid}, not to you (uid {os.geteuid()}): another "
                          f"user could read or replace what it holds; {fix}")
    if stat.S_IMODE(info.st_mode) & 0o077:
        os.chmod(path, 0o700)
    return path


@contextlib.contextmanager
def private_file(path: Path) -> Iterator[int]:
    """A file descriptor on `path`, created 0600, never through a symbolic link, refused unless it is ours."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ConfigError(f"refusing {path}: it is a symbolic link; remove it") from None
        raise ConfigError(f"cannot open {path}: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
            raise ConfigError(f"refusing {path}: not a regular file of yours; remove it")
        if stat.S_IMODE(info.st_mode) & 0o077:
            os.fchmod(fd, 0o600)
        yield fd
    finally:
        os.close(fd)


def refresh_token_file_problem(path: str) -> str | None:
    """Why the agent cannot use `path` as a refresh token's file, or None: missing, or readable by others."""
    try:
        mode = os.stat(os.path.expanduser(path)).st_mode
    except OSError as exc:
        return f"{path}: {exc.strerror}; the refresh token is missing"
    if mode & 0o077:
        return f"{path} is readable by others (mode {stat.S_IMODE(mode):04o}); chmod 600 it or write it anew"
    return None
