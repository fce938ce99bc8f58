"""Issue 25's must-hold on a simulated clock: 14 days of the pacing scenario (simulation.pacing), the real sender
agent sending for two campaigns held to a Monday-to-Friday 09:00-17:00 window in each lead's own time zone
(Europe/Berlin, America/New_York) and a daily cap, across both zones' autumn DST changes.

Each check reads the run's event log and reads the window, the days and the hours itself, with zoneinfo, not with
the code under test (sender.campaigns.window)."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from simulation import SimResult, run_simulation
from simulation.campaign import campaign_name
from simulation.events import Send
from simulation.pacing import (
    CAMPAIGN_TIMEZONE,
    DAILY_CAP,
    START,
    WINDOW_DAYS,
    WINDOW_HOURS,
    ZONES,
    pacing_config,
    pacing_inventory,
)
from simulation.report_html import render_report
from simulation.summary import summarize
from tests.support.chromium import chromium_or_skip, console_messages, run_chromium
from toolkit.cli.simulate import example_inventory, to_sim_inventory
from toolkit.inventory import load_inventory

pytestmark = [pytest.mark.slow, pytest.mark.service]

SPREAD_CAP = 8  # the spread is asked of mailboxes whose day's cap is at least this
HOURS_IN_WINDOW = WINDOW_HOURS[1] - WINDOW_HOURS[0]
DST_CHANGES = {"Europe/Berlin": date(2026, 10, 25), "America/New_York": date(2026, 11, 1)}


@pytest.fixture(scope="module")
def paced() -> SimResult:
    inventory = pacing_inventory(to_sim_inventory(load_inventory(example_inventory())))
    return run_simulation(inventory, pacing_config(seed=1))


def _local(send: Send, zone: str) -> datetime:
    return datetime.fromtimestamp(send.at, UTC).astimezone(ZoneInfo(zone))


def _zone_of_mailbox(result: SimResult) -> dict[str, str]:
    return {m.address.lower(): m.timezone for m in result.inventory.mailboxes}


def _weekdays(result: SimResult, zone: str) -> list[date]:
    """The weekdays whose whole window lies inside the run, read on `zone`'s clock."""
    days = []
    for offset in range(-1, result.config.days + 1):
        day = START + timedelta(days=offset)
        opens = datetime(day.year, day.month, day.day, WINDOW_HOURS[0], tzinfo=ZoneInfo(zone))
        closes = datetime(day.year, day.month, day.day, WINDOW_HOURS[1], tzinfo=ZoneInfo(zone))
        if day.weekday() in WINDOW_DAYS and opens.timestamp() >= result.start_s and closes.timestamp() <= result.end_s:
            days.append(day)
    return days


def test_the_run_is_the_scenario_it_claims(paced: SimResult) -> None:
    # Both campaigns sent, each to leads of its own zone, on 10 weekdays; each zone's DST change fell inside the
    # run with weekdays on both sides of it (both UTC offsets seen in its sends).
    zones = _zone_of_mailbox(paced)
    assert {paced.lead_timezones[s.address or ""] for s in paced.log.sends} == set(ZONES.values())
    for zone, change in DST_CHANGES.items():
        assert len(_weekdays(paced, zone)) == 10
        sends = [_local(s, zone) for s in paced.log.sends if zones[s.mailbox] == zone]
        before = {when.utcoffset() for when in sends if when.date() < change}
        after = {when.utcoffset() for when in sends if when.date() > change}
        assert len(before) == len(after) == 1 and before != after, (zone, before, after)
    assert all(s.cap >= SPREAD_CAP for s in paced.log.sends)


def test_nothing_is_handed_over_outside_a_leads_window(paced: SimResult) -> None:
    outside = []
    for send in paced.log.sends:
        zone = paced.lead_timezones[send.address or ""]
        local = _local(send, zone)
        if local.weekday() not in WINDOW_DAYS or not WINDOW_HOURS[0] <= local.hour < WINDOW_HOURS[1]:
            outside.append((send.address, local.isoformat()))
    assert outside == []
    # and the server received exactly what the log says was sent (the log is the server's record, in order)
    assert [d.message_id for d in paced.delivered] == [s.message_id for s in paced.log.sends]


