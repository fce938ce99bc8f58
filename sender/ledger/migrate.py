"""Create or upgrade the ledger's schema: versioned, idempotent, safe from several processes at once, directly or
through PgBouncer in transaction mode.

A fresh database gets `sql/schema.sql`, the current schema, recorded as the latest version; a database at an
earlier version gets the migrations above it, in order (`sql/migrations/README.md`).
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg

from sender.errors import LedgerUnavailable
from sender.ledger.connection import error_line, set_local_timeout, transaction
from sender.ledger.queries import migrations, query, sql_text

BASELINE_VERSION = 1  # sql/migrations/1_0_baseline.sql: the first schema, what every migration builds on
# pg_advisory_xact_lock key: the same for every process migrating any ledger ("sendhost" in ASCII, as an int).
MIGRATE_LOCK = 0x73656E64686F7374


@dataclass(frozen=True)
class MigrateResult:
    before: int
    after: int
    applied: tuple[str, ...]


def current_version(conn: psycopg.Connection) -> int:
    row = conn.execute(query("has_versions_table")).fetchone()
    if not row or not row[0]:
        return 0
    version = conn.execute(query("schema_version")).fetchone()
    return int(version[0]) if version else 0


def latest_version() -> int:
    return max(version for version, _name, _text in migrations())


def migrate(conn: psycopg.Connection) -> MigrateResult:
    """Bring the schema to the latest version: a second process waits for the first, then finds nothing left to
    do. A fresh database gets schema.sql in one transaction; an older one gets each migration file in a
    transaction of its own (a value added to an enum is usable only once committed), its version recorded with
    the last file of that version, so a failure leaves the version where it was and a second run applies what is
    left (a file that can be cut short says IF NOT EXISTS).

    Every transaction takes the advisory lock itself (pg_advisory_xact_lock, released by its commit) and reads the
    version again under it: no lock outlives a transaction, so this holds through PgBouncer in transaction mode,
    where consecutive transactions may run on different server connections."""
    try:
        return _migrate(conn)
    except psycopg.OperationalError as exc:
        raise LedgerUnavailable(f"migration failed, nothing changed: {error_line(exc)}") from None


def _locked(conn: psycopg.Connection) -> None:
    """Inside a transaction: wait for the migration lock (held until this transaction ends), the transaction's
    statement timeout set as the connection's would be (no session setting survives PgBouncer)."""
    set_local_timeout(conn)
    conn.execute(query("migrate_lock"), {"key": MIGRATE_LOCK})


def _migrate(conn: psycopg.Connection) -> MigrateResult:
    # Each version in a transaction a Ctrl-C waits for (bounded by the statement timeout): applied whole or not at
    # all, never cut while a statement runs.
    with transaction(conn):
        _locked(conn)
        conn.execute(query("versions_table"))
        before = current_version(conn)
        if before == 0:
            conn.execute(sql_text("schema.sql"))
            conn.execute(query("record_version"), {"version": latest_version(), "name": "schema.sql"})
            return MigrateResult(before, current_version(conn), ("schema.sql",))
    applied: list[str] = []
    pending = [(version, name, text) for version, name, text in migrations() if version > before]
    for index, (version, name, text) in enumerate(pending):
        last_of_version = index + 1 == len(pending) or pending[index + 1][0] != version
        with transaction(conn):
            _locked(conn)
            # another process may have applied it since our last transaction: then it is done, not ours to redo
            # (a version's first file may still run twice, when its version is not recorded yet: IF NOT EXISTS)
            if current_version(conn) >= version:
                continue
            conn.execute(text)
            if last_of_version:
                conn.execute(query("record_version"), {"version": version, "name": name})
        applied.append(name)
    return MigrateResult(before, current_version(conn), tuple(applied))
