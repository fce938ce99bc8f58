"""The attempt and its submission: the attempt's durable start beside the opening of its SMTP session
(`Attempts.start`, from what the reservation holds: sender.sending.reserve.Held), and the handover (`Attempt.submit`).

The durable start (with the last suppression check) and the opening of the session (connect, TLS, AUTH) run side by
side; nothing is handed over (MAIL FROM) until both are done, so a suppressed or lost row only costs a QUIT.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from datetime import datetime

from ippool import Lease
from sender.ledger.store import Claimed, Ledger
from sender.oauth import TokenKeeper, TokenUnavailable
from sender.sending.compose import Content
from sender.sending.message import build_message, message_id_for
from sender.sending.report import GiveBack, Report, ReportKind, Stop
from sender.sending.reserve import Held
from sender.sending.submission import Result, SubmissionSession
from sendhost.errors import SecretUnavailable
from sendhost.model import Mailbox, Submission
from warmup import FailureClass

log = logging.getLogger("sendhost.sender")

Opener = Callable[..., SubmissionSession | Result]  # sender.oauth.opening.open_refreshing's signature


def _close(opening: Future[SubmissionSession | Result]) -> None:
    """Wait for a session being opened and end it without handing anything over."""
    session = opening.result()
    if isinstance(session, SubmissionSession):
        session.close()


@dataclass(frozen=True)
class Attempt:
    """An attempt whose durable start is recorded: from `mailbox` and `source_ip`, its fixed Message-ID, its
    session opening (or the result of failing to open it)."""

    mailbox: Mailbox
    source_ip: str | None
    message_id: str
    opening: Future[SubmissionSession | Result]

    def submit(self, row: Claimed, content: Content, unsubscribe: str, now: datetime) -> Result:
        """Hand the message over in the opened session; the session's failure to open is the result."""
        session = self.opening.result()
        return session if isinstance(session, Result) else session.hand_over(
            build_message(mailbox=self.mailbox.address, to=row.address, subject=content.headers,
                          text=content.body, message_id=self.message_id, unsubscribe=unsubscribe, now=now,
                          open_image=content.open_image),
            row.address)


class Attempts:
    """Starts attempts: the mailbox's secret, its session opened in a side task, the attempt's durable start.
    `source_address` is the address a lease's send binds to; `opener` opens an authenticated session."""

    def __init__(self, mailboxes: Mapping[str, Mailbox], tokens: TokenKeeper, side_tasks: Executor,
                 source_address: Callable[[Lease], str | None], opener: Opener, smtp_timeout_s: float) -> None:
        self._mailboxes = mailboxes
        self._tokens = tokens
        self._side_tasks = side_tasks
        self._source_address = source_address
        self._opener = opener
        self._timeout_s = smtp_timeout_s

    def start(self, ledger: Ledger, row: Claimed, held: Held, content: Content) -> Attempt | Stop:
        """Start `row`'s attempt from what `held` holds, or say why it does not start (the reservation given
        back, the row given back or settled by the last check)."""
        assert held.lease is not None
        source_ip = self._source_address(held.lease)
        mailbox = self._mailboxes[held.reservation.mailbox]
        server = mailbox.smtp
        assert server is not None  # AgentSettings holds only mailboxes that submit
        secret = self._secret(held, mailbox, server)
        if isinstance(secret, GiveBack):
            return secret
        opening = self._side_tasks.submit(self._opener, self._tokens, server, secret, source_ip=source_ip,
                                          timeout_s=self._timeout_s)
        try:
            outcome, message_id = ledger.begin_attempt(
                row.id, uuid.uuid4(), mailbox.address, source_ip,
                message_id_for(row.idempotency_key, mailbox.address), content.headers.subject)
        except BaseException:
            _close(opening)
            raise
        if outcome != "ok" or message_id is None:
            _close(opening)
            held.cancel()
            kind = {"suppressed": ReportKind.SUPPRESSED, "ended": ReportKind.CANCELLED}.get(outcome, ReportKind.LOST)
            return Report(row.id, kind, outcome, mailbox.address)
        held.attempt_started = True
        return Attempt(mailbox, source_ip, message_id, opening)

    def _secret(self, held: Held, mailbox: Mailbox, server: Submission) -> str | GiveBack:
        try:
            return self._tokens.secret(server.credential)
        except TokenUnavailable as exc:
            # Nothing attempted, nothing failed: the row waits (a refused grant paused the mailbox, so another
            # one takes it; an unreachable token endpoint is retried later) and the mailbox stays connected.
            held.cancel()
            return GiveBack(exc.delay_s, f"mailbox {mailbox.address}: {exc}", detail=str(exc),
                            mailbox=mailbox.address, login_failed=exc.refused)
        except SecretUnavailable as exc:
            log.error("sender: mailbox %s cannot authenticate: %s", mailbox.address, exc)
            held.cancel(FailureClass.ACCOUNT_AUTH)
            return GiveBack(0.0, f"mailbox {mailbox.address}: {exc}", kind=ReportKind.REROUTED, detail=str(exc),
                            mailbox=mailbox.address)
