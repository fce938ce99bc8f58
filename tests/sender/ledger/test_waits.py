"""Each row not sent yet in exactly one reason (sender.ledger.waits), with no service: the rows and the guard's
mailboxes given as the ledger and sender.guard_view give them."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from sender.campaigns.pacing import HourRange
from sender.campaigns.window import Schedule
from sender.ledger.cap_wait import MailboxDay
from sender.ledger.waits import Conditions, Reason, RowFacts, Wait, WaitLine, Waits, classify, describe, gather

NOON = datetime(2026, 3, 10, 11, 0, tzinfo=UTC)  # a Tuesday: 12:00 in Berlin, 20:00 in Tokyo
A, B = "a@sender.example", "b@sender.example"
WEEKDAYS_9_TO_17 = Schedule(tuple(range(5)), (HourRange(9 * 60, 17 * 60),))


def row(status: str = "queued", tz: str | None = None, pinned: str | None = None, scheduled: bool = False,
        held: bool = False, at: datetime = NOON) -> RowFacts:
    return RowFacts(status, tz, "sales", pinned, scheduled, held, at)


def box(address: str, state: str = "ready", frees: datetime | None = None,
        eligible: datetime | None = None) -> MailboxDay:
    return MailboxDay(address, state, True, date(2026, 3, 10), 1, 1, 10, 0, frees, eligible)


def conditions(*boxes: MailboxDay, **kw: object) -> Conditions:
    mailboxes = {b.address: b for b in boxes}
    base = Conditions(NOON, "running", "Europe/Berlin", mailboxes=mailboxes, groups={"sales": sorted(mailboxes)})
    return replace(base, **kw)  # type: ignore[arg-type]


LATER = NOON + timedelta(hours=3)
CASES = {
    "waiting": (row("waiting"), conditions(box(A)), Wait(Reason.WAITING)),
    "campaign-paused": (row("waiting"), conditions(box(A), state="paused"),
                        Wait(Reason.CAMPAIGN_PAUSED, where="paused")),
    "sending": (row("sending"), conditions(box(A)), Wait(Reason.SENDING)),
    "scheduled": (row(scheduled=True, held=True, at=LATER), conditions(box(A)), Wait(Reason.SCHEDULED, LATER)),
    "window": (row(tz="Asia/Tokyo"), conditions(box(A), schedule=WEEKDAYS_9_TO_17),
               Wait(Reason.WINDOW, datetime(2026, 3, 11, 0, 0, tzinfo=UTC), "Asia/Tokyo")),
    "campaign-cap": (row(), conditions(box(A), campaign_full_until=LATER), Wait(Reason.CAMPAIGN_CAP, LATER)),
    "mailbox-paused": (row(pinned=A), conditions(box(A, "paused"), box(B)), Wait(Reason.MAILBOX_PAUSED, None, A)),
    "mailbox-cap": (row(), conditions(box(A, "daily-limit", LATER), box(B, "paused")),
                    Wait(Reason.MAILBOX_CAP, LATER, A)),
    "gap": (row(), conditions(box(A, "cooldown", eligible=LATER), box(B, "daily-limit", LATER + timedelta(1))),
            Wait(Reason.GAP, LATER, A)),
    "backoff": (row("retry", held=True, at=LATER), conditions(box(A)), Wait(Reason.BACKOFF, LATER)),
    "put-back": (row(held=True, at=LATER), conditions(box(A)), Wait(Reason.PUT_BACK, LATER)),
    "due": (row(), conditions(box(A, "cooldown", eligible=LATER), box(B)), Wait(Reason.DUE)),
}


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_each_row_has_exactly_the_reason_that_holds_it(case: str) -> None:
    facts, given, expected = CASES[case]
    assert classify(facts, given) == expected


def test_every_reason_has_a_case() -> None:
    assert {reason.value for reason in Reason} == set(CASES)


def test_the_guard_unread_leaves_the_mailboxes_out_and_the_row_due() -> None:
    assert classify(row(pinned=A), conditions(box(A, "paused"), mailboxes=None)) == Wait(Reason.DUE)


def test_the_lines_sum_to_the_rows_one_line_per_reason_and_place() -> None:
    given = conditions(box(A, "daily-limit", LATER), schedule=WEEKDAYS_9_TO_17)
    waits = gather([(row(tz="Asia/Tokyo"), 3), (row(tz="Asia/Tokyo"), 2), (row(), 4), (row("waiting"), 5)], given)
    assert [(line.reason, line.rows, line.where) for line in waits.lines] == [
        (Reason.WAITING, 5, None), (Reason.WINDOW, 5, "Asia/Tokyo"), (Reason.MAILBOX_CAP, 4, A)]
    assert waits.rows == 14
    assert waits.window_closes == datetime(2026, 3, 10, 16, 0, tzinfo=UTC)  # Berlin's 17:00


def test_the_words_name_the_zone_and_the_time_on_its_clock() -> None:
    waits = Waits(NOON, "UTC", ())
    tokyo = WaitLine(Reason.WINDOW, 3, datetime(2026, 3, 15, 23, 0, tzinfo=UTC), "Asia/Tokyo")
    assert describe(tokyo, waits, "q1") == "3 wait for their window (Asia/Tokyo) until Mon 08:00 +09:00"
    gap = WaitLine(Reason.GAP, 2, datetime(2026, 3, 10, 21, 34, tzinfo=UTC), A)
    assert describe(gap, waits, "q1") == f"2 wait for a mailbox's gap or pace until 21:34 UTC, {A}"
    paused = WaitLine(Reason.CAMPAIGN_PAUSED, 4, None, "paused")
    assert describe(paused, waits, "q1") == "4 wait for the campaign, which is paused (`sendhost campaign resume q1`)"


def test_an_open_window_says_when_it_closes_and_a_closed_one_none() -> None:
    berlin = ZoneInfo("Europe/Berlin")
    assert WEEKDAYS_9_TO_17.closes(NOON, berlin) == datetime(2026, 3, 10, 16, 0, tzinfo=UTC)
    assert WEEKDAYS_9_TO_17.closes(NOON, ZoneInfo("Asia/Tokyo")) is None
    always = Schedule(skip_dates=frozenset({date(2026, 3, 12)}))
    assert always.closes(NOON, berlin) == datetime(2026, 3, 11, 23, 0, tzinfo=UTC)  # the skip date's midnight
