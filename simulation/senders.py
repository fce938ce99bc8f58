"""Sender workers: each runs the sender agent's real send path (claim a due row → `Guard.pick` → `Pool.lease` → the
last suppression check → SMTP submission bound to the lease's source address → the send record), row after row as
the agent's own worker loop does, until one is sent (then it stays busy for a while) or none can go now."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from zoneinfo import ZoneInfo

from sender.sending.report import ReportKind
from sendhost.model import Mailbox
from simulation import events
from simulation.mail import Delivery, MailWorld

NO_RETRY_HINT_S = 3600.0  # paused mailboxes give no retry time: look again in an hour
MIN_RETRY_S = 1.0
# Rows one attempt may take through the send path without a send: each row refused for its pinned mailbox waits in
# the ledger and the next is claimed, as the agent's loop does; the bound only keeps one simulated instant short.
MAX_ROWS_PER_ATTEMPT = 50


@dataclass
class InFlight:
    """A worker busy after a send, until `done_at`; `delivery` is what the submission server accepted."""

    send: events.Send
    done_at: float
    delivery: Delivery


@dataclass
class SenderWorker:
    """One sender process on one host."""

    name: str
    host: str
    mail: MailWorld
    mailboxes: tuple[Mailbox, ...]
    clock: Callable[[], float]
    rng: random.Random
    log: events.EventLog
    send_seconds: tuple[float, float]
    in_flight: InFlight | None = None
    _added: set[str] = field(default_factory=set)

    def attempt(self) -> float | None:
        """Send the oldest row that can go now. Returns when to look again (None: a send went out and `finish`
        will be called at its `done_at`, or nothing waits in the ledger at all)."""
        if self.in_flight is not None:
            return None
        now = self.clock()
        self._start_mailboxes(now)
        waits: list[float] = []  # groups blocked as a whole: how long until one of their mailboxes may send
        drained: list[str] = []  # groups with nothing due now
        for group in self.mail.groups:
            wait = self._attempt_group(group, now)
            if self.in_flight is not None:
                return None
            if wait is None:
                drained.append(group)
            else:
                waits.append(wait)
        due = self.mail.ledger.next_due_s(drained) if drained else None
        if due is not None:
            waits.append(due)
        return now + max(MIN_RETRY_S, min(waits)) if waits else None

    def _attempt_group(self, group: str, now: float) -> float | None:
        """Rows of `group` through the send path until one is sent or the group is blocked: the wait the guard
        asked (None: nothing due in the group, or a send went out)."""
        agent = self.mail.agents[(self.host, group)]
        group_mailboxes = {m.address.lower() for m in self.mailboxes if m.group == group}
        for _row in range(MAX_ROWS_PER_ATTEMPT):
            self.mail.put_back.last_s, self.mail.started.last_asked = None, ()
            report = agent.send_one(self.mail.ledger, self.name)
            if report is None:
                return None  # nothing due in this group
            if report.kind is ReportKind.SENT:
                delivery = self.mail.recorder.deliveries[-1]
                assert delivery.message_id == report.message_id, "the server's last message is not this send"
                send = self._log_send(now, report.message_id, report.source_ip, delivery.rcpt)
                self.in_flight = InFlight(send, now + self.rng.uniform(*self.send_seconds), delivery)
                return None
            if report.kind is not ReportKind.BLOCKED:
                # Settled without a send (failed, suppressed, cancelled...): the ledger has its outcome; go on.
                self.log.skips.append(events.Skip(now, self.name, f"row-{report.kind}"))
                continue
            self.log.skips.append(events.Skip(now, self.name, _blocked_code(report.detail)))
            asked: set[str] = set(self.mail.started.last_asked)
            if asked and asked < group_mailboxes:
                continue  # only the row's pinned mailbox is blocked: its row waits, another may go
            # The group is blocked as a whole (its mailboxes, or its campaign's daily cap): it waits what the
            # agent asked.
            delay = self.mail.put_back.last_s
            return delay if delay else NO_RETRY_HINT_S
        return MIN_RETRY_S

    def finish(self) -> None:
        """The worker is free again."""
        assert self.in_flight is not None
        self.in_flight = None

    def _log_send(self, now: float, message_id: str | None, source_ip: str | None, address: str) -> events.Send:
        reservation, lease = self.mail.started.last_reservation, self.mail.sources.last_lease
        assert reservation is not None and lease is not None
        send = events.Send(now, self.name, self.host, reservation.mailbox, reservation.day, reservation.count,
                           reservation.cap, lease.public_ip, lease.slot, lease.generation, lease.reason, message_id,
                           source_ip, address)
        self.log.sends.append(send)
        return send

    def _start_mailboxes(self, now: float) -> None:
        """Put each mailbox under the guard once its start date has come in its own timezone."""
        for mailbox in self.mailboxes:
            if mailbox.address in self._added:
                continue
            if mailbox.address.lower() in self.mail.started.started:
                # Another worker put it under the guard already: asking Redis again, once per worker and mailbox,
                # cost a fleet of 100 workers and 400 mailboxes 40,000 round trips for nothing.
                self._added.add(mailbox.address)
                continue
            local_day = datetime.fromtimestamp(now, tz=ZoneInfo(mailbox.timezone)).date()
            if mailbox.start > local_day:
                continue
            if not self.mail.guard.knows(mailbox.address):
                self.mail.guard.add_mailbox(mailbox.address, start=mailbox.start, group=mailbox.group,
                                            timezone=mailbox.timezone, domain=mailbox.domain, now=now)
            self.mail.started.start(mailbox.address)
            self._added.add(mailbox.address)


def _blocked_code(detail: str) -> str:
    """The outcome code of a row the agent put back: the guard's status (`skipped-cooldown ...`). A row outside its
    lead's sending window is never claimed (the ledger's claim passes over it), so it is no skip."""
    return detail.split(" ", 1)[0]
