"""Warm-up counters rebuilt from the ledger: Postgres is the record, Redis the fast guard.

At the agent's start, and whenever Redis has lost a mailbox (flushed, restarted empty), each mailbox of the group
is put back under the guard *paused*, its day's sends and last send restored from the ledger, then resumed: until
the rebuild ran, the mailbox reserves nothing. The guard's rebuild lock per group keeps agents from rebuilding at
once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta

from sender.ledger.store import Ledger
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
        sends = ledger.sends_since(datetime.fromtimestamp(clock(), UTC) - LOOKBACK, addresses)
        if sends:
            guard.import_sends(sends)
        for mailbox in mailboxes:
            status = guard.status([mailbox.address])[0]
            if status.state == "paused" and status.reason == REBUILD_PAUSE_REASON:
                guard.resume(mailbox.address)
        if readded:
            log.info("sender: rebuilt warm-up counters of %d mailbox(es) in group %s from the ledger",
                     readded, group)
        return readded
