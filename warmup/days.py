"""Instants and a mailbox's own calendar days; the schedule rows the guard's scripts read."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from warmup.schedule import DayCap, Ramp, plan

# How many days ahead the schedule is written; a reservation past it makes the guard rewrite it.
HORIZON_DAYS = 62


def local_day(now_ms: int, timezone: str) -> date:
    """The calendar day of instant `now_ms` in `timezone`."""
    return datetime.fromtimestamp(now_ms / 1000, ZoneInfo(timezone)).date()


def counts_on(when: datetime, day: date, timezone: str, now_ms: int) -> bool:
    """Does a logged send at `when` count on `day` (a calendar day in `timezone`) as of `now_ms`: on that day, and
    not after now (a log a clock ahead wrote)."""
    return when.timestamp() * 1000 <= now_ms and when.astimezone(ZoneInfo(timezone)).date() == day


def midnight_ms(day: date, timezone: str) -> int:
    """The instant (ms) a calendar day starts in `timezone` (DST-aware)."""
    return int(datetime.combine(day, time(0), ZoneInfo(timezone)).timestamp() * 1000)


def schedule_rows(start: date, today: date, timezone: str, ramp: Ramp,
                  history: Mapping[date, float], *, halved: bool = False) -> dict[str, int]:
    """Zset members for yesterday .. today+HORIZON, scored by the day's local midnight (ms):
    "day|cap|next_midnight_ms|day_number|state". Carrying the next midnight lets the reserve script find
    today, its cap and its end with one range query. `halved`: a rested mailbox's ramp, each day's cap halved."""
    first = max(start, today - timedelta(days=1))
    # A mailbox registered ahead of its first day gets its first HORIZON_DAYS written too.
    days = plan(start, max(today, start) + timedelta(days=HORIZON_DAYS), ramp, history)
    if halved:
        days = [half_of(d) for d in days]
    return {_member(d, timezone): midnight_ms(d.day, timezone) for d in days if d.day >= first}


def half_of(day: DayCap) -> DayCap:
    """A rested mailbox's day (placement tests, `warmup resume` lifts it): half the cap, rounded down, at least 1 on
    a day that allows any."""
    return DayCap(day.day, day.day_number, max(1, day.cap // 2) if day.cap else 0, day.state)


def parse_member(member: str) -> tuple[DayCap, int]:
    """A schedule member -> (the day's plan, its end as the next local midnight in ms)."""
    day, cap, next_midnight, number, state = member.split("|")
    return DayCap(date.fromisoformat(day), int(number), int(cap), state), int(next_midnight)  # type: ignore[arg-type]


def _member(day: DayCap, timezone: str) -> str:
    next_midnight = midnight_ms(day.day + timedelta(days=1), timezone)
    return f"{day.day.isoformat()}|{day.cap}|{next_midnight}|{day.day_number}|{day.state}"


def jitter_ms(seed: str, send_number: int, low_ms: int, high_ms: int) -> int:
    """The jitter added to the gap after a mailbox's `send_number`-th reservation: fresh for every send, and
    predictable from the mailbox's seed.

    Mirrors reserve.lua (sha1 of "seed|n", first 8 hex digits, modulo the span)."""
    if high_ms <= low_ms:
        return low_ms
    span = high_ms - low_ms + 1
    return low_ms + int(hashlib.sha1(f"{seed}|{send_number}".encode()).hexdigest()[:8], 16) % span


def format_duration(ms: float) -> str:
    """A wait for people, rounded up (a wait shown is never shorter than the real one): 45 s, 7 min 3 s, 2 h 5 min,
    6 d 10 h.

    Mirrored by reserve.lua's `duration`, so the guard's reasons and the CLI's words agree."""
    seconds = max(0, math.ceil(ms / 1000))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    minutes = math.ceil(seconds / 60)
    if minutes < 48 * 60:
        return f"{minutes // 60} h {minutes % 60} min"
    hours = math.ceil(minutes / 60)
    return f"{hours // 24} d {hours % 24} h"
