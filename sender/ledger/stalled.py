"""Follow-ups stalled behind their mailbox: for `campaign status` and `sender status`.

A later step goes only from the mailbox that sent the lead's step before (it is pinned to it: the thread stays one
sender's). While that mailbox is paused or disconnected in the warm-up guard, its due follow-ups are put back every
few minutes and nothing else can send them. Each (campaign, mailbox) of such rows is named with how many wait and
since when the oldest is due, so that a person fixes the mailbox (its login, then `sendhost warmup resume BOX`) or
moves its leads (`sendhost campaign reassign NAME --from BOX --to OTHER`). The rows come from the ledger (queries.sql
`pinned_due`), the mailboxes' states from the guard in Redis (read by the caller's `states_of`: sender.guard_view,
composed in sender.assembly, so that the ledger does not import the warm-up package): when it cannot be read, what
is stalled is unknown.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from sender.ledger.store import Ledger

PAUSED = "paused"
DISCONNECTED = "disconnected"


class MailboxState(Protocol):
    """What the guard says of a mailbox, as far as a stall needs it (warmup.mailboxes.MailboxStatus is one)."""

    @property
    def state(self) -> str: ...  # the guard's: ready | cooldown | daily-limit | paused | not-started
    @property
    def reason(self) -> str | None: ...  # why it is paused
    @property
    def breaker(self) -> str: ...  # closed | open | disconnected


# What reads the guard's state of some mailboxes at an instant (epoch seconds; None: the guard's own clock): those it
# holds, by address.
StatesRead = Callable[[Sequence[str], float | None], Mapping[str, MailboxState]]


@dataclass(frozen=True)
class Stalled:
    """Due follow-ups of one campaign that wait for one paused or disconnected mailbox."""

    campaign: str
    mailbox: str
    rows: int
    due_since: datetime  # when the oldest of them became due
    state: str  # PAUSED | DISCONNECTED
    reason: str  # the guard's pause reason

    def as_json(self) -> dict[str, object]:
        return {"campaign": self.campaign, "mailbox": self.mailbox, "rows": self.rows,
                "due_since": self.due_since.isoformat(), "state": self.state, "reason": self.reason}

    def advice(self) -> str:
        """What a person does about it, as commands."""
        fix = "fix its login, then" if self.state == DISCONNECTED else "once its cause is fixed,"
        return (f"{fix} `sendhost warmup resume {self.mailbox}`; or `sendhost campaign reassign {self.campaign} "
                f"--from {self.mailbox} --to OTHER_BOX` (the leads' next steps then come from another address, "
                "a new thread to them)")


def pinned_due(ledger: Ledger, campaign: str | None = None) -> list[tuple[str, str, int, datetime]]:
    """(campaign, mailbox, rows, due since) of the due follow-ups pinned to each mailbox, of `campaign` or all."""
    return [(str(name), str(mailbox), int(rows), since) for name, mailbox, rows, since in
            ledger.fetch_all("pinned_due", {"name": campaign}, "follow-ups due per mailbox")]


def stalled_followups(ledger: Ledger, states_of: StatesRead, campaign: str | None = None) -> list[Stalled]:
    """The due follow-ups of `campaign` (None: every campaign) whose mailbox the guard holds paused or
    disconnected, oldest first. What `states_of` raises (the guard unread) passes through."""
    due = pinned_due(ledger, campaign)
    mailboxes = sorted({mailbox for _name, mailbox, _rows, _since in due})
    states = states_of(mailboxes, _epoch(ledger))
    stalled = []
    for name, mailbox, rows, since in due:
        status = states.get(mailbox)
        if status is None or status.state != "paused":
            continue
        reason = status.reason or ""
        state = DISCONNECTED if reason.startswith("disconnected") or status.breaker == "disconnected" else PAUSED
        stalled.append(Stalled(name, mailbox, rows, since, state, reason))
    return sorted(stalled, key=lambda s: (s.due_since, s.campaign, s.mailbox))


def _epoch(ledger: Ledger) -> float | None:
    """The ledger's clock (a test's, the simulation's) for the guard's reading; None: the guard's own."""
    now = ledger.now()
    return None if now is None else now.timestamp()
