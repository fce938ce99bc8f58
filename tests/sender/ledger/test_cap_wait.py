"""What of a campaign waits for which cap (sender.ledger.cap_wait), with no service: the ledger's rows and the guard's
reading are given, as the ledger and sender.guard_view would give them."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any, cast
from zoneinfo import ZoneInfo

from sender.campaigns.spec import CampaignSpec, load_applied
from sender.ledger.cap_wait import CapWait, GuardRead, GuardView, MailboxDay, cap_wait, day_start
from sender.ledger.store import Ledger
from sender.ledger.waits import Reason

BERLIN = ZoneInfo("Europe/Berlin")
NOON = datetime(2026, 3, 10, 11, 0, tzinfo=UTC)  # a Tuesday, 12:00 in Berlin
A, B, PINNED = "a@sender.example", "b@sender.example", "p@sender.example"


def spec(pacing: str = "daily_cap: 10\nmax_per_mailbox_per_day: 3\n") -> CampaignSpec:
    return load_applied("q1", f"name: q1\ngroup: default\nsteps:\n  - subject: Hi\n    body: Hello\n"
                              f"timezone: Europe/Berlin\n{pacing}")


class Rows:
    """The ledger at its boundary: its clock, and the `campaign_wait_rows` it answers (status, lead's time zone,
    group, pinned mailbox, not due yet, put back, how many, the earliest time), with the query's values kept."""

    def __init__(self, now: datetime, rows: Sequence[tuple[Any, ...]] = ()) -> None:
        self._now, self._rows = now, list(rows)
        self.asked: dict[str, Any] = {}

    def now(self) -> datetime:
        return self._now

    def fetch_all(self, name: str, params: dict[str, Any], what: str) -> list[tuple[Any, ...]]:
        assert name == "campaign_wait_rows"
        self.asked = params
        return self._rows


def due(tz: str | None = None, pinned: str | None = None, n: int = 1) -> tuple[Any, ...]:
    """`n` queued rows due now (the query's shape)."""
    return ("queued", tz, "default", pinned, False, False, n, NOON)


def pace_of(ledger: Rows, campaign: CampaignSpec, read: GuardRead | None, unreachable: str | None = None) -> CapWait:
    return cap_wait(cast(Ledger, ledger), campaign, read, unreachable)


TONIGHT = datetime(2026, 3, 11, tzinfo=BERLIN)


def day(address: str, frees: datetime | None, in_group: bool = True) -> MailboxDay:
    return MailboxDay(address, "daily-limit" if frees else "ready", in_group, date(2026, 3, 10), 3, 3, 3, 0, frees)


def view(sent_today: int = 0, *days: MailboxDay) -> GuardView:
    return GuardView(sent_today, {d.address: d for d in days})


def test_the_guard_unread_leaves_every_cap_unknown_and_every_row_due_now_due() -> None:
    later = ("queued", None, "default", PINNED, True, True, 1, NOON + timedelta(days=2))
    ledger = Rows(NOON, [due(), later, due()])
    pace = pace_of(ledger, spec(), None, "Redis refused the connection")
    assert (pace.due, pace.sent_today, pace.campaign_cap_rows, pace.mailbox_cap_rows) == (2, None, None, None)
    assert pace.unknown == "Redis refused the connection" and pace.mailboxes == ()
    assert ledger.asked == {"name": "q1", "at": NOON.astimezone(BERLIN)}


def test_a_failed_read_says_why_in_unknown() -> None:
    pace = pace_of(Rows(NOON, [due()]), spec(), lambda now, ends: "Error 111 connecting",
                    "never used")
    assert (pace.unknown, pace.due, pace.campaign_cap_rows) == ("Error 111 connecting", 1, None)


def test_the_read_is_asked_at_now_and_the_end_of_the_campaigns_local_day() -> None:
    asked = []

    def read(now: datetime, day_ends: datetime) -> GuardView:
        asked.append((now, day_ends))
        return view()
    pace = pace_of(Rows(NOON), spec(), read)
    assert asked == [(NOON.astimezone(BERLIN), TONIGHT)]
    assert (pace.day, pace.day_ends, pace.now.utcoffset()) == (date(2026, 3, 10), TONIGHT, timedelta(hours=1))


def test_the_campaigns_day_ends_at_its_own_midnight_on_a_dst_day() -> None:
    # Berlin's clocks go from 02:00 to 03:00 on 2026-03-29: that day is 23 hours long
    pace = pace_of(Rows(datetime(2026, 3, 28, 23, 30, tzinfo=UTC)), spec(), lambda now, ends: view())
    assert pace.day == date(2026, 3, 29)
    assert pace.day_ends == datetime(2026, 3, 29, 22, 0, tzinfo=UTC)


