"""The sandbox's record of its detached processes (parts.json) and how each is started, waited for and stopped.

Each part is recorded the moment it starts, so `down` (or `up`'s own clean-up after Ctrl-C) stops what was started
however far `up` got. A pid is trusted only while its process still works in the part's directory (the sandbox
directory, or the one recorded as its `cwd`): a later process given the same pid is never signalled.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rehearsal.errors import SandboxConfigError
from sendhost import signals
from sendhost.private_paths import private_file

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
PARTS_FILE = "parts.json"


def read_parts(root: Path) -> dict[str, dict[str, Any]]:
    try:
        parsed = json.loads((root / PARTS_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return parsed if isinstance(parsed, dict) else {}


def write_parts(root: Path, parts: dict[str, dict[str, Any]]) -> None:
    with private_file(root / (PARTS_FILE + ".new")) as fd:
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps(parts, indent=2).encode())
    os.replace(root / (PARTS_FILE + ".new"), root / PARTS_FILE)


def record(root: Path, name: str, **fields: Any) -> None:
    """Add `fields` to part `name`'s entry."""
    parts = read_parts(root)
    parts.setdefault(name, {}).update(fields)
    write_parts(root, parts)


def workdir(root: Path, entry: dict[str, Any]) -> Path:
    """Where the part's process works: the sandbox directory unless its entry names another."""
    cwd = entry.get("cwd")
    return Path(cwd) if isinstance(cwd, str) else root


def ours(pid: int, where: Path) -> bool:
    """The process runs and works in `where` (it is the part we started, not a reused pid)."""
    try:
        cwd = os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return False
    return cwd == str(where.resolve())


def running_pid(root: Path, name: str) -> int | None:
    """The pid of the part `name` when it runs (recorded in parts.json and still ours), else None."""
    entry = read_parts(root).get(name, {})
    pid = entry.get("pid")
    return pid if isinstance(pid, int) and ours(pid, workdir(root, entry)) else None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def spawn(root: Path, name: str, args: list[str], address: str, cwd: Path | None = None) -> subprocess.Popen[bytes]:
    """A detached process working in the sandbox directory or `cwd` (its own session: the terminal's Ctrl-C is
    `up`'s to handle), recorded in parts.json before anything else happens."""
    log = root / f"{name}.log"
    with private_file(log):
        pass
    # The child starts with Ctrl-C unblocked again.
    with signals.held(), log.open("ab") as out:  # recorded before a Ctrl-C's clean-up looks
        process = subprocess.Popen(args, cwd=cwd or root, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                   start_new_session=True, umask=0o077, preexec_fn=_unblock_held)
        record(root, name, pid=process.pid, address=address, **({"cwd": str(cwd)} if cwd else {}))
    return process


def _unblock_held() -> None:
    """The child takes Ctrl-C and stops again (the mask outlives exec), as a server should."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, signals.HELD)


def wait_until(check: Callable[[], bool], what: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SandboxConfigError(f"the sandbox's {what} exited ({process.returncode}) while starting; see {log}")
        if check():
            return
        time.sleep(0.1)
    raise SandboxConfigError(f"the sandbox's {what} did not answer within {START_TIMEOUT_S:.0f} s; see {log}")


def port_answers(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        return True
    return False


def stop_process(pid: int, where: Path) -> bool:
    """SIGTERM, then SIGKILL after STOP_TIMEOUT_S; False when the pid is not (or no longer) our part's."""
    if not ours(pid, where):
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):  # our child when `up` cleans up after itself
            os.waitpid(pid, os.WNOHANG)
        if not ours(pid, where):
            return True
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)
    return True
