"""What the agent reads of a claimed row's campaign file (sender.sending.windows), with no service: the ledger gives
only the campaign's file as applied, and the rows are built as the claim builds them. Whether the window is open is
the claim's (tests/sender/ledger/test_window_intervals.py)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import cast
from zoneinfo import ZoneInfo

from sender.ledger.store import Claimed, Ledger
from sender.sending.windows import NO_PACE, Pace, Windows

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


def berlin(*args: int) -> datetime:
    return datetime(*args, tzinfo=BERLIN).astimezone(UTC)


def test_the_file_is_parsed_once_per_hash() -> None:
    sources, windows = Sources(WINDOW), Windows()
    for _ in range(3):
        windows.pace(cast(Ledger, sources), row(), berlin(2026, 3, 10, 10, 0))
    assert sources.reads == 1
    sources.hash = "h2"  # an `apply`: the claim hands over the new hash
    for _ in range(2):
        windows.pace(cast(Ledger, sources), row(source_hash="h2"), berlin(2026, 3, 10, 10, 0))
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
    sources = Sources(WINDOW)
    assert Windows().pace(cast(Ledger, sources), row(campaign_id=None), berlin(2026, 3, 10, 10, 0)) == NO_PACE
    assert Windows().pace(cast(Ledger, sources), row(source_hash=None), berlin(2026, 3, 10, 10, 0)) == NO_PACE
    assert sources.reads == 0  # `enqueue`: no file read
    assert Windows().pace(cast(Ledger, Sources("name: q1\n")), row(), berlin(2026, 3, 10, 10, 0)) == Pace()
