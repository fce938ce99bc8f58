"""Create or upgrade the ledger's schema: versioned, idempotent, safe from several processes at once.

A fresh database gets `sql/schema.sql`, the current schema, recorded as the latest version; a database at an
earlier version gets the migrations above it, in order (`sql/migrations/README.md`).
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg

from sender.errors import LedgerUnavailable
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
    """Bring the schema to the latest version, in one transaction under an advisory lock: a second process
    waits for the first, then finds nothing left to do."""
    try:
        with conn.transaction():
            conn.execute(query("migrate_lock"), {"key": MIGRATE_LOCK})
            conn.execute(query("versions_table"))
            before = current_version(conn)
            applied: list[str] = []
            if before == 0:
                conn.execute(sql_text("schema.sql"))
                conn.execute(query("record_version"), {"version": latest_version(), "name": "schema.sql"})
                applied.append("schema.sql")
            else:
                for version, name, text in migrations():
                    if version > before:
                        conn.execute(text)
                        conn.execute(query("record_version"), {"version": version, "name": name})
                        applied.append(name)
            after = current_version(conn)
    except psycopg.OperationalError as exc:
        raise LedgerUnavailable(f"migration failed, nothing changed: {exc}".splitlines()[0]) from None
    return MigrateResult(before, after, tuple(applied))
