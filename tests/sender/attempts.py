"""Rows in the states an attempt leaves them in, made the way the agent makes them: enqueued, claimed, the attempt
started through a mailbox (which fixes the row's Message-ID), then settled."""

from __future__ import annotations

import uuid

from sender import Ledger, Settle

SOURCE_IP = "192.0.2.7"


def enqueued(ledger: Ledger, lead: str, step: int = 1, address: str = "eve@rcpt.example") -> None:
    """`lead`'s `step` in the built-in `enqueue` campaign: queued, or waiting behind its earlier step."""
    assert ledger.enqueue(lead=lead, step=step, address=address, group="sales", subject="Hi", text="Hello") in (
        "queued", "waiting")


def attempted(ledger: Ledger, lead: str, outcome: Settle, detail: str, mailbox: str, delay_s: float = 0.0) -> \
        tuple[int, str]:
    """The due row of `lead` (its caller's id or its address) claimed, its attempt started through `mailbox`,
    settled `outcome` with the server's `detail`: (its id, its Message-ID). Claim each lead's row before the next
    lead's is queued."""
    (row,) = [r for r in ledger.claim("w", 100, ["sales"]) if lead in (r.lead, r.address)]
    started, message_id = ledger.begin_attempt(row.id, uuid.uuid4(), mailbox, SOURCE_IP,
                                               f"<{uuid.uuid4()}@sender.example>", "Hello")
    assert started == "ok" and message_id is not None
    ledger.settle(row.id, outcome, detail, delay_s)
    return row.id, message_id


def unconfirmed(ledger: Ledger, lead: str, mailbox: str, address: str = "eve@rcpt.example") -> tuple[int, str]:
    """A row of its own for `lead` whose attempt through `mailbox` ended unknown: (id, Message-ID)."""
    enqueued(ledger, lead, address=address)
    return attempted(ledger, lead, Settle.UNCONFIRMED, "timeout after DATA", mailbox)