def test_each_campaigns_daily_cap_is_exact(paced: SimResult) -> None:
    group_of = {m.address.lower(): m.group for m in paced.inventory.mailboxes}
    per_day = Counter((campaign_name(group_of[s.mailbox]), _local(s, CAMPAIGN_TIMEZONE).date())
                      for s in paced.log.sends)
    over = {key: count for key, count in per_day.items() if count > DAILY_CAP}
    assert over == {}
    for group, zone in ZONES.items():
        short = {day: per_day[(campaign_name(group), day)] for day in _weekdays(paced, zone)
                 if per_day[(campaign_name(group), day)] != DAILY_CAP}
        assert short == {}, f"{campaign_name(group)}: days under its cap of {DAILY_CAP}"
    # Every weekday had more due than the cap: first steps of the list imported at the start were still queued at
    # the end, so they were due (and waiting) on every day of the run.
    queued = Counter(row.campaign for row in paced.sequences if row.step == 1 and row.status == "queued")
    assert set(queued) == {campaign_name(group) for group in ZONES} and min(queued.values()) > 0


def test_each_mailboxs_day_is_spread_over_its_window(paced: SimResult) -> None:
    zones = _zone_of_mailbox(paced)
    days: dict[tuple[str, str], list[Send]] = defaultdict(list)
    for send in paced.log.sends:
        days[(send.mailbox, send.local_day)].append(send)
    bunched = {}
    for (mailbox, day), sends in sorted(days.items()):
        if max(s.cap for s in sends) < SPREAD_CAP:
            continue
        per_hour = Counter(_local(s, zones[mailbox]).hour for s in sends)
        if max(per_hour.values()) * 4 > len(sends):
            bunched[(mailbox, day)] = (len(sends), dict(sorted(per_hour.items())))
    assert bunched == {}, f"more than a quarter of a day's sends in one hour of its {HOURS_IN_WINDOW}-hour window"
    # The bound bites: every mailbox sent at least SPREAD_CAP on every weekday of its zone.
    for mailbox, zone in zones.items():
        counts = {day: len(days.get((mailbox, day.isoformat()), [])) for day in _weekdays(paced, zone)}
        assert min(counts.values()) >= SPREAD_CAP, (mailbox, counts)


def test_the_report_shows_each_mailboxs_hours_and_its_window(paced: SimResult, tmp_path: Path) -> None:
    path = tmp_path / "pacing.html"
    path.write_text(render_report(paced, summarize(paced)), encoding="utf-8")
    run = run_chromium(chromium_or_skip(), path, tmp_path / "profile", "--dump-dom")
    assert run.returncode == 0, run.stderr[-2000:]
    assert console_messages(run.stderr) == []
    found = re.search(r'<figure class="chart" id="chart-hours">(.*?)</figure>', run.stdout, re.S)
    assert found
    strip = found[1]
    # Each mailbox's row marks its campaign's window, 09:00-17:00 (in minutes of the day) ...
    marks = re.findall(r'<rect class="window" data-mailbox="([^"]+)" data-start="(\d+)" data-end="(\d+)"', strip)
    hours = (WINDOW_HOURS[0] * 60, WINDOW_HOURS[1] * 60)
    assert sorted(marks) == sorted((m.address.lower(), *map(str, hours)) for m in paced.inventory.mailboxes)
    # ... and its cells hold its sends by hour of its own clock: inside the window only, from its first hour on, over
    # at least six of its eight (the campaign's cap, below its mailboxes' caps together, ends the day before 16:00)
    cells = re.findall(r'<rect class="hour" data-mailbox="([^"]+)" data-hour="(\d+)" data-sends="(\d+)"', strip)
    zones = _zone_of_mailbox(paced)
    expected = Counter((s.mailbox, _local(s, zones[s.mailbox]).hour) for s in paced.log.sends)
    assert {(address, int(hour)): int(sent) for address, hour, sent in cells if int(sent)} == dict(expected)
    for mailbox in paced.inventory.mailboxes:
        lit = {int(hour) for address, hour, sent in cells if address == mailbox.address.lower() and int(sent)}
        assert WINDOW_HOURS[0] in lit and lit <= set(range(*WINDOW_HOURS)) and len(lit) >= 6, (mailbox.address, lit)
