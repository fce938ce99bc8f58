"""The embedded PostgreSQL that holds the ledger when none is configured: the one place it is started, for the CLI
(under the state directory, left running for the next command) and for the simulation (private, removed at the end).

It admits only the user who started it (and root):
- it listens on no TCP port, only on a Unix socket in a 0700 directory of the server's account: its data directory,
  or, when that path is too long for a socket address (107 bytes), a directory made with mkdtemp under /tmp;
- its pg_hba.conf admits those users alone, by peer authentication (the kernel says who connects; pg_ident.conf
  maps them to the database user postgres), over that socket, and nobody over TCP. The wheel's `trust` is never
  left in place: a server started otherwise (by an earlier sendhost) is restarted private when next found.
sender.embedded_place says where it lives and which account runs it (as root: `embedded_postgres`). A server left
running is found again by later processes through its postmaster.pid; a file lock makes starting it race-free.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import logging
import os
import shlex
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from sender.embedded_place import (
    FIX,
    Place,
    discard,
    locate,
    move_root_data_from_state_dir,
    prepare,
    programs_for,
)
from sender.embedded_place import prepare_private as _prepare_private
from sender.errors import LedgerUnavailable
from sendhost.private_paths import private_file

log = logging.getLogger("sender.embedded")

DB_USER = "postgres"
PORT = 5432  # names the socket (.s.PGSQL.5432); nothing listens on it over TCP
SOCKET_NAME = f".s.PGSQL.{PORT}"
MAX_SOCKET_PATH = 107  # sun_path is 108 bytes, its NUL included
START_TIMEOUT_S = 30
LOCK_NAME = "postgres.lock"
LOG_NAME = "log"
IDENT_MAP = "sendhost"
HBA = f"""\
# Written by sendhost (sender/embedded.py), and written again whenever it differs: this embedded PostgreSQL
# admits only the operating-system users named in pg_ident.conf, who own it, over its private Unix socket (peer
# authentication: the kernel says who connects). It listens on no TCP port, and no line here admits TCP.
local   all   all   peer map={IDENT_MAP}
"""


def embedded_url(state_dir: Path) -> str:
    """Start (or find) the embedded PostgreSQL of `state_dir` and return its URL; it keeps running after this
    process exits."""
    place = prepare(state_dir)
    return serve(place, adopt=True)


@contextlib.contextmanager
def private_server(state_dir: Path) -> Iterator[str]:
    """An embedded PostgreSQL of its own for the block only (beside `state_dir`'s): yields its URL; stops it and
    removes its data at the end."""
    place = prepare_private(state_dir)
    try:
        yield serve(place)
    finally:
        with contextlib.suppress(LedgerUnavailable):
            stop(place, mode="immediate")  # its data is thrown away: nothing to flush
        discard(place)


def prepare_private(state_dir: Path) -> Place:
    """A fresh place for a private server (tests start and stop it themselves: `serve`, `stop`, `discard`)."""
    return _prepare_private(state_dir)


@dataclass(frozen=True)
class Postmaster:
    """What a server wrote in its data directory's postmaster.pid."""

    pid: int
    port: int
    socket_dir: Path | None
    listens_on: str  # its TCP addresses; empty when it listens on none
    status: str  # starting, ready, stopping

    @classmethod
    def read(cls, data_dir: Path) -> Postmaster | None:
        try:
            lines = (data_dir / "postmaster.pid").read_text().splitlines()
        except OSError:
            return None
        if len(lines) < 8 or not lines[0].strip().isdigit():  # written line by line while the server starts
            return None
        socket_dir = lines[4].strip()
        return cls(int(lines[0]), int(lines[3] or PORT), Path(socket_dir) if socket_dir else None,
                   lines[5].strip(), lines[7].strip())

    def alive(self, data_dir: Path) -> bool:
        """The process runs, and is the server of `data_dir` (not a later process given the same pid)."""
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        if not os.path.isdir("/proc/self"):  # no /proc here: the pid is all there is to go by
            return True
        try:  # the server works in its data directory
            return os.readlink(f"/proc/{self.pid}/cwd") == os.path.realpath(data_dir)
        except OSError:  # exiting, or someone else's process
            return False

    @property
    def url(self) -> str:
        assert self.socket_dir is not None
        return f"postgresql://{DB_USER}@/{DB_USER}?host={quote(str(self.socket_dir), safe='/')}&port={self.port}"


def serve(place: Place, *, adopt: bool = False) -> str:
    """The URL of the server of `place`, private, started (or restarted private) when it is not."""
    found = _private_running(place)
    if found is not None:
        return found.url
    with private_file(place.state_dir / LOCK_NAME) as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = _private_running(place)
        if found is not None:
            return found.url
        if adopt:
            _adopt_earlier_root_server(place)
        running = _settled(place)
        if running is not None and running.status == "ready" and not exposures(place, running):
            return running.url  # it was still starting (someone else's pg_ctl)
        if running is not None:
            log.warning("restarting the embedded PostgreSQL under %s so that it admits only its owner: %s",
                        place.data_dir, "; ".join(exposures(place, running)
                                                   or [f"it was not ready within {START_TIMEOUT_S} s"]))
            _stop(place, running, "fast")
        return _start(place).url


def stop(place: Place, mode: str = "fast") -> int | None:
    """Stop the server of `place`; its pid, or None when none was running."""
    running = _settled(place)
    if running is None:
        return None
    _stop(place, running, mode)
    return running.pid


def _private_running(place: Place) -> Postmaster | None:
    found = Postmaster.read(place.data_dir)
    if found is None or found.status != "ready" or not found.alive(place.data_dir) or exposures(place, found):
        return None
    return found


def _settled(place: Place) -> Postmaster | None:
    """The running server of `place` once it is done starting or stopping; None when none runs."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        found = Postmaster.read(place.data_dir)
        if found is None or not found.alive(place.data_dir):
            return None
        if found.status == "ready" or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def exposures(place: Place, server: Postmaster) -> list[str]:
    """Why the running `server` admits more than its owner; empty when it does not."""
    found = []
    if server.listens_on:
        found.append(f"it listens on TCP ({server.listens_on})")
    if server.socket_dir is None:
        found.append("it has no Unix socket")
    else:
        try:
            info = os.lstat(server.socket_dir)
        except OSError:
            info = None
        if info is None or not stat.S_ISDIR(info.st_mode) or info.st_uid != place.uid or info.st_mode & 0o077:
            mode = f"mode {stat.S_IMODE(info.st_mode):04o}, uid {info.st_uid}" if info else "missing"
            found.append(f"its socket directory {server.socket_dir} is not private to {place.user_name} ({mode})")
    for name, text in auth_files(place).items():
        if _read(place.data_dir / name) != text:
            found.append(f"its {name} is not sendhost's (an earlier one admitted every local user: trust)")
    return found


def auth_files(place: Place) -> dict[str, str]:
    """pg_hba.conf and pg_ident.conf as sendhost writes them for `place`."""
    ident = "# sendhost: the operating-system users admitted, each as the database user postgres.\n"
    ident += "".join(f'{IDENT_MAP}   "{name}"   {DB_USER}\n' for name in place.clients)
    return {"pg_hba.conf": HBA, "pg_ident.conf": ident}


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError):
        return None


def _start(place: Place) -> Postmaster:
    _check_programs(place)
    if not (place.data_dir / "PG_VERSION").exists():
        _initdb(place)
    _write_auth_files(place)
    socket_dir = _socket_dir(place)
    data = str(place.data_dir)
    options = ["-h", "", "-k", str(socket_dir), "-p", str(PORT), "-c", "unix_socket_permissions=0700",
               "-c", f"hba_file={data}/pg_hba.conf", "-c", f"ident_file={data}/pg_ident.conf"]
    # pg_ctl hands -o to /bin/sh: every word quoted. The data directory goes in PGDATA, never through the shell.
    with _log_file(place) as log_fd:
        result = _run(place, "pg_ctl", "start", "-w", "-t", str(START_TIMEOUT_S), "-o",
                      " ".join(shlex.quote(word) for word in options), stdout=log_fd, timeout=START_TIMEOUT_S + 30)
    started = Postmaster.read(place.data_dir)
    if result.returncode != 0 or started is None or not started.alive(place.data_dir):
        raise LedgerUnavailable(f"embedded PostgreSQL failed to start under {place.data_dir}: "
                                f"{_last_line(place.data_dir / LOG_NAME)}; see {place.data_dir / LOG_NAME} {FIX}")
    return started


def _stop(place: Place, server: Postmaster, mode: str) -> None:
    result = _run(place, "pg_ctl", "stop", "-w", "-t", str(START_TIMEOUT_S), "-m", mode,
                  timeout=START_TIMEOUT_S + 30)
    if result.returncode != 0 and Postmaster.read(place.data_dir) is not None and server.alive(place.data_dir):
        detail = (result.stderr or result.stdout).strip().splitlines()
        raise LedgerUnavailable(f"the embedded PostgreSQL under {place.data_dir} (pid {server.pid}) did not stop: "
                                f"{detail[-1] if detail else 'pg_ctl failed'}; see {place.data_dir / LOG_NAME}")
    deadline = time.monotonic() + START_TIMEOUT_S  # pg_ctl returns once the pid file is gone, a moment before
    while server.alive(place.data_dir) and time.monotonic() < deadline:  # the process itself
        time.sleep(0.02)
    if server.socket_dir is not None and server.socket_dir != place.data_dir \
            and server.socket_dir.name.startswith("sendhost-pg-"):
        with contextlib.suppress(OSError):  # a directory _socket_dir made; empty once the server is gone
            server.socket_dir.rmdir()


def _run(place: Place, program: str, *args: str, stdout: int = subprocess.PIPE,
         timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """One of the wheel's programs as the server's account, in a bare environment (no secret of ours reaches
    it) and, as root, with none of root's groups."""
    env = {"PATH": os.environ.get("PATH", os.defpath), "PGDATA": str(place.data_dir), "LC_ALL": "C"}
    account = {} if place.run_as is None else {"user": place.uid, "group": place.gid, "extra_groups": []}
    try:
        return subprocess.run([str(programs_for(place) / program), *args], env=env, cwd="/", umask=0o077,
                              stdin=subprocess.DEVNULL, stdout=stdout,
                              stderr=subprocess.STDOUT if stdout != subprocess.PIPE else subprocess.PIPE,
                              text=True, timeout=timeout, check=False, **account)  # type: ignore[call-overload]
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LedgerUnavailable(f"embedded PostgreSQL: {program} under {place.data_dir} failed: {exc}; {FIX}") \
            from None


def _check_programs(place: Place) -> None:
    """As root, the server's account must be able to run the programs (the wheel's, or root's copy of them)."""
    if place.run_as is None:
        return
    result = _run(place, "postgres", "--version", timeout=30)
    if result.returncode != 0:
        why = (result.stderr or result.stdout).strip() or "denied"
        raise LedgerUnavailable(f"{place.run_as}, who runs the embedded PostgreSQL as root, cannot run "
                                f"{programs_for(place) / 'postgres'} ({why}); {FIX}")


def _initdb(place: Place) -> None:
    if any(place.data_dir.iterdir()):
        raise LedgerUnavailable(f"{place.data_dir} holds files but no PostgreSQL data (no PG_VERSION); move them "
                                f"away and the next command creates the database, {FIX}")
    result = _run(place, "initdb", "--username", DB_USER, "--auth-local=peer", "--auth-host=reject",
                  "--encoding=UTF8", "--no-locale", timeout=300)
    if result.returncode != 0:
        detail = (result.stderr or result.stdout).strip().splitlines()
        raise LedgerUnavailable(f"initdb failed under {place.data_dir}: {detail[-1] if detail else 'no output'}; "
                                f"{FIX}")


def _write_auth_files(place: Place) -> None:
    for name, text in auth_files(place).items():
        path = place.data_dir / name
        if _read(path) == text:
            continue
        staged = path.with_name(f".{name}.sendhost")
        staged.unlink(missing_ok=True)
        fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, text.encode())
            if place.run_as is not None:
                os.fchown(fd, place.uid, place.gid)
        finally:
            os.close(fd)
        os.replace(staged, path)


