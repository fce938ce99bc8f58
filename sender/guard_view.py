"""What the warm-up guard in Redis says of a campaign's mailboxes and of the mailboxes follow-ups are pinned to: the
guard's half of `campaign status` and `sender status`, whose ledger half is in sender.ledger (cap_wait.py,
stalled.py). sender.assembly joins the two, so that the ledger does not import the warm-up package.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from sender.campaigns.spec import CampaignSpec
from sender.ledger.cap_wait import NOT_GUARDED, GuardRead, GuardView, MailboxDay
from warmup import Guard
from warmup.days import midnight_ms
from warmup.errors import WarmupUnavailable
from warmup.mailboxes import MailboxStatus


def campaign_reader(guard: Guard, spec: CampaignSpec, group: Iterable[str] | None,
                    pinned: Iterable[str] = ()) -> GuardRead:
    """What reads the guard for `spec`'s campaign: `group`, the mailboxes of its group (None: those the guard holds
    in it); `pinned`, those its rows wait for. The read answers the guard's error when Redis cannot be read."""
    def read(now: datetime, day_ends: datetime) -> GuardView | str:
        try:
            return campaign_view(guard, spec, group, pinned, now, day_ends)
        except WarmupUnavailable as exc:
            return str(exc)
    return read


def campaign_view(guard: Guard, spec: CampaignSpec, group: Iterable[str] | None, pinned: Iterable[str],
                  now: datetime, day_ends: datetime) -> GuardView:
    """The campaign's reservations on its day (`now`'s date, ending at `day_ends`) and each mailbox's day."""
    sent_today, shares = guard.campaign_counts(spec.group, spec.name, now.date().isoformat())
    members = {a.lower() for a in group} if group is not None else \
        {s.address for s in guard.status(now=now.timestamp()) if s.group == spec.group}
    wanted = sorted(members | {a.lower() for a in pinned})
    known = [a for a in wanted if guard.knows(a)]
    statuses = {s.address: s for s in guard.status(known, now=now.timestamp())} if known else {}
    per_mailbox = spec.pacing.max_per_mailbox_per_day
    days: dict[str, MailboxDay] = {}
    for address in wanted:
        status = statuses.get(address)
        days[address] = MailboxDay(address, NOT_GUARDED, address in members) if status is None else \
            _mailbox_day(guard, status, address in members, shares.get(address, 0), per_mailbox, day_ends)
    return GuardView(sent_today, days)


def _mailbox_day(guard: Guard, status: MailboxStatus, in_group: bool, share: int, per_mailbox: int | None,
                 campaign_day_ends: datetime) -> MailboxDay:
    """`status` with the campaign's share, and when its cap frees for the campaign if it is at one."""
    frees: list[datetime] = []
    if status.state == "daily-limit" or status.reserved >= status.cap:
        if status.state == "daily-limit" and status.next_eligible is not None:
            frees.append(status.next_eligible)
        else:  # the mailbox's own day ends at its local midnight
            tz = guard.settings(status.address).timezone
            frees.append(datetime.fromtimestamp(midnight_ms(status.day + timedelta(days=1), tz) / 1000,
                                                ZoneInfo(tz)))
    if per_mailbox is not None and share >= per_mailbox:
        frees.append(campaign_day_ends)
    return MailboxDay(status.address, status.state, in_group, status.day, status.sent, status.reserved,
                      status.cap, share, max(frees) if frees else None, status.next_eligible, status.reason)


def mailbox_states(guard: Guard, mailboxes: Sequence[str], now: float | None) -> dict[str, MailboxStatus]:
    """The guard's status of each of `mailboxes` it holds, at `now` (epoch seconds; None: the guard's clock).
    WarmupUnavailable when Redis cannot be read."""
    known = [mailbox for mailbox in mailboxes if guard.knows(mailbox)]
    return {s.address: s for s in guard.status(known, now=now)} if known else {}


def mailbox_days(guard: Guard, addresses: Iterable[str], now: datetime) -> dict[str, MailboxDay]:
    """The guard's day of each of `addresses` at `now`, outside any campaign (the rows of `sender enqueue`).
    WarmupUnavailable when Redis cannot be read."""
    wanted = sorted({a.lower() for a in addresses})
    known = [a for a in wanted if guard.knows(a)]
    statuses = {s.address: s for s in guard.status(known, now=now.timestamp())} if known else {}
    return {a: MailboxDay(a, NOT_GUARDED, True) if a not in statuses else
            _mailbox_day(guard, statuses[a], True, 0, None, now) for a in wanted}
