"""Small network helpers for tests."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def free_port_on(addresses: list[str]) -> int:
    """A port free on every one of `addresses` at once (servers on several loopback addresses sharing one port):
    the kernel's pick on the first, checked by binding it on the others; another pick if one is taken, as it may be
    by another test session or pytest-xdist worker serving the same addresses."""
    for _ in range(50):
        with contextlib.ExitStack() as held:
            first = held.enter_context(socket.socket())
            first.bind((addresses[0], 0))
            port = int(first.getsockname()[1])
            try:
                for address in addresses[1:]:
                    held.enter_context(socket.socket()).bind((address, port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no port free on all of {', '.join(addresses)}")


def xdist_worker() -> str | None:
    """The pytest-xdist worker this process is ("gw0", "gw1", ...), None in a serial run. Each worker is a process
    with its own session: its session fixtures start their own servers, which must not share a name, a port, a
    database or an address with another worker's."""
    return os.environ.get("PYTEST_XDIST_WORKER") or None


def worker_number() -> int:
    """This worker's number (gw3 -> 3); 0 in a serial run."""
    worker = xdist_worker()
    return int(worker[2:]) if worker and worker[2:].isdigit() else 0


def on_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def stop_process(process: subprocess.Popen[bytes] | subprocess.Popen[str], grace_s: float = 15) -> None:
    """Terminate a server the test started; kill it if it does not exit within `grace_s`."""
    process.terminate()
    try:
        process.wait(grace_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
