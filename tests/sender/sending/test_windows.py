"""The agent's sending-window check (sender.sending.windows), with no service: the ledger gives only the campaign's
file as applied, and the rows are built as the claim builds them."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import cast
from zoneinfo import ZoneInfo

from sender.ledger.store import Claimed, Ledger
from sender.sending.windows import BROKEN_DELAY_S, NO_PACE, Closed, Pace, Windows

BERLIN, NEW_YORK = ZoneInfo("Europe/Berlin"), ZoneInfo("America/New_York")
CAMPAIGN = """name: q1
group: default
steps:
  - subject: Hi
    body: Hello
timezone: Europe/Berlin
"""
WINDOW = CAMPAIGN + """window:
  days: [mon, tue, wed, thu, fri]
  hours: ["09:00-12:00", "13:00-17:00"]
skip_dates: ["2026-12-24"]
daily_cap: 50
max_per_mailbox_per_day: 7
"""


class Sources:
    """The ledger at its boundary: each campaign's applied file and its hash; how often it was read."""

    def __init__(self, source: str, source_hash: str = "h1") -> None:
        self.source, self.hash, self.reads = source, source_hash, 0

    def campaign_source(self, campaign_id: int) -> tuple[str, str, str] | None:
        self.reads += 1
        return None if self.source == "" else ("q1", self.source, self.hash)


def row(lead_timezone: str | None = None, campaign_id: int | None = 1, source_hash: str | None = "h1") -> Claimed:
    return Claimed(1, "lead-1", 1, "to@lead.example", "default", "Hi", "Hello", 0, uuid.uuid4(), None, None,
                   campaign_id=campaign_id, lead_timezone=lead_timezone, source_hash=source_hash)


def closed(sources: Sources, at: datetime, lead_timezone: str | None = None, windows: Windows | None = None,
           **kwargs: object) -> Closed | None:
    return (windows or Windows()).closed(cast(Ledger, sources), row(lead_timezone, **kwargs), at)


def berlin(*args: int) -> datetime:
    return datetime(*args, tzinfo=BERLIN).astimezone(UTC)


def test_an_enqueued_row_has_no_window() -> None:
    sources = Sources(WINDOW)
    assert closed(sources, berlin(2026, 3, 14, 3, 0), campaign_id=None) is None
    assert closed(sources, berlin(2026, 3, 14, 3, 0), source_hash=None) is None
    assert sources.reads == 0


def test_a_campaign_without_a_window_is_always_open() -> None:
    assert closed(Sources(CAMPAIGN), berlin(2026, 3, 14, 3, 0)) is None


def test_inside_an_hour_range_of_a_window_day_the_row_goes() -> None:
    assert closed(Sources(WINDOW), berlin(2026, 3, 10, 9, 0)) is None  # Tuesday, the range's first minute
    assert closed(Sources(WINDOW), berlin(2026, 3, 10, 16, 59)) is None


def test_between_two_ranges_the_row_waits_for_the_next_one() -> None:
    wait = closed(Sources(WINDOW), berlin(2026, 3, 10, 12, 30))
    assert wait is not None and wait.opens == berlin(2026, 3, 10, 13, 0)
    assert wait.delay_s == 1800.0
    assert wait.why == ("outside the sending window of campaign q1 (Europe/Berlin); opens "
                        "2026-03-10T13:00:00+01:00")


def test_after_fridays_last_range_the_row_waits_for_monday() -> None:
    wait = closed(Sources(WINDOW), berlin(2026, 3, 13, 17, 0))  # the range ends at 17:00, exclusive
    assert wait is not None and wait.opens == berlin(2026, 3, 16, 9, 0)


def test_a_skip_date_is_closed_all_day_and_the_row_waits_for_the_next_window_day() -> None:
    wait = closed(Sources(WINDOW), berlin(2026, 12, 24, 10, 0))  # a Thursday, skipped
    assert wait is not None and wait.opens == berlin(2026, 12, 25, 9, 0)


def test_the_leads_own_zone_wins_over_the_campaigns() -> None:
    at = berlin(2026, 3, 10, 10, 0)  # 10:00 in Berlin, 05:00 in New York
    assert closed(Sources(WINDOW), at) is None
    wait = closed(Sources(WINDOW), at, "America/New_York")
    assert wait is not None and wait.opens == datetime(2026, 3, 10, 9, 0, tzinfo=NEW_YORK)
    assert "(America/New_York)" in wait.why and wait.why.endswith("opens 2026-03-10T09:00:00-04:00")


