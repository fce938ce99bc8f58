"""A campaign's pacing keys (issue 25): time zone, sending window, dates to skip, caps, the follow-ups' share.

Parsed and validated here. The window keys are enforced by the agent (sender/sending/windows.py, with the
arithmetic in sender/campaigns/window.py), the caps by the warm-up guard's reservation (the agent passes them as a
warmup.CampaignSlot), the follow-ups' share by the ledger's claim (sender_claim in sender/sql/schema.sql:
sender_campaign_apply stores it).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from datetime import date
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from sender.campaigns.keys import Keys, kind

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_RANGE_RE = re.compile(r"([01][0-9]|2[0-3]):([0-5][0-9])-(?:([01][0-9]|2[0-3]):([0-5][0-9])|(24):(00))\Z")
_DATE_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}\Z")
MAX_CAP = 1_000_000
DEFAULT_TIMEZONE = "UTC"
DEFAULT_FOLLOWUPS_SHARE = 0.8
PACING_KEYS = ("timezone", "window", "skip_dates", "daily_cap", "max_per_mailbox_per_day", "followups_share",
               "allow_other_campaigns")


@dataclass(frozen=True, order=True)
class HourRange:
    """Local time from `start` to `end`, in minutes after midnight; `end` may be 1440 (24:00)."""

    start: int
    end: int

    def __str__(self) -> str:
        return f"{self.start // 60:02d}:{self.start % 60:02d}-{self.end // 60:02d}:{self.end % 60:02d}"


@dataclass(frozen=True)
class Window:
    """Weekdays (0 = Monday) and the hour ranges of each, in the campaign's (or the lead's) time zone."""

    days: tuple[int, ...]
    hours: tuple[HourRange, ...]

    def __str__(self) -> str:
        """As a campaign file writes it: `mon, tue 09:00-12:00, 13:00-17:00`."""
        return f"{', '.join(DAYS[d] for d in self.days)} {', '.join(str(r) for r in self.hours)}"


@dataclass(frozen=True)
class Pacing:
    """How fast and when a campaign sends. `window` None: any day, any hour. `daily_cap` None: only mailbox caps."""

    timezone: str = DEFAULT_TIMEZONE
    window: Window | None = None
    skip_dates: tuple[date, ...] = ()
    daily_cap: int | None = None
    max_per_mailbox_per_day: int | None = None
    followups_share: float = DEFAULT_FOLLOWUPS_SHARE
    allow_other_campaigns: bool = False


def valid_timezone(name: str) -> bool:
    """Whether `name` is an IANA time zone this machine knows (`Europe/Berlin`)."""
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return False
    return True


def parse_pacing(keys: Keys) -> Pacing:
    """The pacing keys of the campaign file's top mapping (each optional), or CampaignError at the key's line."""
    timezone = keys.text("timezone", DEFAULT_TIMEZONE)
    if not valid_timezone(timezone):
        keys.fail("timezone", f"{timezone!r} is not an IANA time zone like Europe/Berlin")
    window_node = keys.get("window", None)
    return Pacing(
        timezone=timezone,
        window=None if window_node is None else _window(keys.child("window", window_node, keys.line("window"))),
        skip_dates=_skip_dates(keys),
        daily_cap=keys.whole("daily_cap", 1, MAX_CAP, None),
        max_per_mailbox_per_day=keys.whole("max_per_mailbox_per_day", 1, MAX_CAP, None),
        followups_share=keys.fraction("followups_share", DEFAULT_FOLLOWUPS_SHARE),
        allow_other_campaigns=keys.flag("allow_other_campaigns", False),
    )


def _window(keys: Keys) -> Window:
    keys.only(("days", "hours"))
    days: list[int] = []
    for line, day in keys.items("days"):
        if day not in DAYS:
            keys.fail("days", f"{day!r} is not a day; use {', '.join(DAYS)}", line)
        if DAYS.index(day) in days:
            keys.fail("days", f"{day} is listed twice", line)
        days.append(DAYS.index(day))
    if not days:
        keys.fail("days", "no day listed; a window needs at least one day (or drop the window to send any day)")
    ranges: list[tuple[HourRange, int]] = []
    for line, text in keys.items("hours"):
        ranges.append((_hour_range(keys, text, line), line))
    if not ranges:
        keys.fail("hours", 'no range listed; give at least one, like "09:00-17:00"')
    ranges.sort()
    for (earlier, _), (later, line) in itertools.pairwise(ranges):
        if later.start < earlier.end:
            keys.fail("hours", f"{later} overlaps {earlier}; make the ranges disjoint", line)
    return Window(tuple(sorted(days)), tuple(r for r, _ in ranges))


def _hour_range(keys: Keys, text: object, line: int) -> HourRange:
    match = _RANGE_RE.match(text) if isinstance(text, str) else None
    if match is None:
        keys.fail("hours", f"{text!r} is not a range of local times like \"09:00-12:00\" (00:00 to 24:00, quoted)",
                  line)
    start_h, start_m, end_h, end_m, midnight, _ = match.groups()
    start = int(start_h) * 60 + int(start_m)
    end = 1440 if midnight else int(end_h) * 60 + int(end_m)
    if end <= start:
        keys.fail("hours", f"{text!r} ends before it starts; a range cannot cross midnight (split it in two days' "
                  "ranges, 22:00-24:00 and 00:00-02:00)", line)
    return HourRange(start, end)


def _skip_dates(keys: Keys) -> tuple[date, ...]:
    found: set[date] = set()
    for line, value in keys.items("skip_dates", None):
        if isinstance(value, str) and _DATE_RE.match(value):
            value = _iso_date(value)
        if not isinstance(value, date) or hasattr(value, "hour"):
            keys.fail("skip_dates", f"{value!r} ({kind(value)}) is not a date like 2026-12-24", line)
        found.add(value)
    return tuple(sorted(found))


def _iso_date(text: str) -> date | str:
    try:
        return date.fromisoformat(text)
    except ValueError:  # 2026-02-30: left as text, refused as not a date
        return text
