"""What `sendhost embedded status` (and a reading command deciding whether to start the ledger) sees of the
embedded PostgreSQL of a state directory: read from its files and its socket, never starting or creating anything.
Starting and stopping it is sender.embedded's job."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sender.embedded import Postmaster, exposures
from sender.embedded_place import ROOT_HOME, SERVER_USER, locate


@dataclass(frozen=True)
class PostgresStatus:
    """What `sendhost embedded status` shows of the embedded PostgreSQL."""

    data_dir: Path | None  # None: as root, before its id is chosen (on first use)
    running: bool
    pid: int | None
    version: str | None
    socket_dir: Path | None
    server_user: str | None
    exposures: tuple[str, ...]  # why the running server admits more than its owner (started by an earlier sendhost)
    system_user: bool = False  # server_user is the system user root's server runs as (created by sendhost)
    url: str | None = None  # what a client connects to while it runs (its socket; no password: peer authentication)
    created: bool = True  # its data directory holds a database (initdb ran)

    def to_json(self) -> dict[str, object]:
        return {"data_dir": str(self.data_dir) if self.data_dir else None, "running": self.running, "pid": self.pid,
                "version": self.version, "socket_dir": str(self.socket_dir) if self.socket_dir else None,
                "created": self.created, "url": self.url, "server_user": self.server_user,
                "system_user": self.system_user,
                "private": not self.exposures if self.running else None, "exposures": list(self.exposures)}


def embedded_postgres_status(state_dir: Path) -> PostgresStatus:
    """The embedded PostgreSQL of `state_dir` as it is now; never starts (or creates) anything."""
    place = locate(state_dir)
    if place is None:  # as root, before the first ledger command: the system user may not exist yet either
        return PostgresStatus(None, False, None, None, None, SERVER_USER, (), system_user=True, created=False)
    system_user = place.run_as is not None
    if not (place.data_dir / "PG_VERSION").is_file():
        return PostgresStatus(place.data_dir, False, None, None, None, place.user_name, (), system_user=system_user,
                              created=False)
    version = _pg_version(place.data_dir)
    found = Postmaster.read(place.data_dir)
    if found is None or not found.alive(place.data_dir):
        return PostgresStatus(place.data_dir, False, None, version, None, place.user_name, (), system_user=system_user)
    return PostgresStatus(place.data_dir, True, found.pid, _server_version(found) or version, found.socket_dir,
                          place.user_name, tuple(exposures(place, found)), system_user=system_user,
                          url=found.url if found.socket_dir is not None else None)


def embedded_data_dir(state_dir: Path) -> str:
    """Where the embedded PostgreSQL of `state_dir` keeps its data, or will once the first ledger command creates
    it (as root its id is chosen then); creates nothing."""
    place = locate(state_dir)
    return f"{ROOT_HOME}/<id chosen on first use>" if place is None else str(place.data_dir)


def _pg_version(data_dir: Path) -> str | None:
    try:
        return (data_dir / "PG_VERSION").read_text().strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def _server_version(server: Postmaster) -> str | None:
    import psycopg  # late: `embedded status` of a state directory without PostgreSQL needs no client

    try:
        with psycopg.connect(server.url, connect_timeout=5) as conn:
            row = conn.execute("SHOW server_version").fetchone()
    except psycopg.Error:
        return None
    return str(row[0]) if row else None
