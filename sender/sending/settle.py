"""The settle step: what a submission's result does to the row (sender.sending.outcomes decides), to the mailbox's
reservation and to the address the lease gave, and the report of it."""

from __future__ import annotations

import logging
from collections.abc import Callable

from ippool import Lease
from sender.ledger.store import Claimed, Ledger, Settle
from sender.sending.outcomes import blamed_but_kept, decide
from sender.sending.persist import Persisting
from sender.sending.report import Report, ReportKind
from sender.sending.submission import Result, ResultKind, Stage
from warmup import FailureClass, Guard, Reservation

log = logging.getLogger("sendhost.sender")

Record = Callable[[Ledger, Claimed, str], None]  # record the send (sender.sending.claim.Claims.record)


class Settler:
    """Settles submitted rows. `retire_blamed(lease)` takes a blamed address out of service (ippool.Pool)."""

    def __init__(self, guard: Guard, retire_blamed: Callable[[Lease], bool], retry_delay_s: float,
                 persist: Persisting, checkpoint: Callable[[str], None]) -> None:
        self._guard = guard
        self._retire_blamed = retire_blamed
        self._retry_delay_s = retry_delay_s
        self._persist = persist
        self._checkpoint = checkpoint

    def settle(self, ledger: Ledger, row: Claimed, reservation: Reservation, mailbox: str, source_ip: str | None,
               result: Result, record: Record, message_id: str | None = None, lease: Lease | None = None) -> Report:
        """Record an accepted send (`record`), or settle the row as the result says and cancel the reservation
        unless the outcome keeps it."""
        outcome = decide(result, self._retry_delay_s)
        # Before the row goes back: its next claim must not lease the blamed address again. When that cannot be
        # (the host's primary address, Redis down) it waits as a retry does, or it would go straight back to it.
        if outcome.retire_source and (lease is None or not self._retire_blamed(lease)):
            outcome = blamed_but_kept(result, self._retry_delay_s)
        if outcome.settle is None:
            record(ledger, row, result.text)
            self._checkpoint("recorded")
            return Report(row.id, ReportKind.SENT, result.text, mailbox, source_ip, message_id=message_id)
        settle = outcome.settle
        status = self._persist(ledger, lambda: ledger.settle(row.id, settle, outcome.detail, outcome.delay_s))
        if not outcome.keep_reservation:
            self._guard.cancel(reservation, outcome.failure)
        if outcome.failure is not None and outcome.failure is not FailureClass.RECIPIENT:
            log.warning("sender: %s via %s: %s", row.address, mailbox, outcome.detail)
        kind = ReportKind.REROUTED if outcome.settle is Settle.REROUTE else ReportKind.settled(status)
        unreachable = result.kind is ResultKind.CERTIFICATE or (result.kind is ResultKind.NO_REPLY
                                                          and result.stage in (Stage.CONNECT, Stage.TLS))
        return Report(row.id, kind, outcome.detail, mailbox, source_ip, unreachable,
                      login_failed=result.stage is Stage.AUTH)
