"""What of a campaign waits for a cap now, and each of its mailboxes' day against its cap: for `campaign status`.

Each row not sent yet is put in one reason by sender.ledger.waits (due now, its window, the campaign's cap, a
mailbox's cap, gap or pause, ...); the counts here (due, the campaign's cap, a mailbox's cap) are those lines, so
that they agree with them. The mailboxes' days come from the warm-up guard in Redis: when it cannot be read, the
cap part is unknown (None, "couldn't look"), never 0, and every row due now counts as due. The guard is read by the
caller's `read` (sender.guard_view, composed in sender.assembly): the ledger does not import the warm-up package.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from sender.campaigns.spec import CampaignSpec
from sender.campaigns.window import Schedule, zone
from sender.ledger.store import Ledger
from sender.ledger.waits import Conditions, Reason, Waits, gather, read_rows

NOT_GUARDED = "not under the guard"  # a mailbox's state before an agent or `warmup add` put it there


@dataclass(frozen=True)
class MailboxDay:
    """One mailbox's day as the guard counts it: its own local day, its sends (confirmed) and reservations (sent
    and in flight) against its cap, and the campaign's share of them on the campaign's day. None: not guarded."""

    address: str
    state: str  # the guard's: ready | cooldown | daily-limit | paused | not-started; or NOT_GUARDED
    in_group: bool  # one of the campaign group's mailboxes (else only a row's pinned one)
    day: date | None = None
    sent: int | None = None
    reserved: int | None = None
    cap: int | None = None
    campaign: int | None = None  # the campaign's reservations on it, on the campaign's day
    frees: datetime | None = None  # when its cap frees for the campaign, if it is at a cap
    eligible: datetime | None = None  # the guard's next eligible time (cooldown, cap, not started); None: paused
    reason: str | None = None  # the guard's words for its state

    def as_json(self) -> dict[str, object]:
        return {"state": self.state, "day": self.day.isoformat() if self.day else None, "sent": self.sent,
                "reserved": self.reserved, "cap": self.cap, "campaign": self.campaign,
                "frees": self.frees.isoformat() if self.frees else None}


@dataclass(frozen=True)
class CapWait:
    """The campaign's pace now. The cap fields are None when the guard could not be read (`unknown` says why)."""

    now: datetime  # in the campaign's time zone
    day: date  # the campaign's local day
    day_ends: datetime  # its end, in the campaign's time zone
    daily_cap: int | None
    per_mailbox_cap: int | None
    due: int  # rows due now, inside their window, that no cap holds (unknown caps: every row due now)
    sent_today: int | None  # the campaign's reservations on its day
    campaign_cap_rows: int | None
    mailbox_cap_rows: int | None
    mailbox_cap_until: datetime | None  # when the first mailbox they wait for frees, in the campaign's time zone
    mailboxes: tuple[MailboxDay, ...]
    unknown: str | None = None
    waits: Waits | None = None  # every row not sent yet, each in one reason
    conditions: Conditions | None = None  # what holds the campaign's rows now (for one row's reason: lead show)

    def as_json(self) -> dict[str, object]:
        return {
            "now": self.now.isoformat(timespec="seconds"), "due": self.due, "unknown": self.unknown,
            "campaign_cap": {"day": self.day.isoformat(), "ends": self.day_ends.isoformat(), "cap": self.daily_cap,
                             "reserved": self.sent_today, "rows": self.campaign_cap_rows},
            "mailbox_cap": {"per_mailbox": self.per_mailbox_cap, "rows": self.mailbox_cap_rows,
                            "until": self.mailbox_cap_until.isoformat() if self.mailbox_cap_until else None},
            "mailboxes": {m.address: m.as_json() for m in self.mailboxes},
        }


@dataclass(frozen=True)
class GuardView:
    """What the guard says of the campaign now: its count on its day, and each mailbox's day."""

    sent_today: int
    mailboxes: dict[str, MailboxDay]

    def frees(self) -> dict[str, datetime]:
        """The mailboxes at a cap, and when each frees."""
        return {a: m.frees for a, m in self.mailboxes.items() if m.frees is not None}

    def group_frees(self) -> datetime | None:
        """When the first mailbox of the group frees, if every one is at a cap; None: one has room (or none is)."""
        group = [m for m in self.mailboxes.values() if m.in_group]
        if not group or any(m.frees is None for m in group):
            return None
        return min(m.frees for m in group if m.frees is not None)


# What reads the guard for a campaign at (now in its time zone, the end of its day): its view, or why it could not.
GuardRead = Callable[[datetime, datetime], GuardView | str]


def day_start(day: date, tz: ZoneInfo) -> datetime:
    """The instant `day` starts in `tz` (DST-aware), in `tz`: a midnight a DST change skips is the first instant
    after it (the wall clock's 01:00)."""
    return datetime.fromtimestamp(datetime.combine(day, time(0), tz).timestamp(), tz)


def cap_wait(ledger: Ledger, spec: CampaignSpec, read: GuardRead | None, unreachable: str | None = None,
             state: str = "running", count_rows: bool = True) -> CapWait:
    """The pace of `spec`'s campaign (in `state`) now. `read` gives what the guard says of the campaign's
    mailboxes (its group's and those its rows are pinned to), or why it could not; None, or a failed read, leaves
    the cap part unknown (why: `unreachable`, or the read's answer). `count_rows` False: only the conditions,
    its rows not read (one lead's steps are classified by the caller)."""
    tz = zone(spec.pacing.timezone, "UTC")
    now = (ledger.now() or datetime.now(UTC)).astimezone(tz)
    day = now.date()
    day_ends = day_start(day + timedelta(days=1), tz)
    view: GuardView | None = None
    if read is not None:
        answer = read(now, day_ends)
        if isinstance(answer, str):
            unreachable = answer
        else:
            view = answer
    campaign_full = view is not None and spec.pacing.daily_cap is not None and \
        view.sent_today >= spec.pacing.daily_cap
    known = view is not None
    conditions = Conditions(
        now, state, spec.pacing.timezone, Schedule.of(spec.pacing), day_ends if campaign_full else None,
        view.mailboxes if view else None,
        {spec.group: [m.address for m in view.mailboxes.values() if m.in_group]} if view else {})
    found = gather(read_rows(ledger, spec.name, now) if count_rows else [], conditions,
                         None if known else unreachable or "not read")
    mailbox_until = found.first(Reason.MAILBOX_CAP)
    return CapWait(now, day, day_ends, spec.pacing.daily_cap, spec.pacing.max_per_mailbox_per_day,
                   found.count(Reason.DUE), view.sent_today if view else None,
                   found.count(Reason.CAMPAIGN_CAP) if known else None,
                   found.count(Reason.MAILBOX_CAP) if known else None,
                   mailbox_until.astimezone(tz) if mailbox_until else None,
                   tuple(view.mailboxes.values()) if view else (), None if known else unreachable or "not read",
                   found, conditions)
