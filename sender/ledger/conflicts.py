"""Rows where a relay contradicts the agent: the agent saw the submission server refuse the message (a 554 at
DATA: the row ended `failed`, or it was never handed over: `suppressed`, `cancelled`), and a relay's webhook or a
report in the inbox later said `sent` or `delivered`. The ledger keeps the agent's answer (its rank guard: the
server's definite reply outranks a third party's report) and records the report; this lists them for a person
(`sendhost sender conflicts`), who checks the mailbox's Sent folder or the relay's log."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sender.ledger.store import Ledger


@dataclass(frozen=True)
class Conflict:
    row: int
    campaign: str
    lead: str | None  # the caller's id, if any
    step: int
    address: str
    mailbox: str | None
    status: str  # what the agent settled: failed | suppressed | cancelled
    last_error: str  # the agent's reason (the server's reply)
    reported: str  # what the report said: sent | delivered
    source: str  # who said it: webhook | inbox | ...
    reported_at: datetime
    detail: str

    def as_json(self) -> dict[str, object]:
        return {"row": self.row, "campaign": self.campaign, "lead": self.lead, "step": self.step,
                "address": self.address, "mailbox": self.mailbox, "status": self.status,
                "last_error": self.last_error, "reported": self.reported, "source": self.source,
                "reported_at": self.reported_at.isoformat(), "detail": self.detail}


def conflicts(ledger: Ledger) -> list[Conflict]:
    """Every report that contradicts a row the agent settled as not handed over, oldest first."""
    return [Conflict(*row) for row in ledger.fetch_all("conflict_rows", {}, "conflicting reports")]
