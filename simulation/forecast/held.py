"""What held a campaign each day of a forecast, in the words of the one who held it: the guard's refusal, the ledger's
rows due and not claimable (their window), the campaign's state, or nothing (everything due went).

A day's limit is read at the first look that sent none of the campaign's rows after it last sent that day: where
its sending stopped. A day it never sent on takes what held it at its first look, and a whole day passed over with no
look (nothing came due in it) what held the campaign when the last look ended. A gap or a closing window that ends a
day whose cap was used up is not the limit: the cap is (the guard's pace spreads a day's sends to end as its cap
does).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import date, datetime
from enum import Enum
from zoneinfo import ZoneInfo

from sender.ledger.store import Ledger
from sendhost.model import Mailbox
from simulation.forecast.days import Limit
from warmup import Answer, CampaignSlot, Decision, Guard

Held = tuple[Limit, str]
GUARD_LIMITS = {Answer.SKIPPED_CAMPAIGN_CAP: Limit.CAMPAIGN_CAP, Answer.SKIPPED_COOLDOWN: Limit.GAP,
                Answer.SKIPPED_PAUSED: Limit.MAILBOX_PAUSED, Answer.SKIPPED_NOT_STARTED: Limit.MAILBOX_RAMP}


class _Pending(Enum):
    SEND = "the campaign sent since the last look that held it"
    DAY = "a new day began"


class Watch:
    """One campaign's days: when it last sent, and what held it each day, on the campaign's clock `tz`."""

    def __init__(self, campaign: str, group: str | None, tz: ZoneInfo, ledger: Ledger, guard: Guard,
                 members: frozenset[str], mailboxes: Mapping[str, Mailbox],
                 slot: Callable[[str], CampaignSlot | None]) -> None:
        self.campaign = campaign
        self.group = group
        self.tz = tz
        self._ledger = ledger
        self._guard = guard
        self._members = sorted(members)
        self._mailboxes = mailboxes
        self._slot = slot  # the slot the campaign's last reservation asked for
        self.held: dict[date, Held] = {}
        self._last_send: float | None = None
        self._look_day: date | None = None
        self._pending: _Pending | None = None

    def day(self, at: float) -> date:
        return datetime.fromtimestamp(at, self.tz).date()

    def look_starts(self, now: float) -> None:
        if self.day(now) != self._look_day:  # a new day: its first look says what holds it, if nothing is sent
            self._look_day = self.day(now)
            self._pending = self._pending or _Pending.DAY

    def sent(self, now: float) -> None:
        self._last_send = now
        self._pending = _Pending.SEND

    def look_ended(self, now: float, sends: int, refused: Decision | None, asked: Sequence[str]) -> None:
        """After a look of the campaign's group that sent `sends` of its rows; `refused`: the guard's answer when it
        held the whole group, for mailboxes `asked`."""
        if sends or self._pending is None:
            return
        guard = self._guard_limit(refused, asked) if refused is not None else None
        today = self.day(now)
        if self._pending is _Pending.SEND and self._last_send is not None:
            day = self.day(self._last_send)
            self.held[day] = self._limit_of(day, now, guard)
        if today not in self.held:
            self.held[today] = self._limit_of(today, now, guard)
        self._pending = None

    def skipped(self, first: date, last: date) -> None:
        """The whole days between `first` and `last` had no look: what held the campaign at the end of the last."""
        if (last - first).days > 1:
            held = self._ledger_limit()
            for offset in range(1, (last - first).days):
                self.held.setdefault(date.fromordinal(first.toordinal() + offset), held)

    def finish(self, now: float, end_s: float) -> None:
        """The run ended at `now` (nothing left to look at, or its days are over at `end_s`): what holds the
        campaign now holds the day of its last send (if no look said since) and every day to the end."""
        if self._pending is _Pending.SEND and self._last_send is not None:
            day = self.day(self._last_send)
            self.held[day] = self._limit_of(day, now, None)
        self._pending = None
        end = self.day(end_s)
        self.skipped(self.day(now), date.fromordinal(end.toordinal() + 1))

    def limits(self, days: Sequence[date]) -> dict[date, Held]:
        """Each of `days`' limit, a day with none keeping the one before it."""
        result: dict[date, Held] = {}
        previous: Held = (Limit.LEADS, "")
        for day in days:
            previous = self.held.get(day, previous)
            result[day] = previous
        return result

    def _limit_of(self, day: date, now: float, guard: Held | None) -> Held:
        limit, detail = guard or self._ledger_limit()
        if limit in (Limit.GAP, Limit.WINDOW):
            return self._exhausted(day, now) or (limit, detail)
        return limit, detail

    def _exhausted(self, day: date, now: float) -> Held | None:
        """A cap the campaign used up on `day`: its own daily cap, else (`day` being today) every mailbox of its
        group at its day's cap."""
        slot = self._slot(self.campaign)
        if slot is not None and slot.cap is not None and self.group is not None and slot.day == day.isoformat():
            count, _shares = self._guard.campaign_counts(self.group, slot.name, slot.day)
            if count >= slot.cap:
                return Limit.CAMPAIGN_CAP, f"{count} of its daily cap of {slot.cap} on {slot.day}"
        if day != self.day(now) or not self._members:
            return None
        statuses = self._guard.status(self._members)
        if all(status.state == "daily-limit" for status in statuses):
            caps = ", ".join(f"{status.address} {status.sent}/{status.cap}" for status in statuses)
            return self._cap_limit(self._members[0]), caps
        return None

    def _guard_limit(self, decision: Decision, asked: Sequence[str]) -> Held:
        words = decision.status.value + (f" ({decision.reason})" if decision.reason else "")
        limit = GUARD_LIMITS.get(decision.status)
        return (limit or self._cap_limit(asked[0])), words

    def _cap_limit(self, address: str) -> Limit:
        """`address`'s daily limit: the ramp still climbing, its ceiling, or the provider's limit as its ceiling."""
        ceiling = self._guard.settings(address).ramp.ceiling
        if self._guard.status([address])[0].cap < ceiling:
            return Limit.MAILBOX_RAMP
        mailbox = self._mailboxes.get(address)
        smtp = mailbox.smtp if mailbox is not None else None
        if smtp is not None and smtp.daily_limit is not None and smtp.daily_limit <= ceiling:
            return Limit.PROVIDER_LIMIT
        return Limit.MAILBOX_CAP

    def _ledger_limit(self) -> Held:
        """The campaign's state, else its rows due and not claimable (waiting for their window), else none due."""
        row = self._ledger.fetch_one("forecast_campaign_rows", {"name": self.campaign}, "forecast rows")
        state, due = (str(row[0]), int(row[1])) if row else ("stopped", 0)
        if state != "running":
            return Limit.NOT_RUNNING, f"the campaign is {state}"
        if due:
            return Limit.WINDOW, f"{due} row(s) due wait for their window"
        return Limit.LEADS, "every row due went"