def _socket_dir(place: Place) -> Path:
    """The data directory when its socket path fits; else a new private directory under a short path."""
    if len(str(place.data_dir / SOCKET_NAME)) <= MAX_SOCKET_PATH:
        return place.data_dir
    base = tempfile.gettempdir()
    made = Path(tempfile.mkdtemp(prefix="sendhost-pg-", dir=base if len(base) <= 40 else "/tmp"))  # 0700
    if place.run_as is not None:
        os.chown(made, place.uid, place.gid)
    return made


@contextlib.contextmanager
def _log_file(place: Place) -> Iterator[int]:
    fd = os.open(place.data_dir / LOG_NAME, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o600)
    try:
        if place.run_as is not None:
            os.fchown(fd, place.uid, place.gid)
        yield fd
    finally:
        os.close(fd)


def _last_line(path: Path) -> str:
    lines = (_read(path) or "").strip().splitlines()
    return lines[-1] if lines else "no log"


def _adopt_earlier_root_server(place: Place) -> None:
    """Move the data an earlier sendhost, run as root, kept in the state directory into `place` (stopped first)."""
    old = dataclasses.replace(place, data_dir=place.state_dir / "postgres")
    if place.run_as is None or not (old.data_dir / "PG_VERSION").is_file():
        return
    if (running := _settled(old)) is not None:
        _stop(old, running, "fast")
    try:
        moved = move_root_data_from_state_dir(place)
    except OSError as exc:
        raise LedgerUnavailable(f"cannot move the embedded PostgreSQL's data from {old.data_dir} to "
                                f"{place.data_dir}: {exc.strerror}; move it by hand, {FIX}") from None
    if moved is not None:
        log.warning("moved the embedded PostgreSQL's data from %s to %s, where %s reaches it without any way into "
                    "the state directory; an earlier sendhost opened %s and its parent directories to every user "
                    "(o+rx) for its sake: close the ones that should not be (chmod go-rx)", moved, place.data_dir,
                    place.run_as, place.state_dir)


def stop_embedded_postgres(state_dir: Path) -> int | None:
    """Stop the embedded PostgreSQL of `state_dir` (a fast shutdown: sessions end, committed data is kept); its
    pid, or None when none was running."""
    place = locate(state_dir)
    return None if place is None else stop(place)
