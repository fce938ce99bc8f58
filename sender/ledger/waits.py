"""Why each row of a campaign not sent yet waits, and until when: one reason per row (issue 43).

Every row waiting, queued, in retry or in flight is put in exactly one line, so that the lines sum to the rows. The
first of these that holds a row is its reason:
- `waiting`: its lead's earlier step is not sent yet (or the campaign is not running: `paused`, `draft`);
- `sending`: claimed by an agent now;
- `scheduled`: not due yet, its step's delay (or its enqueued time) not reached;
- `window`: its lead's sending window is closed now (per lead time zone, until it next opens);
- `campaign-cap`: the campaign reserved its daily cap today (until the campaign's local midnight);
- a mailbox: none of the mailboxes it may go from (the one it is pinned to, else each of its group's) is ready,
  and the one that frees first holds it: `mailbox-paused` (paused or disconnected, until resumed),
  `mailbox-cap` (its day's cap or the campaign's per-mailbox cap, until it frees), `gap` (its minimum gap or its
  pace, until its next send may go);
- `backoff`: a retry waiting out its delay; `put-back`: put back by an agent for a while, nothing above holding it
  now (the agent looks again then);
- `due`: due now, and nothing holds it.
A row due now and put back since count by what holds it now (the agent put it back until that frees). The rows
are read grouped (status, lead time zone, group, pinned mailbox, due or not), never one by one; the mailboxes'
states come from the guard (sender.guard_view, through cap_wait's GuardView): when it cannot be read, every row
the mailboxes might hold is `due` and the caller says the caps are unknown.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from sender.campaigns.window import Schedule, zone
from sender.ledger.store import Ledger

if TYPE_CHECKING:
    from sender.ledger.cap_wait import MailboxDay  # cap_wait reads its rows through this module


class Reason(StrEnum):
    WAITING = "waiting"
    CAMPAIGN_PAUSED = "campaign-paused"
    SENDING = "sending"
    SCHEDULED = "scheduled"
    WINDOW = "window"
    CAMPAIGN_CAP = "campaign-cap"
    MAILBOX_PAUSED = "mailbox-paused"
    MAILBOX_CAP = "mailbox-cap"
    GAP = "gap"
    BACKOFF = "backoff"
    PUT_BACK = "put-back"
    DUE = "due"


# The order of the lines: as a row goes through them, nearest to going last.
ORDER = tuple(Reason)


@dataclass(frozen=True)
class RowFacts:
    """What the ledger says of one row (or of a group of rows alike): its status, lead time zone (None: the
    campaign's), mailbox group, pinned mailbox, whether it is not due yet and whether it is put back past now."""

    status: str  # waiting | queued | retry | sending
    lead_timezone: str | None
    group: str
    pinned: str | None
    scheduled: bool  # its own due time (due_at: its delay, a hold) is after now: the claim does not take it yet
    held: bool  # its not_before is after now: put back, or a retry's backoff
    not_before: datetime  # the earliest the claim may take it


@dataclass(frozen=True)
class Conditions:
    """What holds a campaign's rows now: its state and window, its cap, and the guard's mailboxes (None: unread)."""

    now: datetime
    state: str  # the campaign's: draft | running | paused | stopped
    timezone: str  # the campaign's
    schedule: Schedule | None = None
    campaign_full_until: datetime | None = None  # the campaign's cap reached: until its day ends
    mailboxes: Mapping[str, MailboxDay] | None = None
    groups: Mapping[str, Sequence[str]] = field(default_factory=dict)  # group -> its mailboxes (lower-case)


@dataclass(frozen=True)
class Wait:
    """One row's reason, until when (None: not known, or until a person acts), and where: a lead time zone for
    the window, a mailbox for a mailbox's reasons."""

    reason: Reason
    until: datetime | None = None
    where: str | None = None


def classify(row: RowFacts, conditions: Conditions) -> Wait:
    """The one reason `row` waits for now (the module's order)."""
    now = conditions.now
    if row.status == "waiting":
        if conditions.state in ("paused", "draft"):
            return Wait(Reason.CAMPAIGN_PAUSED, where=conditions.state)
        return Wait(Reason.WAITING)
    if row.status == "sending":
        return Wait(Reason.SENDING)
    if row.scheduled:
        return Wait(Reason.SCHEDULED, row.not_before)
    if conditions.schedule is not None:
        tz = zone(row.lead_timezone, conditions.timezone)
        if not conditions.schedule.is_open(now, tz):
            return Wait(Reason.WINDOW, conditions.schedule.next_opening(now, tz), tz.key)
    if conditions.campaign_full_until is not None:
        return Wait(Reason.CAMPAIGN_CAP, conditions.campaign_full_until)
    held = _mailbox_hold(row, conditions)
    if held is not None:
        return held
    if row.held:
        return Wait(Reason.BACKOFF if row.status == "retry" else Reason.PUT_BACK, row.not_before)
    return Wait(Reason.DUE)


def _mailbox_hold(row: RowFacts, conditions: Conditions) -> Wait | None:
    """What of the mailboxes `row` may go from holds it: None when one is ready (or the guard is unread)."""
    if conditions.mailboxes is None:
        return None
    candidates = [row.pinned] if row.pinned is not None else list(conditions.groups.get(row.group, ()))
    holds: list[Wait] = []
    for address in candidates:
        day = conditions.mailboxes.get(address)
        if day is None:
            return None  # not read: not known to hold it
        wait = mailbox_wait(day, conditions.now)
        if wait is None:
            return None
        holds.append(wait)
    if not holds:
        return None
    # the one that frees first sends it; one paused until resumed frees last
    far = datetime.max.replace(tzinfo=UTC)
    return min(holds, key=lambda w: (w.until or far, w.where or ""))


def mailbox_wait(day: MailboxDay, now: datetime) -> Wait | None:
    """What holds a mailbox now, as a row's reason; None: it is ready (or not under the guard yet)."""
    if day.state == "paused":
        return Wait(Reason.MAILBOX_PAUSED, None, day.address)
    if day.frees is not None and day.frees > now:
        return Wait(Reason.MAILBOX_CAP, day.frees, day.address)
    if day.state in ("daily-limit", "not-started"):
        return Wait(Reason.MAILBOX_CAP, day.eligible, day.address)
    if day.state == "cooldown" and day.eligible is not None and day.eligible > now:
        return Wait(Reason.GAP, day.eligible, day.address)
    return None


@dataclass(frozen=True)
class WaitLine:
    """Rows that wait for one reason at one place, and the earliest time the first of them may go."""

    reason: Reason
    rows: int
    until: datetime | None
    where: str | None

    def as_json(self) -> dict[str, object]:
        return {"reason": self.reason.value, "rows": self.rows, "where": self.where,
                "until": self.until.isoformat(timespec="seconds") if self.until else None}


@dataclass(frozen=True)
class Waits:
    """A campaign's rows not sent yet, each in one line."""

    now: datetime
    timezone: str  # the campaign's, for the times shown
    lines: tuple[WaitLine, ...]
    window_closes: datetime | None = None  # the campaign's window is open now until then
    unknown: str | None = None  # the guard could not be read: the mailboxes' reasons are unknown (why)

    @property
    def rows(self) -> int:
        return sum(line.rows for line in self.lines)

    def count(self, reason: Reason) -> int:
        return sum(line.rows for line in self.lines if line.reason is reason)

    def first(self, reason: Reason) -> datetime | None:
        times = [line.until for line in self.lines if line.reason is reason and line.until is not None]
        return min(times) if times else None

    def as_json(self) -> dict[str, object]:
        return {"rows": self.rows, "unknown": self.unknown,
                "window_closes": self.window_closes.isoformat(timespec="seconds") if self.window_closes else None,
                "lines": [line.as_json() for line in self.lines]}


def gather(rows: Iterable[tuple[RowFacts, int]], conditions: Conditions, unknown: str | None = None) -> Waits:
    """(facts, how many rows) classified and summed per (reason, where); the lines in the module's order."""
    summed: dict[tuple[Reason, str | None], tuple[int, datetime | None]] = {}
    for facts, count in rows:
        wait = classify(facts, conditions)
        key = (wait.reason, wait.where)
        before, until = summed.get(key, (0, None))
        if wait.until is not None:
            until = wait.until if until is None else min(until, wait.until)
        summed[key] = (before + count, until)
    lines = tuple(WaitLine(reason, n, until, where) for (reason, where), (n, until) in
                  sorted(summed.items(), key=lambda kv: (ORDER.index(kv[0][0]), kv[1][1] or conditions.now,
                                                        kv[0][1] or "")))
    closes = None
    if conditions.schedule is not None and conditions.state == "running":
        closes = conditions.schedule.closes(conditions.now, zone(conditions.timezone, "UTC"))
    return Waits(conditions.now, conditions.timezone, lines, closes, unknown)


def read_rows(ledger: Ledger, campaign: str, now: datetime) -> list[tuple[RowFacts, int]]:
    """The campaign's rows not sent yet, grouped as `classify` reads them (queries.sql `campaign_wait_rows`)."""
    return [(RowFacts(str(status), tz, str(group), pinned, bool(scheduled), bool(held), not_before), int(n))
            for status, tz, group, pinned, scheduled, held, n, not_before in
            ledger.fetch_all("campaign_wait_rows", {"name": campaign, "at": now}, f"status of {campaign}")]


# --- words ------------------------------------------------------------------------------------------------------


def when(instant: datetime, tz: ZoneInfo, now: datetime) -> str:
    """A time for a line: `21:34 UTC` today, `Mon 08:00 +09:00` within the week, else with its date."""
    local = instant.astimezone(tz)
    offset = local.strftime("%z")
    zone_text = "UTC" if offset == "+0000" else f"{offset[:3]}:{offset[3:]}"
    days = (local.date() - now.astimezone(tz).date()).days
    shown = local.strftime("%H:%M") if days == 0 else \
        local.strftime("%a %H:%M") if 0 < days < 7 else local.strftime("%Y-%m-%d %H:%M")
    return f"{shown} {zone_text}"


_WORDS = {
    Reason.WAITING: "wait for their lead's earlier step to be sent (waiting)",
    Reason.SENDING: "are being sent now (claimed by an agent)",
    Reason.SCHEDULED: "are not due yet (their step's delay)",
    Reason.WINDOW: "wait for their window",
    Reason.CAMPAIGN_CAP: "wait for the campaign's daily cap",
    Reason.MAILBOX_PAUSED: "wait for a paused or disconnected mailbox",
    Reason.MAILBOX_CAP: "wait for a mailbox's cap",
    Reason.GAP: "wait for a mailbox's gap or pace",
    Reason.BACKOFF: "wait out a retry's backoff",
    Reason.PUT_BACK: "were put back by an agent",
    Reason.DUE: "are due now",
}


def describe(line: WaitLine, waits: Waits, campaign: str) -> str:
    """One line's words: `3 wait for their window (Asia/Tokyo) until Mon 08:00 +09:00`."""
    if line.reason is Reason.CAMPAIGN_PAUSED:
        move = "start" if line.where == "draft" else "resume"
        return f"{line.rows} wait for the campaign, which is {line.where} (`sendhost campaign {move} {campaign}`)"
    text = f"{line.rows} {_WORDS[line.reason]}"
    if line.reason is Reason.WINDOW:
        text += f" ({line.where})"
        tz = ZoneInfo(line.where) if line.where else zone(waits.timezone, "UTC")
    else:
        tz = zone(waits.timezone, "UTC")
    if line.reason is Reason.MAILBOX_PAUSED:
        return f"{text}, {line.where} (until resumed: `sendhost warmup resume {line.where}`)"
    if line.until is not None:
        first = "until" if line.reason in (Reason.WINDOW, Reason.CAMPAIGN_CAP, Reason.MAILBOX_CAP, Reason.GAP,
                                           Reason.BACKOFF, Reason.PUT_BACK) else "the first due"
        text += f" {first} {when(line.until, tz, waits.now)}"
    if line.where is not None and line.reason is not Reason.WINDOW:
        text += f", {line.where}"
    return text


def short(wait: Wait, tz: ZoneInfo, now: datetime) -> str:
    """One row's reason for a table cell, its time on `tz`'s clock: `window (Asia/Tokyo) until Mon 08:00 +09:00`,
    `gap until 21:34 UTC, alice@x.example`."""
    text = wait.reason.value
    if wait.reason is Reason.WINDOW:
        text += f" ({wait.where})"
    elif wait.reason is Reason.CAMPAIGN_PAUSED:
        text = f"the campaign ({wait.where})"
    if wait.until is not None:
        text += f" until {when(wait.until, tz, now)}"
    if wait.where is not None and wait.reason not in (Reason.WINDOW, Reason.CAMPAIGN_PAUSED):
        text += f", {wait.where}"
    return text
