"""The forecast's copy of the state it starts from: what of the ledger it copies (and what not), and the guard's keys,
on a real PostgreSQL and a real Redis; the source is read, never written."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import redis

from sender import Ledger
from simulation.forecast.snapshot import copy_guard, copy_ledger
from simulation.sandbox import embedded_redis
from tests.support.postgres_server import fresh_database

pytestmark = pytest.mark.service

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


@pytest.fixture
def source(postgres_admin: str) -> Iterator[Ledger]:
    with fresh_database(postgres_admin) as url, Ledger.from_url(url, clock=NOW.timestamp) as ledger:
        ledger.migrate()
        yield ledger


@pytest.fixture
def target(postgres_admin: str) -> Iterator[Ledger]:
    with fresh_database(postgres_admin) as url, Ledger.from_url(url) as ledger:
        ledger.migrate()
        yield ledger


def _rows(ledger: Ledger) -> dict[str, tuple[str, object]]:
    with ledger.calling("the test's read") as conn:
        found = conn.execute("SELECT split_part(address, '@', 1) || ':' || step, status::text, attempt_id "
                             "FROM sender_emails").fetchall()
    return {key: (status, attempt) for key, status, attempt in found}


def _run(ledger: Ledger, statement: str, *params: object) -> None:
    with ledger.calling("the test's write") as conn:
        conn.execute(statement, params)


def _sent(ledger: Ledger, lead: str, step: int, at: datetime) -> None:
    """Row (lead, step) sent at `at`, as the ledger records a send (the send log, and sender_sent by its trigger)."""
    _run(ledger, "UPDATE sender_emails SET status = 'sent', mailbox = 'box@sender.example', "
                 "message_id = %s WHERE step = %s AND lead_id = (SELECT id FROM sender_leads WHERE lead = %s)",
         f"<{lead}-{step}@x>", step, lead)
    _run(ledger, "INSERT INTO sender_send_log (email_id, message_id, mailbox, accepted_at) "
                 "SELECT id, message_id, mailbox, %s FROM sender_emails WHERE step = %s AND "
                 "lead_id = (SELECT id FROM sender_leads WHERE lead = %s)", at, step, lead)


def _enqueue(ledger: Ledger, lead: str, step: int) -> None:
    assert ledger.enqueue(lead=lead, step=step, address=f"{lead}@rcpt.example", group="sales", subject="Hi",
                          text="Hello").value in ("queued", "waiting")


def test_the_copy_holds_every_row_that_can_still_go_and_what_decides_when(source: Ledger, target: Ledger) -> None:
    for lead in ("live", "done-long-ago", "done-today", "claimed", "started"):
        _enqueue(source, lead, 1)
    _enqueue(source, "live", 2)  # waits for step 1
    _sent(source, "done-long-ago", 1, NOW - timedelta(days=9))
    _sent(source, "done-today", 1, NOW - timedelta(hours=2))  # what the guard's rebuild counts
    _run(source, "UPDATE sender_emails SET status = 'sending', claimed_by = 'w1' "
                 "WHERE address = 'claimed@rcpt.example'")
    _run(source, "UPDATE sender_emails SET status = 'sending', attempt_id = %s WHERE address = 'started@rcpt.example'",
         uuid.uuid4())
    before = _rows(source)
    key = source.unsubscribe_key()  # a ledger that has sent has made its key

    counts = copy_ledger(source.url or "", target.url or "", NOW)

    copied = _rows(target)
    assert set(copied) == {"live:1", "live:2", "done-today:1", "claimed:1", "started:1"}
    assert copied["claimed:1"][0] == "queued"  # claimed and not started: it goes now
    assert copied["started:1"][0] == "sending"  # an attempt started: the sweep's, never sent again
    assert copied["live:2"][0] == before["live:2"][0] and copied["done-today:1"][0] == "sent"
    assert counts["sender_emails"] == 5 and counts["sender_send_log"] == 1 and counts["sender_sent"] == 1
    assert _rows(source) == before  # the source is read, never written
    # the ids and the sequences go on from the source's: a new row never takes a copied row's id
    _enqueue(target, "new", 1)
    with target.calling("ids") as conn:
        ids = [row[0] for row in conn.execute("SELECT id FROM sender_emails ORDER BY id").fetchall()]
    with source.calling("ids") as conn:
        highest = conn.execute("SELECT max(id) FROM sender_emails").fetchone()
    assert highest is not None and ids[-1] > highest[0]
    # the copy keeps the source's unsubscribe key: the links it would sign are the source's
    assert target.unsubscribe_key() == key


def test_the_guard_copy_takes_warm_up_keys_of_every_type_with_their_ttl(redis_client: redis.Redis,
                                                                       tmp_path: Path) -> None:
    source = redis_client
    prefix = "sendhost:warmup"
    source.hset(f"{prefix}:mbx:{{a}}", mapping={"sent": "3", "cap": "10"})
    source.zadd(f"{prefix}:sends:{{a}}", {"t1": 1.0, "t2": 2.0})
    source.set(f"{prefix}:pause:{{a}}", "by hand", px=600_000)
    source.sadd(f"{prefix}:group:sales", "a@x")
    source.rpush(f"{prefix}:log", "one", "two")
    source.set("sendhost:{host}:slots", "not warm-up's")
    with embedded_redis(tmp_path) as scratch:  # the forecast's own
        assert copy_guard(source, scratch) == 5
        assert scratch.hgetall(f"{prefix}:mbx:{{a}}") == {"sent": "3", "cap": "10"}
        assert scratch.zrange(f"{prefix}:sends:{{a}}", 0, -1, withscores=True) == [("t1", 1.0), ("t2", 2.0)]
        assert 0 < scratch.pttl(f"{prefix}:pause:{{a}}") <= 600_000
        assert scratch.pttl(f"{prefix}:mbx:{{a}}") == -1  # no time to live stays none
        assert scratch.smembers(f"{prefix}:group:sales") == {"a@x"}
        assert scratch.lrange(f"{prefix}:log", 0, -1) == ["one", "two"]
        assert not scratch.exists("sendhost:{host}:slots")


def test_every_table_the_claim_reads_is_copied(source: Ledger) -> None:
    """A table the send path reads and the copy leaves out makes a forecast that sends nothing (a window's intervals
    left out closed every window): each table of the schema is copied or named here as read by nothing on the
    send path."""
    from simulation.forecast.snapshot import TABLES

    not_on_the_send_path = {"sender_events", "sender_events_default", "sender_events_retired", "sender_feedback",
                            "sender_engagement", "sender_inbox_marks", "sender_counts", "sender_count_changes",
                            "sender_send_log_default", "sender_schema_versions"}  # the copy's own, migrated alike
    with source.calling("tables") as conn:
        tables = {row[0] for row in conn.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') AND NOT c.relispartition").fetchall()}
    copied = {table for table, _select in TABLES}
    assert tables - copied - not_on_the_send_path == set()
