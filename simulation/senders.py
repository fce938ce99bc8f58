"""Sender workers: each has a queue of leads; to send one it reserves a mailbox through the warm-up guard
(`pick`: least-used eligible, within caps and gaps), leases a source IP from the pool, "sends" (no network:
it holds the lease for a while), then releases the lease and confirms the reservation."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from zoneinfo import ZoneInfo

from ippool import Lease, Pool
from simulation import events
from simulation.model import SimMailbox
from warmup import Guard, Reservation

NO_RETRY_HINT_S = 3600.0  # paused mailboxes give no retry time: look again in an hour
MIN_RETRY_S = 1.0


@dataclass
class InFlight:
    """A send in progress: its reservation and lease, until `done_at`."""

    reservation: Reservation
    lease: Lease
    done_at: float


@dataclass
class SenderWorker:
    """One sender process on one host."""

    name: str
    host: str
    guard: Guard
    pool: Pool
    mailboxes: tuple[SimMailbox, ...]
    clock: Callable[[], float]
    rng: random.Random
    log: events.EventLog
    send_seconds: tuple[float, float]
    backlog_limit: int
    pending: int = 0
    in_flight: InFlight | None = None
    _added: set[str] = field(default_factory=set)

    def lead_arrives(self) -> None:
        """A new lead to mail; the oldest are dropped past `backlog_limit` (a day's worth)."""
        self.pending = min(self.pending + 1, self.backlog_limit)

    def attempt(self) -> float | None:
        """Try to send one lead now. Returns when to try again (None: nothing pending, or a send is in flight
        and `finish` will be called at its `done_at`)."""
        if self.pending == 0 or self.in_flight is not None:
            return None
        now = self.clock()
        retry: float | None = None
        for group in self._groups(now):
            decision = self.guard.pick(group, now=now)
            if decision.reserved and decision.reservation is not None:
                self._send(decision.reservation, now)
                return None
            self.log.skips.append(events.Skip(now, self.name, decision.status))
            wait = decision.retry_after_s if decision.retry_after_s is not None else NO_RETRY_HINT_S
            retry = wait if retry is None else min(retry, wait)
        return now + max(MIN_RETRY_S, retry if retry is not None else NO_RETRY_HINT_S)

    def finish(self) -> None:
        """The send in flight went out: release the lease, confirm the reservation."""
        assert self.in_flight is not None
        self.in_flight.lease.release()
        self.guard.confirm(self.in_flight.reservation, now=self.clock())
        self.in_flight = None
        self.pending -= 1

    def _send(self, reservation: Reservation, now: float) -> None:
        lease = self.pool.lease(self.host)
        self.log.sends.append(events.Send(
            now, self.name, self.host, reservation.mailbox, reservation.day, reservation.count, reservation.cap,
            lease.public_ip, lease.slot, lease.generation, lease.reason))
        self.in_flight = InFlight(reservation, lease, now + self.rng.uniform(*self.send_seconds))

    def _groups(self, now: float) -> list[tuple[str, ...]]:
        """Mailboxes whose start date has come (in their own timezone), by group; added to the guard on the way."""
        groups: dict[str, list[str]] = {}
        for mailbox in self.mailboxes:
            local_day = datetime.fromtimestamp(now, tz=ZoneInfo(mailbox.timezone)).date()
            if mailbox.start > local_day:
                continue
            if mailbox.address not in self._added:
                if not self.guard.knows(mailbox.address):
                    self.guard.add_mailbox(mailbox.address, start=mailbox.start, group=mailbox.group,
                                           timezone=mailbox.timezone, domain=mailbox.domain, now=now)
                self._added.add(mailbox.address)
            groups.setdefault(mailbox.group, []).append(mailbox.address.lower())
        return [tuple(addresses) for _name, addresses in sorted(groups.items())]
