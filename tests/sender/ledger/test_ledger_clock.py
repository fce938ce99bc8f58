"""The ledger on a clock of its own (`Ledger(clock=...)`): every rule that depends on the time lives in its time,
and without a clock the database's now() still rules."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from sender import Ledger, Settle, Status
from sender.ledger.events import Event, Feedback
from tests.support.clock import FakeClock

# A time far from the database's: a rule still on now() would show at once.
START = datetime(2031, 3, 1, 9, 0, tzinfo=UTC)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START.timestamp())


def _queue(ledger: Ledger, lead: str = "L1", address: str = "a@example.com") -> None:
    assert ledger.enqueue(lead=lead, step=1, address=address, group="sales", subject="Hi", text="Hello") == "queued"


def _times(database_url: str, lead: str = "L1") -> dict[str, datetime | None]:
    with psycopg.connect(database_url) as conn:
        cursor = conn.execute("SELECT not_before, created_at, updated_at, claimed_at, attempt_started_at "
                              "FROM sender_emails WHERE lead_id = (SELECT id FROM sender_leads WHERE lead = %s)",
                              (lead,))
        row = cursor.fetchone()
        assert row is not None and cursor.description is not None
        return dict(zip([c.name for c in cursor.description], row, strict=True))


def test_rows_are_due_and_stamped_in_the_clocks_time(timed: Ledger, clock: FakeClock, database_url: str) -> None:
    _queue(timed)
    assert _times(database_url)["not_before"] == START
    assert _times(database_url)["created_at"] == START
    (row,) = timed.claim("w1")
    timed.unclaim(row.id, 300.0, "cooling down")
    clock.now_s += 299
    assert timed.claim("w1") == []  # not due yet in the clock's time (the database's now() is years earlier)
    assert timed.next_due_s() == pytest.approx(1.0)
    clock.now_s += 1
    (row,) = timed.claim("w1")
    assert _times(database_url)["claimed_at"] == START + timedelta(seconds=300)
    outcome, _message_id = timed.begin_attempt(row.id, uuid.uuid4(), "box@sender.example", None,
                                               f"<{uuid.uuid4()}@sender.example>")
    assert outcome == "ok"
    assert _times(database_url)["attempt_started_at"] == START + timedelta(seconds=300)
    assert timed.settle(row.id, Settle.RETRY, "421 try later", 1800.0) is Status.RETRY
    assert _times(database_url)["not_before"] == START + timedelta(seconds=2100)
    with psycopg.connect(database_url) as conn:
        stamps = conn.execute("SELECT kind, at FROM sender_events ORDER BY id").fetchall()
    assert stamps == [("queued", START), ("unclaimed", START), ("attempt", START + timedelta(seconds=300)),
                      ("retry", START + timedelta(seconds=300))]


def test_the_sweep_reads_the_clocks_age(timed: Ledger, clock: FakeClock) -> None:
    _queue(timed)
    timed.claim("w1")
    clock.now_s += 1799
    assert timed.sweep(1800.0) == (0, 0)
    clock.now_s += 2
    assert timed.sweep(1800.0) == (1, 0)


def test_sends_and_feedback_are_stamped_in_the_clocks_time(timed: Ledger, clock: FakeClock, database_url: str) -> None:
    _queue(timed)
    (row,) = timed.claim("w1")
    timed.begin_attempt(row.id, uuid.uuid4(), "box@sender.example", None, f"<{uuid.uuid4()}@sender.example>")
    clock.now_s += 5
    assert timed.record_sent(row.id, "250 ok")
    assert timed.sends_since(START, ["box@sender.example"]) == [("box@sender.example",
                                                                 START + timedelta(seconds=5))]
    clock.now_s += 60
    feedback = Feedback(timed)
    feedback.apply(row.id, Event.BOUNCED, source="inbox", ref="m1")
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT occurred_at, received_at FROM sender_feedback").fetchone() == (
            START + timedelta(seconds=65), START + timedelta(seconds=65))
        assert conn.execute("SELECT created_at FROM sender_suppressions").fetchone() == (
            START + timedelta(seconds=65),)
    assert feedback.health_since(START) == {"box@sender.example": {"sent": 1, "bounced": 1, "complained": 0}}


def test_without_a_clock_the_database_keeps_the_time(ledger: Ledger, database_url: str) -> None:
    with psycopg.connect(database_url) as conn:
        (before,) = conn.execute("SELECT now()").fetchone() or (None,)
    _queue(ledger)
    assert ledger.now() is None
    times = _times(database_url)
    assert before is not None and times["created_at"] is not None and times["created_at"] >= before
    (row,) = ledger.claim("w1")
    ledger.unclaim(row.id, 3600.0, "")
    assert ledger.claim("w1") == []
    assert ledger.next_due_s() == pytest.approx(3600.0, abs=60)


def test_a_put_back_delay_maps_what_is_written(database_url: str, clock: FakeClock) -> None:
    asked: list[float] = []

    def due_at_once(delay_s: float) -> float:
        asked.append(delay_s)
        return 0.0

    with psycopg.connect(database_url, autocommit=True) as conn, \
            Ledger(conn, database_url, clock=clock, put_back_delay=due_at_once) as ledger:
        ledger.migrate()
        _queue(ledger)
        (row,) = ledger.claim("w1")
        ledger.unclaim(row.id, 300.0, "cooling down")
        assert [r.id for r in ledger.claim("w1")] == [row.id]  # due again at once: the caller does the waiting
        assert asked == [300.0]
