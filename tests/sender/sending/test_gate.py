"""The checks before the reservation (sender.sending.gate), with no service: the ledger is a fake at its boundary
that also gives the campaign's file as applied."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from sender.ledger.store import Settle, Status
from sender.sending.gate import Gate, Ready
from sender.sending.report import Report, Stop
from sender.sending.tokens import verify_token
from sender.sending.windows import Windows
from tests.sender.sending.fakes import FakeLedger, claimed, write_now

KEY = b"k" * 32
BASE = "https://u.example.test"
WINDOW = """name: q1
group: sales
steps:
  - subject: Hi
    body: Hello
timezone: Europe/Berlin
window:
  days: [mon, tue, wed, thu, fri]
  hours: ["09:00-17:00"]
"""
SATURDAY = datetime(2026, 3, 14, 12, 0, tzinfo=UTC).timestamp()
TUESDAY = datetime(2026, 3, 10, 12, 0, tzinfo=UTC).timestamp()


class CampaignLedger(FakeLedger):
    def campaign_source(self, campaign_id: int) -> tuple[str, str, str] | None:
        self.calls.append(("campaign_source", campaign_id))
        return ("q1", WINDOW, "h1")


def gate(at: float) -> Gate:
    return Gate(Windows(), lambda: at, KEY, BASE, write_now)


def check(ledger: FakeLedger, at: float = TUESDAY, **fields: Any) -> Ready | Stop:
    return gate(at).check(ledger.as_ledger(), claimed(3, **fields))


def test_a_row_whose_attempt_started_before_is_settled_unconfirmed_never_sent() -> None:
    ledger = FakeLedger()
    ledger.status = Status.UNCONFIRMED
    stop = check(ledger, attempt_id=uuid.uuid4())
    assert stop == Report(3, "crash", "settled as unconfirmed")
    assert ledger.calls == [("settle", 3, Settle.UNCONFIRMED, "redelivered after an attempt had started", 0.0)]


def test_a_row_is_not_checked_against_its_window_the_claim_took_it_inside_it() -> None:
    # Saturday is outside the campaign's window: the gate asks nothing of it (the claim decided), and the row goes.
    ledger = CampaignLedger()
    ready = check(ledger, SATURDAY, campaign_id=1, source_hash="h1")
    assert isinstance(ready, Ready)
    assert ledger.calls == [("campaign_source", 1)]  # its tracking, read once


def test_a_row_inside_its_window_is_ready_with_its_unsubscribe_link_and_content() -> None:
    ready = check(CampaignLedger(), TUESDAY, campaign_id=1, source_hash="h1")
    assert isinstance(ready, Ready)
    assert ready.now == datetime.fromtimestamp(TUESDAY, UTC)
    assert ready.unsubscribe.startswith(f"{BASE}/u/")
    assert verify_token(KEY, ready.unsubscribe.rsplit("/", 1)[1]) == uuid.UUID(int=3)
    assert (ready.content.headers.subject, ready.content.body) == ("Hi", "Hello")


def test_a_lead_that_cannot_fill_its_step_fails_it_before_any_reservation() -> None:
    ledger = FakeLedger()
    ledger.status = Status.FAILED
    stop = check(ledger, subject="Hello {first_name}", fields={})
    assert isinstance(stop, Report) and stop.kind == "failed" and stop.detail.startswith("cannot compose: ")
    (call,) = ledger.calls
    assert call[:3] == ("settle", 3, Settle.FAILED) and call[3] == stop.detail


def test_a_subject_that_cannot_be_a_header_fails_its_row() -> None:
    ledger = FakeLedger()
    ledger.status = Status.FAILED
    stop = check(ledger, subject="=?utf-8?q?hidden?=")
    assert isinstance(stop, Report) and stop.kind == "failed" and "the subject" in stop.detail
