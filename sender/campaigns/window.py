"""A campaign's sending window as arithmetic on instants: is it open now, and when does it next open.

The window is read on the local wall clock of the time zone given (the lead's, else the campaign's): an instant is
inside when its local date is not a skip date, its local weekday is a window day, and its local time of day lies in
one of the day's ranges (start included, end excluded). Across a DST change this means (docs/campaigns.md):
- spring forward (Europe/Berlin, 02:00 becomes 03:00): local times in the gap never happen, so a range 01:30-03:30
  is open 01:30-02:00 and 03:00-03:30, one real hour; a range entirely inside the gap does not open that day.
- fall back (03:00 becomes 02:00): local times 02:00-03:00 happen twice and are open both times, so a range
  01:30-03:30 is open three real hours.
Every offset comes from zoneinfo; nothing here knows a time zone's rules.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from sender.campaigns.pacing import DAYS, HourRange, Pacing, valid_timezone

_ALL_DAY = (HourRange(0, 1440),)
_DAY_S = 86400


@dataclass(frozen=True)
class Schedule:
    """When a campaign may hand mail over, in local time: weekdays (0 = Monday), the day's ranges, dates skipped."""

    days: tuple[int, ...] = tuple(range(len(DAYS)))
    hours: tuple[HourRange, ...] = _ALL_DAY
    skip_dates: frozenset[date] = frozenset()

    @classmethod
    def of(cls, pacing: Pacing) -> Schedule | None:
        """The schedule of a campaign's pacing keys; None when it has no window and no skip dates (always open)."""
        if pacing.window is None and not pacing.skip_dates:
            return None
        if pacing.window is None:
            return cls(skip_dates=frozenset(pacing.skip_dates))
        return cls(pacing.window.days, pacing.window.hours, frozenset(pacing.skip_dates))

    def is_open(self, instant: datetime, tz: ZoneInfo) -> bool:
        """Whether `instant` (aware) is inside the window on the wall clock of `tz`."""
        local = instant.astimezone(tz)
        if local.date() in self.skip_dates or local.weekday() not in self.days:
            return False
        seconds = local.hour * 3600 + local.minute * 60 + local.second + local.microsecond / 1e6
        return any(r.start * 60 <= seconds < r.end * 60 for r in self.hours)

    def next_opening(self, instant: datetime, tz: ZoneInfo) -> datetime | None:
        """The first instant at or after `instant` inside the window (`instant` itself when open), in UTC; None
        when the window never opens again (every range of every day inside a DST gap: not a real campaign)."""
        if self.is_open(instant, tz):
            return instant.astimezone(UTC)
        first = instant.astimezone(tz).date() - timedelta(days=1)
        # A closed stretch lasts at most a week plus the skip dates; a day more covers a range that ends in a gap.
        horizon = len(DAYS) + len(self.skip_dates) + 3
        best: datetime | None = None
        for offset in range(horizon):
            day = first + timedelta(days=offset)
            # An opening found on a later day comes after that day's local midnight (a DST change just before it
            # is also an opening of the day it falls in, looked at already): none can beat `best` from here on.
            if best is not None and _midnight(day, tz) >= best:
                return best
            for candidate in _openings(self, day, tz):
                if candidate > instant and (best is None or candidate < best) and self.is_open(candidate, tz):
                    best = candidate
        return best

    def closes(self, instant: datetime, tz: ZoneInfo) -> datetime | None:
        """When the window open at `instant` next closes (its range's end on `tz`'s wall clock, a range ending at
        24:00 running into the next day's from 00:00), in UTC; None when it is closed at `instant`."""
        if not self.is_open(instant, tz):
            return None
        end = instant
        for _ in range(len(DAYS) + len(self.skip_dates) + 2):  # an always-open week ends at its first skip date
            local = end.astimezone(tz)
            minutes = local.hour * 60 + local.minute + (local.second + local.microsecond / 1e6) / 60
            hour_range = next(r for r in self.hours if r.start <= minutes < r.end)
            if hour_range.end < 1440:
                wall = datetime.combine(local.date(), time(hour_range.end // 60, hour_range.end % 60), tzinfo=tz)
                return wall.astimezone(UTC)
            end = _midnight(local.date() + timedelta(days=1), tz)
            if not self.is_open(end, tz):
                return end
        return None  # open all week: it never closes

    def open_intervals(self, start: datetime, until: datetime, tz: ZoneInfo) -> list[tuple[datetime, datetime]]:
        """The instants from `start` to `until` (aware) inside the window, as (opens, closes) in UTC, in order, none
        overlapping or touching (what the ledger's claim reads, sender.ledger.window_intervals). Read by `is_open`
        alone: between two instants at which the answer may change (a range's start or end at each of its local
        readings, a local midnight, a DST change) it cannot, so each piece is open or closed as its first instant."""
        start, until = start.astimezone(UTC), until.astimezone(UTC)
        cuts = {start, until}
        day = start.astimezone(tz).date() - timedelta(days=1)
        while _midnight(day, tz) < until:
            cuts.add(_midnight(day, tz))
            change = _offset_change(day, tz)
            if change is not None:
                cuts.add(change)
            for hour_range in self.hours:
                for minute in (hour_range.start, hour_range.end):
                    if minute >= 1440:
                        continue  # the next day's midnight, a cut already
                    wall = datetime.combine(day, time(minute // 60, minute % 60), tzinfo=tz)
                    cuts.update(wall.replace(fold=fold).astimezone(UTC) for fold in (0, 1))
            day += timedelta(days=1)
        found: list[tuple[datetime, datetime]] = []
        edges = sorted(cut for cut in cuts if start <= cut <= until)
        for low, high in itertools.pairwise(edges):
            if not self.is_open(low, tz):
                continue
            if found and found[-1][1] == low:
                found[-1] = (found[-1][0], high)
            else:
                found.append((low, high))
        return found

    def open_seconds_left(self, instant: datetime, tz: ZoneInfo) -> float:
        """Real seconds from `instant` to the end of its local day on `tz` during which the window is open (what
        the guard spreads a mailbox's remaining sends over), exactly as `is_open` reads the clock across a DST
        change: the day is cut at the change, and within each piece the offset is one, so a range is one interval."""
        local_day = instant.astimezone(tz).date()
        if local_day in self.skip_dates or local_day.weekday() not in self.days:
            return 0.0
        day_start = _midnight(local_day, tz).timestamp()
        day_end = _midnight(local_day + timedelta(days=1), tz).timestamp()
        change = _offset_change(local_day, tz)
        cuts = [day_start, day_end]
        if change is not None and day_start < change.timestamp() < day_end:
            cuts.insert(1, change.timestamp())
        wall_midnight = datetime.combine(local_day, time(), tzinfo=UTC).timestamp()  # the wall clock's 00:00
        now = instant.timestamp()
        left = 0.0
        for low, high in itertools.pairwise(cuts):
            low = max(low, now)
            if high <= low:
                continue
            offset = _offset_s(low, tz)
            for hour_range in self.hours:
                start = wall_midnight + hour_range.start * 60 - offset
                end = wall_midnight + hour_range.end * 60 - offset
                left += max(0.0, min(end, high) - max(start, low))
        return left


def _offset_s(epoch_s: float, tz: ZoneInfo) -> float:
    offset = datetime.fromtimestamp(epoch_s, tz).utcoffset()
    return offset.total_seconds() if offset is not None else 0.0


def _openings(schedule: Schedule, day: date, tz: ZoneInfo) -> Iterator[datetime]:
    """Every instant of `day` at which the window may open: a range's start at each of its local readings (two on a
    fall-back day), and the DST change of the day (the clock may jump into a range, forward or back)."""
    if day in schedule.skip_dates or day.weekday() not in schedule.days:
        return
    for hour_range in schedule.hours:
        if hour_range.start >= 1440:
            continue
        wall = datetime.combine(day, time(hour_range.start // 60, hour_range.start % 60), tzinfo=tz)
        for fold in (0, 1):
            reading = wall.replace(fold=fold)
            utc = reading.astimezone(UTC)
            if utc.astimezone(tz).replace(tzinfo=None) == wall.replace(tzinfo=None):  # not a time in a DST gap
                yield utc
    change = _offset_change(day, tz)
    if change is not None:
        yield change


def _midnight(day: date, tz: ZoneInfo) -> datetime:
    return datetime.combine(day, time(), tzinfo=tz).astimezone(UTC)


def _offset_change(day: date, tz: ZoneInfo) -> datetime | None:
    """The instant `tz`'s UTC offset changes during local `day` (the first, if two), found by bisection on whole
    seconds (zoneinfo has no list of transitions; tzdata's are on whole seconds); None when it does not change."""
    low = int(_midnight(day, tz).timestamp()) - 3 * 3600  # a margin: local midnight may itself sit in a gap
    high = int(_midnight(day + timedelta(days=1), tz).timestamp()) + 3 * 3600
    before = datetime.fromtimestamp(low, tz).utcoffset()
    if datetime.fromtimestamp(high, tz).utcoffset() == before:
        return None
    while high - low > 1:  # invariant: the offset at `low` is `before`, at `high` it is not
        middle = (low + high) // 2
        if datetime.fromtimestamp(middle, tz).utcoffset() == before:
            low = middle
        else:
            high = middle
    return datetime.fromtimestamp(high, UTC)


def zone(name: str | None, fallback: str) -> ZoneInfo:
    """The time zone named `name` (a lead's column), else `fallback` (the campaign's, validated when applied)."""
    return ZoneInfo(name if name and valid_timezone(name) else fallback)
