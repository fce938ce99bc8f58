"""The window arithmetic (sender/campaigns/window.py): open or not, the next opening, DST days, skip dates."""

from __future__ import annotations

import itertools
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from hypothesis import given, settings
from hypothesis import strategies as st

from sender.campaigns.pacing import HourRange, Pacing, Window
from sender.campaigns.window import Schedule, zone

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")
WEEKDAYS = Schedule((0, 1, 2, 3, 4), (HourRange(540, 720), HourRange(780, 1020)))  # 09-12, 13-17
NIGHT = Schedule(tuple(range(7)), (HourRange(90, 210),))  # 01:30-03:30 every day


def at(tz: ZoneInfo, *parts: int, fold: int = 0) -> datetime:
    return datetime(*parts, tzinfo=tz).replace(fold=fold)  # type: ignore[arg-type,misc]


def local(instant: datetime | None, tz: ZoneInfo) -> str:
    assert instant is not None
    return instant.astimezone(tz).isoformat()


def test_open_inside_a_range_and_closed_between_ranges_and_at_the_end() -> None:
    assert WEEKDAYS.is_open(at(BERLIN, 2026, 12, 2, 9, 0), BERLIN)  # a Wednesday
    assert not WEEKDAYS.is_open(at(BERLIN, 2026, 12, 2, 12, 30), BERLIN)
    assert not WEEKDAYS.is_open(at(BERLIN, 2026, 12, 2, 17, 0), BERLIN)  # the end is excluded
    assert not WEEKDAYS.is_open(at(BERLIN, 2026, 12, 5, 10, 0), BERLIN)  # Saturday


def test_the_window_is_read_in_the_time_zone_given() -> None:
    instant = at(BERLIN, 2026, 12, 2, 10, 0)  # 04:00 in New York
    assert WEEKDAYS.is_open(instant, BERLIN)
    assert not WEEKDAYS.is_open(instant, NEW_YORK)
    assert local(WEEKDAYS.next_opening(instant, NEW_YORK), NEW_YORK) == "2026-12-02T09:00:00-05:00"


def test_an_open_instant_is_its_own_next_opening() -> None:
    instant = at(BERLIN, 2026, 12, 2, 10, 15, 30)
    assert WEEKDAYS.next_opening(instant, BERLIN) == instant


def test_the_next_opening_is_the_next_range_of_the_day() -> None:
    assert local(WEEKDAYS.next_opening(at(BERLIN, 2026, 12, 2, 12, 0), BERLIN), BERLIN) == "2026-12-02T13:00:00+01:00"


def test_friday_evening_opens_on_monday_morning() -> None:
    assert local(WEEKDAYS.next_opening(at(BERLIN, 2026, 12, 4, 18, 0), BERLIN), BERLIN) == "2026-12-07T09:00:00+01:00"


def test_skip_dates_are_passed_over() -> None:
    schedule = Schedule(WEEKDAYS.days, WEEKDAYS.hours, frozenset({date(2026, 12, 24), date(2026, 12, 25)}))
    assert not schedule.is_open(at(BERLIN, 2026, 12, 24, 10, 0), BERLIN)
    assert local(schedule.next_opening(at(BERLIN, 2026, 12, 23, 17, 0), BERLIN), BERLIN) == "2026-12-28T09:00:00+01:00"


def test_a_skip_date_without_a_window_closes_only_that_day() -> None:
    schedule = Schedule.of(Pacing(skip_dates=(date(2026, 12, 25),)))
    assert schedule is not None
    assert not schedule.is_open(at(BERLIN, 2026, 12, 25, 23, 59), BERLIN)
    assert local(schedule.next_opening(at(BERLIN, 2026, 12, 25, 3, 0), BERLIN), BERLIN) == "2026-12-26T00:00:00+01:00"


def test_no_window_and_no_skip_dates_is_no_schedule() -> None:
    assert Schedule.of(Pacing()) is None
    window = Window((0,), (HourRange(60, 120),))
    assert Schedule.of(Pacing(window=window)) == Schedule((0,), (HourRange(60, 120),))


