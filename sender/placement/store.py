"""Placement tests in the ledger (version 19): a test, its messages queued for the agent, and their results."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb

from sender.ledger.store import Ledger
from sender.placement.verdicts import Verdicts


@dataclass(frozen=True)
class Send:
    """One placement message as the ledger has it now: its row's status and, once accepted, when."""

    token: str
    mailbox: str
    seed: str
    provider: str
    placement: str
    status: str | None  # the row's status; None: refused at enqueue (`placement` says not_sent)
    accepted_at: datetime | None
    last_error: str | None
    detail: str


def begin(ledger: Ledger, *, wait_s: float, campaign: str | None, step: int | None) -> int:
    return int(ledger.fetch_value("placement_begin", {"wait_s": int(wait_s), "campaign": campaign, "step": step},
                                  "placement test"))


def enqueue(ledger: Ledger, test: int, *, token: str, mailbox: str, group: str, seed: str, provider: str,
            subject: str, body: str, fields: dict[str, str] | None = None) -> str:
    """Queue one message for the agent, pinned to `mailbox`; `queued` or `suppressed` (recorded not_sent).
    `fields`: the seed's merge fields, when `subject` and `body` are a campaign step's templates."""
    outcome, _email_id = ledger.fetch_value("placement_enqueue", {
        "test": test, "token": token, "mailbox": mailbox, "group": group, "seed": seed, "provider": provider,
        "subject": subject, "body": body, "fields": None if fields is None else Jsonb(fields)},
        f"placement message from {mailbox} to {seed}")
    return str(outcome)


def sends(ledger: Ledger, test: int) -> list[Send]:
    return [Send(*row) for row in ledger.fetch_all("placement_sends", {"test": test}, "placement test's sends")]


def record(ledger: Ledger, token: str, placement: str, *, folder: str | None = None, category: str | None = None,
           found_after_s: float | None = None, verdicts: Verdicts | None = None, detail: str = "") -> None:
    v = verdicts or Verdicts()
    params: dict[str, Any] = {
        "token": token, "placement": placement, "folder": folder, "category": category,
        "found_after_s": found_after_s, "spf": v.spf, "dkim": v.dkim, "dkim_domain": v.dkim_domain,
        "dmarc": v.dmarc, "arc": v.arc, "auth_results": v.header, "detail": detail}
    ledger.fetch_one("placement_record", params, f"placement result {token}")


def finish(ledger: Ledger, test: int) -> None:
    ledger.fetch_one("placement_finish", {"test": test}, "placement test")


@dataclass(frozen=True)
class Result:
    """One (mailbox, seed) result of a test, as kept."""

    test: int
    mailbox: str
    seed: str
    provider: str
    placement: str
    folder: str | None
    category: str | None
    found_after_s: float | None
    spf: str | None
    dkim: str | None
    dkim_domain: str | None
    dmarc: str | None
    arc: str | None
    auth_results: str | None
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {"test": self.test, "mailbox": self.mailbox, "seed": self.seed, "provider": self.provider,
                "placement": self.placement, "folder": self.folder, "category": self.category,
                "found_after_s": self.found_after_s, "spf": self.spf, "dkim": self.dkim,
                "dkim_domain": self.dkim_domain, "dmarc": self.dmarc, "arc": self.arc,
                "authentication_results": self.auth_results, "detail": self.detail}


def results(ledger: Ledger, test: int) -> list[Result]:
    return [Result(*row) for row in ledger.fetch_all("placement_results", {"test": test}, "placement results")]
