"""The PostgreSQL the ledger benches run on: the given server, the machine's, else the embedded one; a fresh
database per use; a backend's CPU time."""

from __future__ import annotations

import os
import secrets
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

MACHINE_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


def admin_url(given: str | None) -> str:
    """A URL of a server that may create databases: `given`, the machine's, else the embedded one."""
    import psycopg

    for url in [given] if given else [MACHINE_URL]:
        try:
            with psycopg.connect(url, connect_timeout=2):
                return url
        except psycopg.Error:
            if given:
                raise SystemExit(f"bench: {given} does not answer") from None
    from sender.embedded import embedded_url

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return embedded_url(Path(tempfile.mkdtemp(prefix="sendhost-bench-")))


@contextmanager
def fresh_database(admin: str, prefix: str) -> Iterator[str]:
    """The URL of a new database on `admin`'s server, dropped afterwards."""
    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    name = f"sendhost_bench_{prefix}_{secrets.token_hex(4)}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield urlunsplit(urlsplit(admin)._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) process `pid` has used so far; 0 when /proc cannot tell (a remote server)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0
