"""Writing what already happened through a database restart (sender.sending.persist), with no service: the write
fails as a ledger that went away does, and time is the test's."""

from __future__ import annotations

import pytest

from sender.errors import LedgerUnavailable
from sender.sending.persist import PERSIST_FOR_S, persist
from tests.sender.sending.fakes import FakeLedger


def test_a_write_is_retried_with_growing_pauses_and_a_reconnect_until_it_lands() -> None:
    ledger = FakeLedger()
    slept: list[float] = []
    failures = [LedgerUnavailable("down"), LedgerUnavailable("down")]

    def write() -> str:
        if failures:
            raise failures.pop()
        return "written"

    assert persist(ledger.as_ledger(), write, slept.append, monotonic=lambda: 0.0) == "written"
    assert slept == [0.1, 0.2] and ledger.calls == [("reconnect",), ("reconnect",)]


def test_a_ledger_down_past_the_deadline_raises() -> None:
    now = [0.0]

    def write() -> None:
        now[0] += PERSIST_FOR_S / 2 + 1
        raise LedgerUnavailable("down")

    with pytest.raises(LedgerUnavailable):
        persist(FakeLedger().as_ledger(), write, lambda s: None, monotonic=lambda: now[0])

