"""Small network helpers for tests."""

from __future__ import annotations

import os
import socket
import subprocess


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


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