def test_a_midnight_that_dst_skips_starts_the_day_at_the_first_instant_after_it() -> None:
    santiago = ZoneInfo("America/Santiago")  # 2026-09-06 00:00 -> 01:00
    assert day_start(date(2026, 9, 6), santiago).isoformat() == "2026-09-06T01:00:00-03:00"
    assert day_start(date(2026, 9, 5), santiago).isoformat() == "2026-09-05T00:00:00-04:00"


def test_a_campaign_at_its_daily_cap_holds_every_row_due_until_its_day_ends() -> None:
    put_back = ("retry", None, "default", PINNED, False, True, 1, NOON + timedelta(hours=1))
    ledger = Rows(NOON, [due(), put_back])
    pace = pace_of(ledger, spec(), lambda now, ends: view(10, day(A, None)))
    assert (pace.due, pace.campaign_cap_rows, pace.mailbox_cap_rows, pace.sent_today) == (0, 2, 0, 10)
    assert pace.waits is not None and pace.waits.first(Reason.CAMPAIGN_CAP) == TONIGHT


def test_below_its_daily_cap_the_campaign_holds_nothing() -> None:
    ledger = Rows(NOON, [due()])
    pace = pace_of(ledger, spec(), lambda now, ends: view(9, day(A, None)))
    assert (pace.due, pace.campaign_cap_rows) == (1, 0)


def test_a_row_pinned_to_a_capped_mailbox_waits_until_that_mailbox_frees() -> None:
    frees = datetime(2026, 3, 10, 15, 0, tzinfo=UTC)
    ledger = Rows(NOON, [due(pinned=PINNED), due(pinned=A)])
    pace = pace_of(ledger, spec(), lambda now, ends: view(0, day(PINNED, frees, in_group=False), day(A, None)))
    assert (pace.due, pace.mailbox_cap_rows, pace.mailbox_cap_until) == (1, 1, frees.astimezone(BERLIN))


def test_an_unpinned_row_waits_only_when_every_mailbox_of_the_group_is_capped_until_the_first_frees() -> None:
    early, late = datetime(2026, 3, 10, 14, tzinfo=UTC), datetime(2026, 3, 10, 16, tzinfo=UTC)
    row = due()
    one_free = pace_of(Rows(NOON, [row]), spec(), lambda now, ends: view(0, day(A, early), day(B, None)))
    assert (one_free.due, one_free.mailbox_cap_rows, one_free.mailbox_cap_until) == (1, 0, None)
    ledger = Rows(NOON, [row])
    all_capped = pace_of(ledger, spec(), lambda now, ends: view(0, day(A, late), day(B, early)))
    assert (all_capped.due, all_capped.mailbox_cap_rows, all_capped.mailbox_cap_until) == (0, 1, early)


def test_a_row_whose_leads_window_is_closed_waits_for_it_its_own_zone_before_the_campaigns() -> None:
    window = "window:\n  days: [tue]\n  hours: [\"09:00-17:00\"]\ndaily_cap: 10\n"
    # 12:00 in Berlin, 06:00 in New York, 20:00 in Tokyo: only Berlin's (the campaign's, for no zone) is open
    ledger = Rows(NOON, [due(), due("America/New_York"), due("Asia/Tokyo"), due("Not/AZone")])
    pace = pace_of(ledger, spec(window), lambda now, ends: view(0, day(A, None)))
    assert pace.due == 2  # the campaign's zone, and the one a lead's invalid zone falls back to
    assert pace.waits is not None
    assert [(line.reason, line.where, line.rows) for line in pace.waits.lines if line.reason is Reason.WINDOW] == [
        (Reason.WINDOW, "America/New_York", 1), (Reason.WINDOW, "Asia/Tokyo", 1)]


def test_the_json_names_each_cap_and_each_mailbox() -> None:
    frees = datetime(2026, 3, 10, 15, 0, tzinfo=UTC)
    pace = pace_of(Rows(NOON), spec(), lambda now, ends: view(4, day(A, frees)))
    shown = pace.as_json()
    assert shown["campaign_cap"] == {"day": "2026-03-10", "ends": "2026-03-11T00:00:00+01:00", "cap": 10,
                                     "reserved": 4, "rows": 0}
    assert shown["mailbox_cap"] == {"per_mailbox": 3, "rows": 0, "until": None}
    assert shown["mailboxes"] == {A: {"state": "daily-limit", "day": "2026-03-10", "sent": 3, "reserved": 3,
                                      "cap": 3, "campaign": 0, "frees": "2026-03-10T15:00:00+00:00"}}
