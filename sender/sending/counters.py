"""Warm-up counters rebuilt from the ledger: Postgres is the record, Redis the fast guard.

At the agent's start, and whenever Redis has lost a mailbox (flushed, restarted empty), each mailbox of the group
is put back under the guard *paused*, its day's sends and last send restored from the ledger, and the group's
campaigns' day counts with them (docs/campaigns.md#campaign-caps), then resumed: until the rebuild ran, the mailbox
reserves nothing. A mailbox rested by placement tests (sender.placement.rest) gets its rest back from the ledger. The
guard's rebuild lock per group keeps agents from rebuilding at once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta

from sender.campaigns.spec import load_applied
from sender.ledger.store import Ledger
from sender.placement.rest import PAUSE_PREFIX, open_rests
from sendhost.errors import ConfigError
from sendhost.model import Mailbox
from warmup import Guard

log = logging.getLogger("sendhost.sender")
REBUILD_PAUSE_REASON = "rebuilding counters from the send ledger"
LOOKBACK = timedelta(days=2)  # covers "today" in every time zone


def rebuild(guard: Guard, ledger: Ledger, group: str, mailboxes: Sequence[Mailbox], *,
            sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.time) -> int:
    """Make every mailbox of `group` known to the guard with counters no lower than the ledger's; returns how
    many had to be re-added. WarmupUnavailable when Redis cannot be reached. `clock` dates the ledger's look-back."""
    with guard.rebuilding(group, sleep=sleep):
        readded = 0
        for mailbox in mailboxes:
            if not guard.knows(mailbox.address):
                guard.add_mailbox(mailbox.address, start=mailbox.start, min_gap_s=mailbox.min_gap_s,
                                  jitter_s=mailbox.jitter_s, group=group, timezone=mailbox.timezone,
                                  domain=mailbox.domain, paused=REBUILD_PAUSE_REASON)
                readded += 1
        addresses = [m.address.lower() for m in mailboxes]
        since = datetime.fromtimestamp(clock(), UTC) - LOOKBACK
        sends = ledger.sends_since(since, addresses)
        if sends:
            guard.import_sends(sends)
        _restore_campaigns(guard, ledger, group, since)
        rests = open_rests(ledger) if readded else {}
        for mailbox in mailboxes:
            status = guard.status([mailbox.address])[0]
            if status.state == "paused" and status.reason == REBUILD_PAUSE_REASON:
                rest = rests.get(mailbox.address.lower())
                if rest is not None and rest.how == "paused":  # a placement rest Redis lost: paused again
                    guard.pause(mailbox.address, f"{PAUSE_PREFIX} {rest.reason}")
                    continue
                guard.resume(mailbox.address)
                if rest is not None:  # its ramp halved again, until a test or `warmup resume` lifts it
                    guard.rest(mailbox.address, f"{PAUSE_PREFIX} {rest.reason}")
        if readded:
            log.info("sender: rebuilt warm-up counters of %d mailbox(es) in group %s from the ledger",
                     readded, group)
        return readded


def _restore_campaigns(guard: Guard, ledger: Ledger, group: str, since: datetime) -> None:
    """Raise the counters of every campaign that sent from `group` since `since` to its sends today, on the
    campaign's own day: else a Redis that lost them lets each campaign send its whole daily cap again."""
    for (name, source), sends in ledger.campaign_sends_since(since, group).items():
        try:
            timezone = load_applied(name, source).pacing.timezone
        except ConfigError as exc:  # its rows wait until it is applied again (sender.sending.windows): none sends
            log.warning("sender: campaign %s's counters not rebuilt: %s", name, exc)
            continue
        guard.import_campaign_sends(group, name, timezone, sends)
