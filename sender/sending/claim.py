"""The claim step, and the record of a send that claims the worker's next row in the same round trip.

A row claimed ahead is kept per worker and taken by its next claim (a killed agent leaves it `sending` without an
attempt: the sweep requeues it); a stopping worker gives it back (`Claims.ahead`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from sender.ledger.store import Claimed, Ledger
from sender.sending.persist import Persisting

log = logging.getLogger("sendhost.sender")


class Claims:
    """Claims rows of `groups` (a later step only when its mailbox is among `mailboxes`) for an agent's workers."""

    def __init__(self, groups: Sequence[str], mailboxes: Sequence[str]) -> None:
        self._groups = list(groups)
        self._mailboxes = list(mailboxes)
        # worker -> the row its last send's record claimed in the same round trip, sent next
        self._ahead: dict[str, Claimed] = {}

    def next(self, ledger: Ledger, worker: str) -> Claimed | None:
        """The worker's row claimed ahead, else one due row claimed now; None when no row is due."""
        ahead = self._ahead.pop(worker, None)
        claimed = [ahead] if ahead is not None else ledger.claim(worker, 1, self._groups, self._mailboxes)
        return claimed[0] if claimed else None

    def ahead(self, worker: str) -> Claimed | None:
        """Take the worker's row claimed ahead (a stopping worker gives it back)."""
        return self._ahead.pop(worker, None)

    def record(self, ledger: Ledger, row: Claimed, reply: str, worker: str | None,
               persist: Persisting) -> None:
        """Record the send and, in the same round trip, claim `worker`'s next row (kept for its next claim).
        The record never depends on the claim: if the pair fails for any reason, the record alone is retried
        through `persist`."""
        if worker is not None:
            try:
                _recorded, ahead = ledger.record_sent_and_claim(row.id, reply, worker, self._groups,
                                                                self._mailboxes)
            except Exception as exc:  # whatever undid the pair (it is one transaction), the record goes on alone
                log.warning("sender: recording with the next claim failed, recording alone: %s", exc)
            else:
                if ahead is not None:
                    self._ahead[worker] = ahead
                return
        persist(ledger, lambda: ledger.record_sent(row.id, reply))
