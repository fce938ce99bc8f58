"""Small network helpers for tests."""

from __future__ import annotations

import os
import socket


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def on_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")
