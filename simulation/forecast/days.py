"""What a forecast says: day by day on the campaign's clock, how many first steps and follow-ups go and from which
mailboxes, the limit that bound the day, and the day the campaign's last step goes if nobody (or R of them)
answers."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime
from enum import StrEnum
from typing import Any


class Limit(StrEnum):
    """What held a day's sending: the first of them a row due and not sent met when the day's sending stopped."""

    MAILBOX_RAMP = "mailbox-ramp"  # the mailboxes' warm-up caps, still climbing
    MAILBOX_CAP = "mailbox-cap"  # the mailboxes' caps at their ceiling
    PROVIDER_LIMIT = "provider-limit"  # the provider's daily limit (smtp.daily_limit) is the ceiling
    CAMPAIGN_CAP = "campaign-cap"  # the campaign's daily_cap or max_per_mailbox_per_day
    WINDOW = "window"  # the sending window's hours: rows due waited for it to open
    GAP = "gap"  # the mailboxes' minimum gap and pace: the day's time ran out between sends
    MAILBOX_PAUSED = "mailbox-paused"  # no mailbox may send until a person resumes it
    NOT_RUNNING = "not-running"  # the campaign is paused, a draft or stopped
    LEADS = "leads"  # everything due went: more leads (or later steps coming due) would have gone too


WORDS = {
    Limit.MAILBOX_RAMP: "the mailboxes' warm-up ramp",
    Limit.MAILBOX_CAP: "the mailboxes' daily caps",
    Limit.PROVIDER_LIMIT: "the provider's daily limit",
    Limit.CAMPAIGN_CAP: "the campaign's daily cap",
    Limit.WINDOW: "the sending window's hours",
    Limit.GAP: "the mailboxes' gap between sends",
    Limit.MAILBOX_PAUSED: "a paused mailbox",
    Limit.NOT_RUNNING: "the campaign is not running",
    Limit.LEADS: "leads: everything due went",
}


@dataclass(frozen=True)
class ForecastDay:
    """One day on the campaign's clock."""

    day: date
    first_steps: int
    follow_ups: int
    by_mailbox: dict[str, int]
    limit: Limit
    detail: str = ""  # what the limit was, in the guard's or the ledger's words

    @property
    def sends(self) -> int:
        return self.first_steps + self.follow_ups

    def as_json(self) -> dict[str, Any]:
        return {"day": self.day.isoformat(), "first_steps": self.first_steps, "follow_ups": self.follow_ups,
                "sends": self.sends, "by_mailbox": dict(sorted(self.by_mailbox.items())),
                "limit": self.limit.value, "detail": self.detail}


@dataclass(frozen=True)
class Forecast:
    """A campaign's days from `start` on, and when its last lead's last step goes (None: not within the days)."""

    campaign: str
    timezone: str
    start: datetime
    reply_rate: float
    days: tuple[ForecastDay, ...]
    last_day: date | None
    steps_left: int  # steps not sent at the end of the days, of the leads still in sequence
    guard: str | None = None  # None: the guard's counts today were read; else why not (rebuilt from the ledger)
    copied: dict[str, int] = field(default_factory=dict)  # rows copied per table

    def as_json(self) -> dict[str, Any]:
        return {"campaign": self.campaign, "timezone": self.timezone,
                "start": self.start.isoformat(timespec="seconds"), "reply_rate": self.reply_rate,
                "days": [day.as_json() for day in self.days],
                "last_step_day": self.last_day.isoformat() if self.last_day else None,
                "steps_left": self.steps_left, "guard_unread": self.guard}