def test_a_leads_zone_that_is_not_one_falls_back_to_the_campaigns() -> None:
    assert closed(Sources(WINDOW), berlin(2026, 3, 10, 10, 0), "Mars/Olympus") is None


def test_on_a_dst_day_the_window_is_read_on_the_local_wall_clock() -> None:
    # Berlin moves from +01:00 to +02:00 on 2026-03-29 (a Sunday); Monday 09:00 is then 07:00 UTC, not 08:00
    wait = closed(Sources(WINDOW), datetime(2026, 3, 29, 12, 0, tzinfo=UTC))
    assert wait is not None and wait.opens == datetime(2026, 3, 30, 7, 0, tzinfo=UTC)
    assert closed(Sources(WINDOW), datetime(2026, 3, 30, 7, 0, tzinfo=UTC)) is None
    assert closed(Sources(WINDOW), datetime(2026, 3, 30, 6, 59, tzinfo=UTC)) is not None


def test_a_range_that_a_dst_change_skips_is_closed_that_day_and_opens_the_next_window_day() -> None:
    # 02:00-03:00 does not exist in Berlin on its spring-forward Sunday, 2026-03-29
    gap = CAMPAIGN + 'window:\n  days: [sun]\n  hours: ["02:00-03:00"]\n'
    wait = closed(Sources(gap), datetime(2026, 3, 28, 23, 30, tzinfo=UTC))  # 00:30 that Sunday
    assert wait is not None and wait.opens == datetime(2026, 4, 5, 2, 0, tzinfo=BERLIN)
    assert wait.delay_s == (wait.opens - datetime(2026, 3, 28, 23, 30, tzinfo=UTC)).total_seconds()


def test_a_file_that_no_longer_parses_keeps_its_rows_back_for_a_while() -> None:
    wait = closed(Sources("name: q1\nsteps: []\n"), berlin(2026, 3, 10, 10, 0))
    assert wait is not None and (wait.opens, wait.delay_s) == (None, BROKEN_DELAY_S)
    assert wait.why.startswith("the applied file does not parse: ")


def test_a_deleted_campaign_keeps_its_rows_back() -> None:
    wait = closed(Sources(""), berlin(2026, 3, 10, 10, 0))
    assert wait is not None and wait.why == "campaign 1 is gone"


def test_the_file_is_parsed_once_per_hash() -> None:
    sources, windows = Sources(WINDOW), Windows()
    for _ in range(3):
        closed(sources, berlin(2026, 3, 10, 10, 0), windows=windows)
    assert sources.reads == 1
    sources.hash = "h2"  # an `apply`: the claim hands over the new hash
    closed(sources, berlin(2026, 3, 10, 10, 0), windows=windows, source_hash="h2")
    closed(sources, berlin(2026, 3, 10, 10, 0), windows=windows, source_hash="h2")
    assert sources.reads == 2


def test_the_pace_is_the_campaigns_slot_on_its_local_day_and_the_windows_time_left() -> None:
    at = berlin(2026, 3, 10, 16, 0)
    pace = Windows().pace(cast(Ledger, Sources(WINDOW)), row(), at)
    assert pace.campaign is not None
    assert (pace.campaign.name, pace.campaign.day, pace.campaign.cap, pace.campaign.per_mailbox) == (
        "q1", "2026-03-10", 50, 7)
    assert pace.campaign.day_ends_ms == int(berlin(2026, 3, 11, 0, 0).timestamp() * 1000)
    assert pace.window_left_s == 3600.0  # 16:00 to 17:00


def test_the_campaigns_day_is_its_own_not_the_leads() -> None:
    at = datetime(2026, 3, 10, 23, 30, tzinfo=UTC)  # 00:30 on the 11th in Berlin, 19:30 on the 10th in New York
    pace = Windows().pace(cast(Ledger, Sources(CAMPAIGN)), row("America/New_York"), at)
    assert pace.campaign is not None and pace.campaign.day == "2026-03-11"
    assert pace.window_left_s is None  # no window: the guard spreads over nothing


def test_an_enqueued_row_or_a_broken_file_has_no_pace() -> None:
    assert Windows().pace(cast(Ledger, Sources(WINDOW)), row(campaign_id=None), berlin(2026, 3, 10, 10, 0)) == NO_PACE
    assert Windows().pace(cast(Ledger, Sources("name: q1\n")), row(), berlin(2026, 3, 10, 10, 0)) == Pace()
