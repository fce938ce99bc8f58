"""Sender workers: each receives leads and queues them in the send ledger; to send, it runs the sender agent's real
send path once (claim a due row → `Guard.pick` → `Pool.lease` → the last suppression check → SMTP submission
bound to the lease's source address → the send record), then stays busy for a while before its next send."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from zoneinfo import ZoneInfo

from sendhost.model import Mailbox
from simulation import events
from simulation.mail import MailWorld

NO_RETRY_HINT_S = 3600.0  # paused mailboxes give no retry time: look again in an hour
MIN_RETRY_S = 1.0
LEAD_DOMAIN = "leads.example"  # RFC 2606: never a real recipient


@dataclass
class InFlight:
    """A worker busy after a send, until `done_at`."""

    message_id: str | None
    done_at: float


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
    backlog_limit: int
    pending: int = 0
    in_flight: InFlight | None = None
    leads: int = 0
    _added: set[str] = field(default_factory=set)

    def lead_arrives(self) -> None:
        """A new lead to mail, queued in the ledger for one group; past `backlog_limit` (a day's worth) waiting,
        the lead is dropped."""
        if self.pending >= self.backlog_limit:
            return
        self.leads += 1
        tag = self.name.replace("/", "-")
        lead = f"{tag}-{self.leads}"
        self.mail.ledger.enqueue(lead=lead, step=1, to=f"{lead}@{LEAD_DOMAIN}", group=self.rng.choice(self.mail.groups),
                                 subject="A question", text=f"Hello {lead}, a short note from the simulation.")
        self.pending += 1

    def attempt(self) -> float | None:
        """Try to send one queued row now. Returns when to try again (None: nothing queued, or a send went out
        and `finish` will be called at its `done_at`)."""
        if self.pending == 0 or self.in_flight is not None:
            return None
        now = self.clock()
        self._start_mailboxes(now)
        retry: float | None = None
        due = False
        for group in self.mail.groups:
            self.mail.put_back.last_s = None
            report = self.mail.agents[(self.host, group)].send_one(self.mail.ledger, self.name)
            if report is None:
                continue  # nothing due in this group
            due = True
            if report.kind == "sent":
                self._log_send(now, report.message_id, report.source_ip)
                self.in_flight = InFlight(report.message_id, now + self.rng.uniform(*self.send_seconds))
                return None
            status = report.detail.split(" ", 1)[0] if report.kind == "blocked" else report.kind
            self.log.skips.append(events.Skip(now, self.name, status))
            delay = self.mail.put_back.last_s
            wait = delay if delay else NO_RETRY_HINT_S
            retry = wait if retry is None else min(retry, wait)
        if not due:
            self.pending = 0  # other workers sent what this one queued
            return None
        return now + max(MIN_RETRY_S, retry if retry is not None else NO_RETRY_HINT_S)

    def finish(self) -> None:
        """The worker is free again."""
        assert self.in_flight is not None
        self.in_flight = None
        self.pending = max(0, self.pending - 1)

    def _log_send(self, now: float, message_id: str | None, source_ip: str | None) -> None:
        reservation, lease = self.mail.started.last_reservation, self.mail.sources.last_lease
        assert reservation is not None and lease is not None
        self.log.sends.append(events.Send(
            now, self.name, self.host, reservation.mailbox, reservation.day, reservation.count, reservation.cap,
            lease.public_ip, lease.slot, lease.generation, lease.reason, message_id, source_ip))

    def _start_mailboxes(self, now: float) -> None:
        """Put each mailbox under the guard once its start date has come in its own timezone."""
        for mailbox in self.mailboxes:
            if mailbox.address in self._added:
                continue
            local_day = datetime.fromtimestamp(now, tz=ZoneInfo(mailbox.timezone)).date()
            if mailbox.start > local_day:
                continue
            if not self.mail.guard.knows(mailbox.address):
                self.mail.guard.add_mailbox(mailbox.address, start=mailbox.start, group=mailbox.group,
                                            timezone=mailbox.timezone, domain=mailbox.domain, now=now)
            self.mail.started.start(mailbox.address)
            self._added.add(mailbox.address)
