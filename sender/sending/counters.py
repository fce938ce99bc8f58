"""Warm-up counters rebuilt from the ledger: Postgres is the record, Redis the fast guard.

At the agent's start, and whenever Redis has lost a mailbox (flushed, restarted empty), each mailbox of the group
is put back under the guard *paused*, its day's sends and last send restored from the ledger, then resumed: until
the rebuild ran, the mailbox reserves nothing. A Redis lock per group keeps agents from rebuilding at once.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta

import redis

from sender.ledger.store import Ledger
from sendhost.model import Mailbox
from warmup import Guard
from warmup import keys as warmup_keys
from warmup.errors import WarmupUnavailable

log = logging.getLogger("sendhost.sender")
REBUILD_PAUSE_REASON = "rebuilding counters from the send ledger"
LOCK_TTL_MS = 30_000
LOOKBACK = timedelta(days=2)  # covers "today" in every time zone


def rebuild(guard: Guard, client: redis.Redis, ledger: Ledger, group: str, mailboxes: Sequence[Mailbox],
            *, sleep: Callable[[float], None] = time.sleep) -> int:
    """Make every mailbox of `group` known to the guard with counters no lower than the ledger's; returns how
    many had to be re-added. WarmupUnavailable when Redis cannot be reached."""
    try:
        return _rebuild(guard, client, ledger, group, mailboxes, sleep)
    except redis.RedisError as exc:
        raise WarmupUnavailable(f"Redis unreachable while rebuilding the warm-up counters of group {group}: {exc}; "
                                "check --redis-url / SENDHOST_REDIS_URL") from None


def _rebuild(guard: Guard, client: redis.Redis, ledger: Ledger, group: str, mailboxes: Sequence[Mailbox],
             sleep: Callable[[float], None]) -> int:
    lock_key = f"sendhost:sender:{{{group}}}:rebuild"
    token = uuid.uuid4().hex
    deadline = time.monotonic() + LOCK_TTL_MS / 1000
    while not client.set(lock_key, token, nx=True, px=LOCK_TTL_MS):
        if time.monotonic() > deadline:
            break  # the holder died: its lock expires; go on (the rebuild only ever raises counters)
        sleep(0.05)
    try:
        readded = 0
        for mailbox in mailboxes:
            if not guard.knows(mailbox.address):
                # Paused before it exists for pick(): add_mailbox keeps fields it does not set.
                state = warmup_keys.GroupKeys(group).mailbox(mailbox.address.lower()).state
                client.hset(state, mapping={"paused": "1", "pause_reason": REBUILD_PAUSE_REASON})
                guard.add_mailbox(mailbox.address, start=mailbox.start, min_gap_s=mailbox.min_gap_s,
                                  jitter_s=mailbox.jitter_s, group=group, timezone=mailbox.timezone,
                                  domain=mailbox.domain)
                readded += 1
        addresses = [m.address.lower() for m in mailboxes]
        sends = ledger.sends_since(datetime.now(UTC) - LOOKBACK, addresses)
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
    finally:
        if client.get(lock_key) == token:
            client.delete(lock_key)
