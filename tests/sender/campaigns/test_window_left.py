"""The open time left in a window today (Schedule.open_seconds_left), what the guard spreads a mailbox's sends over:
plain days, a midday gap, closed days, and both DST changes, checked against `is_open` minute by minute."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sender.campaigns.pacing import HourRange
from sender.campaigns.window import Schedule

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")
WEEKDAYS = Schedule((0, 1, 2, 3, 4), (HourRange(540, 720), HourRange(780, 1020)))  # 09-12, 13-17
NIGHT = Schedule(tuple(range(7)), (HourRange(90, 210),))  # 01:30-03:30 every day
ENDS_IN_REPEAT = Schedule(tuple(range(7)), (HourRange(60, 150),))  # 01:00-02:30: in the repeated hour in October


def at(tz: ZoneInfo, *parts: int) -> datetime:
    return datetime(*parts, tzinfo=tz)  # type: ignore[arg-type,misc]


def counted(schedule: Schedule, instant: datetime, tz: ZoneInfo) -> float:
    """`is_open` minute by minute from `instant` (on a whole minute) to the end of its local day."""
    day = instant.astimezone(tz).date()
    minutes, t = 0, instant.astimezone(UTC)
    while t.astimezone(tz).date() == day:
        minutes += schedule.is_open(t, tz)
        t += timedelta(minutes=1)
    return minutes * 60.0


def test_a_plain_day_with_a_midday_gap() -> None:
    assert WEEKDAYS.open_seconds_left(at(BERLIN, 2026, 12, 2, 9, 0), BERLIN) == 7 * 3600
    assert WEEKDAYS.open_seconds_left(at(BERLIN, 2026, 12, 2, 11, 30), BERLIN) == 4.5 * 3600
    assert WEEKDAYS.open_seconds_left(at(BERLIN, 2026, 12, 2, 12, 30), BERLIN) == 4 * 3600  # in the gap
    assert WEEKDAYS.open_seconds_left(at(BERLIN, 2026, 12, 2, 17, 0), BERLIN) == 0
    assert WEEKDAYS.open_seconds_left(at(BERLIN, 2026, 12, 5, 10, 0), BERLIN) == 0  # Saturday
    # read on the zone given: 10:00 in Berlin is 04:00 in New York, before its day's window
    assert WEEKDAYS.open_seconds_left(at(BERLIN, 2026, 12, 2, 10, 0), NEW_YORK) == 7 * 3600


def test_a_skip_date_has_no_time_left() -> None:
    schedule = Schedule(WEEKDAYS.days, WEEKDAYS.hours, frozenset({at(BERLIN, 2026, 12, 24).date()}))
    assert schedule.open_seconds_left(at(BERLIN, 2026, 12, 24, 9, 0), BERLIN) == 0


@pytest.mark.parametrize(("schedule", "day", "hours"), [
    (NIGHT, (2026, 3, 29), 1), (NIGHT, (2026, 10, 25), 3),  # spring forward: one real hour; fall back: three
    (ENDS_IN_REPEAT, (2026, 10, 25), 2),  # 01:00-02:30 summer time, then 02:00-02:30 winter time again
    (Schedule(tuple(range(7)), (HourRange(130, 170),)), (2026, 3, 29), 0),  # 02:10-02:50: inside the gap
])
def test_dst_days_count_the_real_time_is_open_does(schedule: Schedule, day: tuple[int, int, int],
                                                  hours: float) -> None:
    midnight = at(BERLIN, *day)
    assert schedule.open_seconds_left(midnight, BERLIN) == hours * 3600 == counted(schedule, midnight, BERLIN)


@settings(max_examples=60, deadline=None)
@given(minute=st.integers(0, 3 * 24 * 60 - 1),
       start=st.sampled_from([datetime(2026, 3, 28, tzinfo=UTC), datetime(2026, 10, 24, tzinfo=UTC),
                              datetime(2026, 12, 1, tzinfo=UTC)]),
       schedule=st.sampled_from([WEEKDAYS, NIGHT, ENDS_IN_REPEAT]), tz=st.sampled_from([BERLIN, NEW_YORK]))
def test_the_time_left_is_what_is_open_says_minute_by_minute(minute: int, start: datetime, schedule: Schedule,
                                                             tz: ZoneInfo) -> None:
    instant = start + timedelta(minutes=minute)
    assert schedule.open_seconds_left(instant, tz) == counted(schedule, instant, tz)
