"""The sending window decided in the claim (sender.ledger.window_intervals, sender_claim): against a real ledger on a
fake clock, a row outside its lead's window is not claimed, and is claimed once the window opens; across both DST
changes as docs/campaigns.md says; the intervals extended ahead; no interval known is closed; `next_due_s` counts a
closed row as due at its window's opening."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import psycopg
import pytest

from sender import Ledger
from sender.campaigns.spec import load_campaign
from sender.ledger import window_intervals
from sender.ledger.campaigns import Campaigns
from tests.sender.sequences import start_campaign
from tests.support.clock import FakeClock

BERLIN = ZoneInfo("Europe/Berlin")
MONDAY_7 = datetime(2026, 12, 7, 7, 0, tzinfo=BERLIN)  # a Monday morning, before the window opens
CAMPAIGN = """\
name: {name}
group: sales
steps:
  - subject: "Hello"
    body: "Hi"
timezone: Europe/Berlin
"""
WEEKDAYS = 'window: {days: [mon, tue, wed, thu, fri], hours: ["09:00-17:00"]}\n'
# every day; across a DST change its real length changes
NIGHT = 'window: {days: [mon, tue, wed, thu, fri, sat, sun], hours: ["01:30-03:30"]}\n'


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(MONDAY_7.timestamp())


def at(clock: FakeClock, when: datetime) -> None:
    clock.now_s = when.timestamp()


def campaign(tmp_path: Path, ledger: Ledger, leads: str, *, name: str = "q1", pacing: str = WEEKDAYS) -> None:
    start_campaign(tmp_path, ledger, name, CAMPAIGN.format(name=name) + pacing, leads)


def claimable(ledger: Ledger) -> list[str]:
    """The recipients the claim takes now, each given back at once (the next look sees them again)."""
    taken = []
    while rows := ledger.claim("w"):
        taken.append(rows[0])
    for row in taken:
        assert ledger.unclaim(row.id)
    return sorted(row.address for row in taken)


def test_a_closed_row_is_not_claimed_and_is_claimed_once_its_window_opens(
        tmp_path: Path, timed: Ledger, clock: FakeClock) -> None:
    campaign(tmp_path, timed, "a@lead.example,\n")
    assert claimable(timed) == []  # 07:00 in Berlin
    at(clock, datetime(2026, 12, 7, 8, 59, 59, tzinfo=BERLIN))
    assert claimable(timed) == []
    at(clock, datetime(2026, 12, 7, 9, 0, tzinfo=BERLIN))
    assert claimable(timed) == ["a@lead.example"]
    at(clock, datetime(2026, 12, 7, 17, 0, tzinfo=BERLIN))  # the range's end is not in it
    assert claimable(timed) == []
    at(clock, datetime(2026, 12, 12, 10, 0, tzinfo=BERLIN))  # Saturday
    assert claimable(timed) == []


def test_each_lead_is_read_on_its_own_zone_and_an_enqueued_row_has_no_window(
        tmp_path: Path, timed: Ledger, clock: FakeClock) -> None:
    campaign(tmp_path, timed, "b@lead.example,\nn@lead.example,America/New_York\nm@lead.example,Mars/Olympus\n")
    timed.enqueue(lead="e-1", step=1, address="e@lead.example", group="sales", subject="Hi", text="Hello")
    at(clock, datetime(2026, 12, 7, 10, 0, tzinfo=BERLIN))  # 04:00 in New York; a zone that is none: Berlin's
    assert claimable(timed) == ["b@lead.example", "e@lead.example", "m@lead.example"]
    at(clock, datetime(2026, 12, 7, 18, 0, tzinfo=BERLIN))  # 12:00 in New York
    assert claimable(timed) == ["e@lead.example", "n@lead.example"]


def test_a_campaign_without_a_window_is_always_open(tmp_path: Path, timed: Ledger, clock: FakeClock) -> None:
    campaign(tmp_path, timed, "a@lead.example,\n", pacing="")
    at(clock, datetime(2026, 12, 12, 3, 0, tzinfo=BERLIN))  # a Saturday night
    assert claimable(timed) == ["a@lead.example"]


def test_spring_forward_opens_one_real_hour_through_the_claim(tmp_path: Path, timed: Ledger,
                                                               clock: FakeClock) -> None:
    # Sunday 29 March 2026: 02:00 CET becomes 03:00 CEST (01:00 UTC); 01:30-03:30 is open 00:30-01:30 UTC
    at(clock, datetime(2026, 3, 28, 12, 0, tzinfo=UTC))
    campaign(tmp_path, timed, "a@lead.example,\n", pacing=NIGHT)
    for when, open_ in [(datetime(2026, 3, 29, 0, 29, tzinfo=UTC), False),
                        (datetime(2026, 3, 29, 0, 30, tzinfo=UTC), True),  # 01:30 CET
                        (datetime(2026, 3, 29, 1, 10, tzinfo=UTC), True),  # 03:10 CEST
                        (datetime(2026, 3, 29, 1, 30, tzinfo=UTC), False),  # 03:30 CEST
                        (datetime(2026, 3, 29, 23, 30, tzinfo=UTC), True)]:  # Monday 01:30 CEST
        at(clock, when)
        assert claimable(timed) == (["a@lead.example"] if open_ else []), when


def test_fall_back_opens_three_real_hours_through_the_claim(tmp_path: Path, timed: Ledger, clock: FakeClock) -> None:
    # Sunday 25 October 2026: 03:00 CEST becomes 02:00 CET (01:00 UTC); 01:30-03:30 is open 23:30-02:30 UTC
    at(clock, datetime(2026, 10, 24, 12, 0, tzinfo=UTC))
    campaign(tmp_path, timed, "a@lead.example,\n", pacing=NIGHT)
    for when, open_ in [(datetime(2026, 10, 24, 23, 29, tzinfo=UTC), False),
                        (datetime(2026, 10, 24, 23, 30, tzinfo=UTC), True),  # 01:30 CEST
                        (datetime(2026, 10, 25, 0, 45, tzinfo=UTC), True),  # 02:45 CEST, the first reading
                        (datetime(2026, 10, 25, 1, 15, tzinfo=UTC), True),  # 02:15 CET, the second
                        (datetime(2026, 10, 25, 2, 29, tzinfo=UTC), True),  # 03:29 CET
                        (datetime(2026, 10, 25, 2, 30, tzinfo=UTC), False)]:
        at(clock, when)
        assert claimable(timed) == (["a@lead.example"] if open_ else []), when


def test_the_sweep_cycle_extends_the_intervals_before_they_run_out(tmp_path: Path, timed: Ledger,
                                                                    clock: FakeClock) -> None:
    campaign(tmp_path, timed, "a@lead.example,\n")
    assert window_intervals.extend(timed) == 0  # written two weeks ahead when applied: nothing to do
    three_weeks = datetime(2026, 12, 28, 10, 0, tzinfo=BERLIN)  # a Monday inside the window, past the horizon
    at(clock, three_weeks)
    assert claimable(timed) == []  # nothing known this far ahead: closed
    assert window_intervals.extend(timed) == 1
    assert claimable(timed) == ["a@lead.example"]
    with psycopg.connect(timed.url or "") as conn:
        (until,) = conn.execute("SELECT known_until FROM sender_window_horizons").fetchone() or (None,)
    assert until == three_weeks + window_intervals.HORIZON
    at(clock, three_weeks + timedelta(days=1))
    assert window_intervals.extend(timed) == 0  # still 13 days ahead and more
    at(clock, three_weeks + timedelta(days=1, seconds=1))
    assert window_intervals.extend(timed) == 1


def test_without_intervals_the_row_is_not_claimed(tmp_path: Path, timed: Ledger, clock: FakeClock) -> None:
    campaign(tmp_path, timed, "a@lead.example,\n")
    at(clock, datetime(2026, 12, 7, 10, 0, tzinfo=BERLIN))
    with psycopg.connect(timed.url or "", autocommit=True) as conn:
        conn.execute("DELETE FROM sender_window_intervals")
        assert claimable(timed) == []  # fail closed: nothing known
        # a file that no longer parses (as a newer sendhost might read it): the sweep cycle writes no interval
        conn.execute("UPDATE sender_campaigns SET source = 'name: q1\nsteps: []\n' WHERE name = 'q1'")
    assert window_intervals.extend(timed) == 1
    assert claimable(timed) == []
    assert window_intervals.extend(timed) == 0  # marked as read: not parsed again at each cycle


def test_next_due_counts_a_closed_row_at_its_windows_opening(tmp_path: Path, timed: Ledger,
                                                             clock: FakeClock) -> None:
    campaign(tmp_path, timed, "a@lead.example,\nn@lead.example,America/New_York\n")
    assert timed.next_due_s() == pytest.approx(2 * 3600)  # 07:00: Berlin's window opens at 09:00
    at(clock, datetime(2026, 12, 7, 17, 30, tzinfo=BERLIN))
    assert timed.next_due_s() == pytest.approx(0)  # 11:30 in New York: open, due now
    timed.claim("w")  # the New York lead's row goes
    assert timed.next_due_s() == pytest.approx(15.5 * 3600)  # the Berlin lead: Tuesday 09:00
    timed.enqueue(lead="e-1", step=1, address="e@lead.example", group="sales", subject="Hi", text="Hello")
    assert timed.next_due_s() == pytest.approx(0)  # `enqueue` has no window


def test_a_new_file_rewrites_the_intervals(tmp_path: Path, timed: Ledger, clock: FakeClock) -> None:
    campaign(tmp_path, timed, "a@lead.example,\n")
    at(clock, datetime(2026, 12, 12, 10, 0, tzinfo=BERLIN))  # Saturday
    assert claimable(timed) == []
    path = tmp_path / "q1.yml"
    path.write_text(CAMPAIGN.format(name="q1") + 'window: {days: [sat], hours: ["09:00-17:00"]}\n')
    Campaigns(timed).apply(load_campaign(path, {"sales"}), path.read_text())
    assert claimable(timed) == ["a@lead.example"]


def test_the_sweep_cycle_moves_a_closed_row_to_its_windows_opening(tmp_path: Path, timed: Ledger,
                                                                   clock: FakeClock) -> None:
    campaign(tmp_path, timed, "a@lead.example,\nn@lead.example,America/New_York\n")
    at(clock, datetime(2026, 12, 7, 10, 0, tzinfo=BERLIN))  # open in Berlin, 04:00 in New York
    assert window_intervals.sweep(timed) == (0, 1)  # the New York lead's row only
    with psycopg.connect(timed.url or "") as conn:
        held = dict(conn.execute("SELECT address, not_before FROM sender_emails").fetchall())
        (events,) = conn.execute("SELECT count(*) FROM sender_events WHERE kind = 'unclaimed'").fetchone() or (0,)
    assert held["n@lead.example"] == datetime(2026, 12, 7, 9, 0, tzinfo=ZoneInfo("America/New_York"))
    assert held["a@lead.example"] == MONDAY_7  # open now: left as it was
    assert events == 0  # never claimed: nothing to tell in its history
    assert window_intervals.defer(timed) == 0  # held past now: not moved again
    assert claimable(timed) == ["a@lead.example"]
    at(clock, datetime(2026, 12, 7, 9, 0, tzinfo=ZoneInfo("America/New_York")))
    assert claimable(timed) == ["a@lead.example", "n@lead.example"]
