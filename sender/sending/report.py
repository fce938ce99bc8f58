"""What one pass of the send path says about its row (`Report`), and the one way a step says "not now" (`GiveBack`).

Each step of the path (sender.sending.agent) returns what the next step needs, or a stop: a `GiveBack` (the row goes
back to the queue unsent: the agent's one give-back path writes it) or a `Report` (the step has already settled the
row, or the ledger did).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class Report:
    """What one pass of the send path did to one row."""

    row: int
    kind: str  # sent | unconfirmed | retry | failed | suppressed | rerouted | blocked | lost | crash
    detail: str = ""
    mailbox: str | None = None
    source_ip: str | None = None
    unreachable: bool = False  # the submission server could not be reached or its certificate did not verify
    message_id: str | None = None  # the row's fixed Message-ID, once its attempt started
    login_failed: bool = False  # the submission server refused our login, offered none, or dropped us during it
    until: datetime | None = None  # a row put back (blocked): until when, when known


@dataclass(frozen=True)
class GiveBack:
    """A claimed row going back to the queue unsent: due again in `delay_s`, `reason` in its history ("" for none).
    `kind` and `detail` are its report's (`detail` None: the reason); `mailbox` the one it was reserved on."""

    delay_s: float
    reason: str
    kind: str = "blocked"
    detail: str | None = None
    mailbox: str | None = None
    login_failed: bool = False

    def report(self, row: int, until: datetime | None = None) -> Report:
        return Report(row, self.kind, self.reason if self.detail is None else self.detail, self.mailbox,
                      login_failed=self.login_failed, until=until)


Stop = GiveBack | Report  # what a step returns instead of its product when the row goes no further
