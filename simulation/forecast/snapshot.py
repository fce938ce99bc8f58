"""The state a forecast starts from, copied out of the live ledger and guard into the forecast's own, so that the
real send path can run on it (on a simulated clock) without touching anything a live agent reads.

The ledger: every table the send path reads, each row as it is (ids, due times, pins, the claim's turn), with the
triggers and keys off while it is written (the rows are a consistent copy: one REPEATABLE READ snapshot of the
source). Of the rows, only what can still go or decides when something goes: each lead with a row not sent yet,
with all its rows (a follow-up's thread reads its earlier steps), and the rows sent in the guard's look-back (a
counter rebuild reads them). The history, feedback and clicks are left: nothing on the send path reads them.
A row an agent has claimed and not started (`sending`, no attempt) is copied as queued: it goes now.

The guard: every key of warm-up's prefix (caps, counts today, gaps, pauses, rests, campaign counts), copied by
type with its time to live, so the forecast's guard answers as the live one would now.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any

import psycopg
import redis

from sender.ledger import connection as db
from sender.sending.counters import LOOKBACK
from warmup.keys import PREFIX as WARMUP_PREFIX

LIVE = "('waiting', 'queued', 'retry', 'sending')"
# every lead with a row not sent yet, and every row sent in the guard's look-back (a rebuild's counts)
_EMAILS = f"""
    SELECT e.* FROM sender_emails e
    WHERE e.lead_id IN (SELECT lead_id FROM sender_emails WHERE status IN {LIVE})
       OR e.id IN (SELECT email_id FROM sender_sent WHERE accepted_at >= %(since)s)"""
# table -> the rows copied (None: all of them), in an order that writes a row's references first
TABLES: tuple[tuple[str, str | None], ...] = (
    ("sender_settings", None),
    ("sender_campaigns", None),
    ("sender_campaign_steps", None),
    ("sender_window_intervals", None),  # the sending windows as the claim reads them (version 21)
    ("sender_window_horizons", None),
    ("sender_suppressions", None),
    ("sender_leads", f"SELECT l.* FROM sender_leads l WHERE l.id IN (SELECT lead_id FROM ({_EMAILS}) AS copied)"),
    ("sender_emails", _EMAILS),
    ("sender_sent", f"SELECT s.* FROM sender_sent s WHERE s.email_id IN (SELECT id FROM ({_EMAILS}) AS copied)"),
    ("sender_send_log", "SELECT * FROM sender_send_log WHERE accepted_at >= %(since)s"),
    ("sender_placement_tests", None),
    ("sender_placement_results", None),
    ("sender_placement_rests", None),
    ("sender_postmaster_days", None),
)
SEQUENCES = ("sender_claim_turns",)  # besides each table's own id sequence


def copy_ledger(source_url: str, target_url: str, now: datetime) -> dict[str, int]:
    """Copy the send path's state of the ledger at `source_url` into the migrated, empty one at `target_url`."""
    params = {"since": now - LOOKBACK}
    counts: dict[str, int] = {}
    with (contextlib.closing(db.connect(source_url)) as source, contextlib.closing(db.connect(target_url)) as target,
          _snapshot(source), target.transaction()):
        # the copy is already consistent: no trigger (counts, the send log's sender_sent) and no key checks
        target.execute("SET LOCAL session_replication_role = replica")
        # what a new ledger starts with (its own key, the `enqueue` campaign) gives way to the source's
        target.execute(f"TRUNCATE {', '.join(table for table, _select in TABLES)} CASCADE")
        for table, select in TABLES:
            counts[table] = _copy_table(source, target, table, select, params)
        target.execute("UPDATE sender_emails SET status = 'queued', claimed_at = NULL, claimed_by = NULL "
                       "WHERE status = 'sending' AND attempt_id IS NULL")
        for sequence in (*_owned_sequences(source), *SEQUENCES):
            value = source.execute(f"SELECT last_value, is_called FROM {sequence}").fetchone()
            assert value is not None
            target.execute("SELECT setval(%s, %s, %s)", (sequence, value[0], value[1]))
    return counts


@contextlib.contextmanager
def _snapshot(source: psycopg.Connection) -> Iterator[None]:
    """One read-only REPEATABLE READ transaction on the source: every table read as of the same instant."""
    with source.transaction():
        source.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        yield


def _copy_table(source: psycopg.Connection, target: psycopg.Connection, table: str, select: str | None,
                params: Mapping[str, object]) -> int:
    # The columns by name: a ledger migrated version by version may order them otherwise than schema.sql.
    columns = [row[0] for row in source.execute(
        "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped "
        "ORDER BY attnum", (table,)).fetchall()]
    names = ", ".join(f'"{column}"' for column in columns)
    query = f"SELECT {names} FROM ({select or f'SELECT * FROM {table}'}) AS rows"
    copied = 0
    with source.cursor().copy(f"COPY ({query}) TO STDOUT (FORMAT binary)",
                              params if select and "%(since)s" in select else None) as out, \
            target.cursor().copy(f"COPY {table} ({names}) FROM STDIN (FORMAT binary)") as into:
        for chunk in out:
            into.write(chunk)
    counted = target.execute(f"SELECT count(*) FROM {table}").fetchone()
    copied = int(counted[0]) if counted else 0
    return copied


def _owned_sequences(source: psycopg.Connection) -> list[str]:
    """The id sequences of the copied tables (bigserial columns), by name."""
    tables = [table for table, _select in TABLES]
    rows = source.execute(
        "SELECT s.relname FROM pg_class s JOIN pg_depend d ON d.objid = s.oid AND d.deptype = 'a' "
        "JOIN pg_class t ON t.oid = d.refobjid WHERE s.relkind = 'S' AND t.relname = ANY(%s)", (tables,)).fetchall()
    return sorted(row[0] for row in rows)


def copy_guard(source: redis.Redis, target: redis.Redis) -> int:
    """Copy every warm-up key of `source` into `target` by type, with its time to live; how many."""
    copied = 0
    for key in source.scan_iter(match=f"{WARMUP_PREFIX}*", count=1000):
        kind = source.type(key)
        kind = kind.decode() if isinstance(kind, bytes) else kind
        if kind == "string":
            value = source.get(key)
            if value is not None:
                target.set(key, value)
        elif kind == "hash":
            mapping: dict[Any, Any] = source.hgetall(key)
            if mapping:
                target.hset(key, mapping=mapping)
        elif kind == "zset":
            members: list[tuple[Any, float]] = source.zrange(key, 0, -1, withscores=True)  # type: ignore[assignment]
            if members:
                target.zadd(key, dict(members))
        elif kind == "set":
            values = source.smembers(key)
            if values:
                target.sadd(key, *values)
        elif kind == "list":
            items = source.lrange(key, 0, -1)
            if items:
                target.rpush(key, *items)
        else:
            continue  # none of warm-up's: a key gone since the scan, or another tool's
        ttl_ms = source.pttl(key)
        if ttl_ms and ttl_ms > 0:
            target.pexpire(key, ttl_ms)
        copied += 1
    return copied