def test_a_range_to_midnight_runs_into_the_next_days_range_from_midnight() -> None:
    schedule = Schedule((0, 1), (HourRange(0, 60), HourRange(1380, 1440)))
    assert schedule.is_open(at(BERLIN, 2026, 11, 30, 23, 59, 59), BERLIN)  # Monday 23:59:59
    assert schedule.is_open(at(BERLIN, 2026, 12, 1, 0, 0), BERLIN)
    assert local(schedule.next_opening(at(BERLIN, 2026, 12, 1, 1, 0), BERLIN), BERLIN) == "2026-12-01T23:00:00+01:00"


# --- DST: Europe/Berlin springs forward on 2026-03-29 (02:00 -> 03:00), falls back on 2026-10-25 (03:00 -> 02:00) ---

def test_spring_forward_a_night_window_is_open_one_real_hour() -> None:
    start = at(BERLIN, 2026, 3, 29, 0, 0).astimezone(UTC)  # arithmetic on real time, not the wall clock
    minutes = [start + timedelta(minutes=m) for m in range(6 * 60)]
    opened = [m for m in minutes if NIGHT.is_open(m, BERLIN)]
    assert len(opened) == 60
    assert local(opened[0], BERLIN) == "2026-03-29T01:30:00+01:00"
    assert local(opened[-1], BERLIN) == "2026-03-29T03:29:00+02:00"


def test_spring_forward_the_window_reopens_at_the_jump_when_its_start_is_in_the_gap() -> None:
    schedule = Schedule(tuple(range(7)), (HourRange(150, 240),))  # 02:30-04:00: 02:30 does not exist that day
    opening = schedule.next_opening(at(BERLIN, 2026, 3, 29, 1, 0), BERLIN)
    assert local(opening, BERLIN) == "2026-03-29T03:00:00+02:00"


def test_spring_forward_a_range_inside_the_gap_does_not_open_that_day() -> None:
    schedule = Schedule(tuple(range(7)), (HourRange(130, 170),))  # 02:10-02:50
    assert local(schedule.next_opening(at(BERLIN, 2026, 3, 29, 0, 0), BERLIN), BERLIN) == "2026-03-30T02:10:00+02:00"


def test_fall_back_a_night_window_is_open_three_real_hours_and_reopens_at_the_repeat() -> None:
    start = at(BERLIN, 2026, 10, 25, 0, 0).astimezone(UTC)
    minutes = [start + timedelta(minutes=m) for m in range(6 * 60)]
    assert sum(NIGHT.is_open(m, BERLIN) for m in minutes) == 180
    # a range ending inside the repeated hour closes at 02:30 summer time and opens again at 02:00 winter time
    schedule = Schedule(tuple(range(7)), (HourRange(60, 150),))  # 01:00-02:30
    opening = schedule.next_opening(at(BERLIN, 2026, 10, 25, 2, 45), BERLIN)
    assert local(opening, BERLIN) == "2026-10-25T02:00:00+01:00"


def test_a_leads_own_time_zone_wins_when_it_is_valid() -> None:
    assert zone("America/New_York", "Europe/Berlin") == NEW_YORK
    assert zone("Mars/Olympus", "Europe/Berlin") == BERLIN
    assert zone(None, "Europe/Berlin") == BERLIN


# --- properties ---------------------------------------------------------------------------------------------------

ZONES = st.sampled_from(["Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata", "UTC",
                         "America/Sao_Paulo", "Pacific/Chatham"])
INSTANTS = st.integers(int(datetime(2020, 1, 1, tzinfo=UTC).timestamp()),
                       int(datetime(2030, 1, 1, tzinfo=UTC).timestamp())).map(lambda s: datetime.fromtimestamp(s, UTC))


