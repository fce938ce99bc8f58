"""Create or upgrade the ledger's schema: versioned, idempotent, safe from several processes at once."""

from __future__ import annotations

from dataclasses import dataclass

import psycopg

from sender.errors import LedgerUnavailable
from sender.ledger.queries import migrations, sql_text

BASELINE_VERSION = 1
# pg_advisory_xact_lock key: the same for every process migrating any ledger ("sendhost" in ASCII, as an int).
MIGRATE_LOCK = 0x73656E64686F7374

_VERSIONS_TABLE = """
CREATE TABLE IF NOT EXISTS sender_schema_versions (
    version integer PRIMARY KEY,
    name text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)"""


@dataclass(frozen=True)
class MigrateResult:
    before: int
    after: int
    applied: tuple[str, ...]


def current_version(conn: psycopg.Connection) -> int:
    row = conn.execute("SELECT to_regclass('sender_schema_versions') IS NOT NULL").fetchone()
    if not row or not row[0]:
        return 0
    version = conn.execute("SELECT coalesce(max(version), 0) FROM sender_schema_versions").fetchone()
    return int(version[0]) if version else 0


def latest_version() -> int:
    return max([BASELINE_VERSION, *(version for version, _name, _text in migrations())])


def migrate(conn: psycopg.Connection) -> MigrateResult:
    """Bring the schema to the latest version, in one transaction under an advisory lock: a second process
    waits for the first, then finds nothing left to do."""
    try:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATE_LOCK,))
            conn.execute(_VERSIONS_TABLE)
            before = current_version(conn)
            applied: list[str] = []
            if before < BASELINE_VERSION:
                conn.execute(sql_text("schema.sql"))
                conn.execute("INSERT INTO sender_schema_versions (version, name) VALUES (%s, %s)",
                             (BASELINE_VERSION, "schema.sql"))
                applied.append("schema.sql")
            for version, name, text in migrations():
                if version > max(before, BASELINE_VERSION):
                    conn.execute(text)
                    conn.execute("INSERT INTO sender_schema_versions (version, name) VALUES (%s, %s) "
                                 "ON CONFLICT (version) DO NOTHING", (version, name))
                    applied.append(name)
            after = current_version(conn)
    except psycopg.OperationalError as exc:
        raise LedgerUnavailable(f"migration failed, nothing changed: {exc}".splitlines()[0]) from None
    return MigrateResult(before, after, tuple(applied))
