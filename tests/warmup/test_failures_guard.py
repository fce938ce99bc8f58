"""Every failure class through the real guard (Redis): the slot, the breaker and the mailbox's state do what the
class's response says, and `unknown` keeps the reservation without a hold, a pause or a breaker count."""

from __future__ import annotations

from datetime import date, timedelta

import pytest

from tests.warmup.conftest import NOW
from warmup import FailureClass, Guard, Reservation

START = date(2026, 11, 30) - timedelta(days=60)  # at the ceiling (cap 40): the cap never gets in the way


def _add(guard: Guard, address: str) -> None:
    guard.add_mailbox(address, start=START, min_gap_s=0, jitter_s=(0, 0), now=NOW)


def _reserved(guard: Guard, address: str, at: float) -> int:
    """Reservations counted against today's cap: confirmed sends and those kept (in flight or unknown)."""
    return guard.status([address], now=at)[0].reserved


def _fail_once(guard: Guard, address: str, failure: FailureClass, at: float) -> tuple[bool, int]:
    reservation = guard.reserve(address, now=at).reservation
    assert reservation is not None
    outcome = guard.cancel(reservation, failure, now=at + 1)
    assert outcome.settled and outcome.applied
    return outcome.freed, outcome.failures_in_window


@pytest.mark.parametrize("failure", list(FailureClass), ids=[c.value for c in FailureClass])
def test_cancel_frees_the_slot_and_counts_for_the_breaker_as_the_response_says(guard: Guard,
                                                                              failure: FailureClass) -> None:
    _add(guard, "a@x.com")
    freed, in_window = _fail_once(guard, "a@x.com", failure, NOW)
    assert freed is failure.response.frees_slot
    assert _reserved(guard, "a@x.com", NOW + 2) == (0 if failure.response.frees_slot else 1)
    assert in_window == (1 if failure.response.counts_for_breaker else 0)


def test_unknown_keeps_the_reservation_and_leaves_the_mailbox_ready(guard: Guard) -> None:
    _add(guard, "a@x.com")
    freed, _ = _fail_once(guard, "a@x.com", FailureClass.UNKNOWN, NOW)
    assert not freed
    status = guard.status(["a@x.com"], now=NOW + 2)[0]
    assert (status.reserved, status.state, status.breaker, status.failures_in_window) == (1, "ready", "closed", 0)
    assert guard.reserve("a@x.com", now=NOW + 2).reserved  # no hold, no pause: the inbox is not at fault


def test_unknown_outcomes_never_trip_the_breaker_while_the_system_sends_fine(guard: Guard) -> None:
    _add(guard, "well@x.com")
    _add(guard, "a@x.com")
    for i in range(10):  # the system is healthy: the breaker would trip on real inbox failures
        decision = guard.reserve("well@x.com", now=NOW + i)
        assert decision.reservation is not None and guard.confirm(decision.reservation, now=NOW + i)
    tripped = []
    for i in range(8):
        reservation = guard.reserve("a@x.com", now=NOW + 20 + i).reservation
        assert reservation is not None
        tripped.append(guard.cancel(reservation, FailureClass.UNKNOWN, now=NOW + 20 + i).tripped)
    assert tripped == [False] * 8
    status = guard.status(["a@x.com"], now=NOW + 40)[0]
    assert (status.breaker, status.failures_in_window, status.reserved) == ("closed", 0, 8)
    # the same run with content failures does trip: the test would notice if unknown counted
    _add(guard, "b@x.com")
    trips = [guard.cancel(r, FailureClass.CONTENT, now=NOW + 50 + i).tripped
             for i, r in enumerate(_reservations(guard, "b@x.com", 5, NOW + 50))]
    assert trips == [False] * 4 + [True]


def test_an_unknown_outcome_is_settled_once(guard: Guard) -> None:
    _add(guard, "a@x.com")
    reservation = guard.reserve("a@x.com", now=NOW).reservation
    assert reservation is not None
    assert guard.cancel(reservation, FailureClass.UNKNOWN, now=NOW + 1).settled
    again = guard.cancel(reservation, FailureClass.TRANSIENT, now=NOW + 2)
    assert not again.settled and not again.freed  # a later definite-looking cancel cannot free it
    assert _reserved(guard, "a@x.com", NOW + 3) == 1


def _reservations(guard: Guard, address: str, n: int, at: float) -> list[Reservation]:
    out = []
    for i in range(n):
        reservation = guard.reserve(address, now=at + i).reservation
        assert reservation is not None
        out.append(reservation)
    return out
