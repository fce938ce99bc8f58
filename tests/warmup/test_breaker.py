"""The per-inbox circuit breaker: 5 failures in 30 minutes trip it, but only while the system is sending fine."""

from __future__ import annotations

from datetime import date, timedelta

from tests.warmup.conftest import NOW
from warmup import FailureClass, Guard

START = date(2026, 11, 30) - timedelta(days=60)  # at the ceiling: cap 40


def _setup(guard: Guard) -> None:
    guard.add_mailbox("sick@x.com", start=START, min_gap_s=0, jitter_s=(0, 0), now=NOW)
    guard.add_mailbox("well@x.com", start=START, min_gap_s=0, jitter_s=(0, 0), now=NOW)


def _successes(guard: Guard, n: int, at: float) -> None:
    for i in range(n):
        decision = guard.reserve("well@x.com", now=at + i)
        assert decision.reservation is not None
        assert guard.confirm(decision.reservation, now=at + i)


def _fail(guard: Guard, n: int, at: float, failure: FailureClass = FailureClass.TRANSIENT) -> list[bool]:
    tripped = []
    for i in range(n):
        decision = guard.reserve("sick@x.com", now=at + i)
        assert decision.reservation is not None, decision
        tripped.append(guard.cancel(decision.reservation, failure, now=at + i).tripped)
    return tripped


def test_five_failures_during_a_system_wide_outage_do_not_trip(guard: Guard) -> None:
    _setup(guard)
    assert _fail(guard, 5, NOW) == [False] * 5
    assert guard.reserve("sick@x.com", now=NOW + 10).reserved
    assert guard.status(["sick@x.com"], now=NOW + 10)[0].breaker == "closed"


def test_nine_system_successes_are_not_enough_either(guard: Guard) -> None:
    _setup(guard)
    _successes(guard, 9, NOW - 600)
    assert _fail(guard, 5, NOW) == [False] * 5


def test_five_failures_while_the_system_sends_fine_trip_it(guard: Guard) -> None:
    _setup(guard)
    _successes(guard, 10, NOW - 600)
    assert _fail(guard, 5, NOW) == [False] * 4 + [True]
    held = guard.reserve("sick@x.com", now=NOW + 10)
    assert held.status == "skipped-cooldown" and held.reason == "circuit breaker open"
    assert guard.reserve("well@x.com", now=NOW + 10).reserved  # only the sick inbox is held
    status = guard.status(["sick@x.com"], now=NOW + 10)[0]
    assert (status.breaker, status.trips_today) == ("open", 1)


def test_failures_outside_the_window_do_not_count(guard: Guard) -> None:
    _setup(guard)
    _successes(guard, 10, NOW + 1700)
    _fail(guard, 3, NOW)
    assert _fail(guard, 2, NOW + 1801) == [False, False]  # the first three fell out of the 30 minutes


def test_recipient_rejections_are_not_the_inbox_s_fault(guard: Guard) -> None:
    _setup(guard)
    _successes(guard, 10, NOW - 600)
    assert _fail(guard, 6, NOW, FailureClass.RECIPIENT) == [False] * 6


def test_two_trips_in_a_day_disconnect_until_resumed(guard: Guard) -> None:
    _setup(guard)
    _successes(guard, 10, NOW - 600)
    assert _fail(guard, 5, NOW)[-1]
    reopen = NOW + 4 + 1800  # tripped at NOW + 4; the breaker holds for 30 minutes
    _successes(guard, 10, reopen - 60)
    assert _fail(guard, 5, reopen)[-1]
    later = guard.reserve("sick@x.com", now=reopen + 3 * 3600)
    assert later.status == "skipped-paused" and "tripped 2 times" in (later.reason or "")
    assert guard.status(["sick@x.com"], now=reopen + 10)[0].breaker == "disconnected"
    guard.resume("sick@x.com")
    assert guard.reserve("sick@x.com", now=reopen + 3 * 3600).reserved