@st.composite
def schedules(draw: st.DrawFn) -> Schedule:
    days = draw(st.lists(st.integers(0, 6), min_size=1, max_size=7, unique=True))
    cuts = sorted(draw(st.lists(st.integers(0, 1440), min_size=2, max_size=8, unique=True)))
    pairs = [HourRange(a, b) for a, b in zip(cuts[::2], cuts[1::2], strict=False)]
    skips = draw(st.lists(st.dates(date(2019, 12, 25), date(2030, 1, 10)), max_size=5))
    return Schedule(tuple(sorted(days)), tuple(pairs), frozenset(skips))


@settings(max_examples=100, deadline=None)
@given(schedules(), INSTANTS, ZONES)
def test_the_next_opening_is_open_and_nothing_before_it_is(schedule: Schedule, instant: datetime, name: str) -> None:
    tz = ZoneInfo(name)
    opening = schedule.next_opening(instant, tz)
    assert opening is not None and opening >= instant
    assert schedule.is_open(opening, tz)
    # nothing between: ranges start on whole local minutes and these zones' offsets are whole minutes, so every
    # stretch that opens in between contains a whole UTC minute
    assert opening == instant or not schedule.is_open(instant, tz)
    probe = instant.replace(second=0) + timedelta(minutes=1)
    while probe < opening:
        assert not schedule.is_open(probe, tz), probe
        probe += timedelta(minutes=1)
    assert opening == instant or not schedule.is_open(opening - timedelta(seconds=1), tz)


def test_the_open_intervals_across_each_dst_change_are_as_documented() -> None:
    # spring forward (29 March 2026): 01:30-03:30 is one real hour; fall back (25 October): three
    spring = NIGHT.open_intervals(datetime(2026, 3, 29, tzinfo=UTC), datetime(2026, 3, 29, 12, tzinfo=UTC), BERLIN)
    assert spring == [(datetime(2026, 3, 29, 0, 30, tzinfo=UTC), datetime(2026, 3, 29, 1, 30, tzinfo=UTC))]
    fall = NIGHT.open_intervals(datetime(2026, 10, 24, 12, tzinfo=UTC), datetime(2026, 10, 25, 12, tzinfo=UTC),
                                BERLIN)
    assert fall == [(datetime(2026, 10, 24, 23, 30, tzinfo=UTC), datetime(2026, 10, 25, 2, 30, tzinfo=UTC))]


def test_a_range_ending_in_the_spring_gap_closes_when_the_clock_jumps_past_it() -> None:
    # 01:30-02:30 on 29 March 2026: 02:30 never happens; at 03:00 CEST (01:00 UTC) the clock is past the range
    ends_in_gap = Schedule(tuple(range(7)), (HourRange(90, 150),))
    found = ends_in_gap.open_intervals(datetime(2026, 3, 29, tzinfo=UTC), datetime(2026, 3, 29, 12, tzinfo=UTC),
                                       BERLIN)
    assert found == [(datetime(2026, 3, 29, 0, 30, tzinfo=UTC), datetime(2026, 3, 29, 1, 0, tzinfo=UTC))]


@settings(max_examples=30, deadline=None)
@given(st.datetimes(min_value=datetime(2026, 1, 1), max_value=datetime(2027, 12, 31)),
       st.sampled_from([WEEKDAYS, NIGHT, Schedule(skip_dates=frozenset({date(2026, 12, 24)}))]),
       st.sampled_from([BERLIN, NEW_YORK, ZoneInfo("Asia/Kolkata")]))
def test_the_open_intervals_are_exactly_where_is_open_says(start: datetime, schedule: Schedule,
                                                            tz: ZoneInfo) -> None:
    start = start.replace(tzinfo=UTC)
    until = start + timedelta(days=9)
    found = schedule.open_intervals(start, until, tz)
    assert all(a[1] < b[0] for a, b in itertools.pairwise(found))  # in order, none touching
    probe = start
    while probe < until:  # every 7 minutes, and each interval's edges
        inside = any(opens <= probe < closes for opens, closes in found)
        assert inside == schedule.is_open(probe, tz), probe
        probe += timedelta(minutes=7)
    for opens, closes in found:
        assert schedule.is_open(opens, tz) and schedule.is_open(closes - timedelta(seconds=1), tz)
        assert closes == until or not schedule.is_open(closes, tz)
