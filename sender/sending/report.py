"""What one pass of the send path says about its row (`Report`, its kind a `ReportKind`), and the one way a step says
"not now" (`GiveBack`).

Each step of the path (sender.sending.agent) returns what the next step needs, or a stop: a `GiveBack` (the row goes
back to the queue unsent: the agent's one give-back path writes it) or a `Report` (the step has already settled the
row, or the ledger did).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from sender.ledger.store import Status


class ReportKind(StrEnum):
    """What one pass of the send path did to a row: the word of its activity line and of `sender run`'s counts.

    A row the ledger settled is reported by the status the ledger settled it to (`settled`): those members are the
    ledger's `Status` values, taken from it, not spelled a second time; they include the statuses past the handoff,
    which the settle's rank guard returns when a relay's event came first. The last four are the agent's own words,
    for what a status does not say."""

    SENT = Status.SENT.value
    RETRY = Status.RETRY.value
    FAILED = Status.FAILED.value
    UNCONFIRMED = Status.UNCONFIRMED.value
    SUPPRESSED = Status.SUPPRESSED.value
    CANCELLED = Status.CANCELLED.value
    DELIVERED = Status.DELIVERED.value
    REPLIED = Status.REPLIED.value
    BOUNCED = Status.BOUNCED.value
    UNSUBSCRIBED = Status.UNSUBSCRIBED.value
    COMPLAINED = Status.COMPLAINED.value
    REROUTED = "rerouted"  # the mailbox's fault: due again soon through another mailbox (its status: retry)
    BLOCKED = "blocked"  # given back unsent (a `GiveBack`): due again later, nothing attempted
    LOST = "lost"  # the attempt could not start: the row was no longer this worker's, or waits for an earlier step
    CRASH = "crash"  # claimed again after an earlier attempt of it started: settled without sending it again

    @classmethod
    def settled(cls, status: Status) -> ReportKind:
        """The kind of a row the ledger settled to `status` (never waiting, queued or sending: no settle ends
        there)."""
        return cls(status.value)


@dataclass(frozen=True)
class Report:
    """What one pass of the send path did to one row. `lead` (the caller's id, if any), `address` and `step` are the
    claimed row's, for its activity line (sender.sending.activity): the agent names them on every report it returns
    (`Agent.send_one`)."""

    row: int
    kind: ReportKind
    detail: str = ""
    mailbox: str | None = None
    source_ip: str | None = None
    unreachable: bool = False  # the submission server could not be reached or its certificate did not verify
    message_id: str | None = None  # the row's fixed Message-ID, once its attempt started
    login_failed: bool = False  # the submission server refused our login, offered none, or dropped us during it
    until: datetime | None = None  # a row put back (blocked): until when, when known
    lead: str | None = None
    address: str | None = None
    step: int | None = None


@dataclass(frozen=True)
class GiveBack:
    """A claimed row going back to the queue unsent: due again in `delay_s`, `reason` in its history ("" for none).
    `kind` and `detail` are its report's (`detail` None: the reason); `mailbox` the one it was reserved on."""

    delay_s: float
    reason: str
    kind: ReportKind = ReportKind.BLOCKED
    detail: str | None = None
    mailbox: str | None = None
    login_failed: bool = False

    def report(self, row: int, until: datetime | None = None) -> Report:
        return Report(row, self.kind, self.reason if self.detail is None else self.detail, self.mailbox,
                      login_failed=self.login_failed, until=until)


Stop = GiveBack | Report  # what a step returns instead of its product when the row goes no further
