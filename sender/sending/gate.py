"""The checks of a claimed row before any mailbox is reserved: that no earlier attempt of it started, and that its step
can be written (its Subject and body composed). Its lead's sending window is not checked here: the claim took the row
only inside it (sender.ledger.window_intervals)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from sender.campaigns.template import TemplateError
from sender.ledger.store import Claimed, Ledger, Settle
from sender.sending.compose import Content, compose
from sender.sending.message import unsubscribe_url
from sender.sending.persist import Persisting
from sender.sending.report import Report, ReportKind, Stop
from sender.sending.tokens import make_token
from sender.sending.windows import Windows


@dataclass(frozen=True)
class Ready:
    """A row that may go: the time it was checked at, its one-click unsubscribe link and its content."""

    now: datetime
    unsubscribe: str
    content: Content


class Gate:
    """The checks before the reservation, shared by an agent's worker threads."""

    def __init__(self, windows: Windows, clock: Callable[[], float], unsubscribe_key: bytes,
                 unsubscribe_base_url: str, persist: Persisting) -> None:
        self._windows = windows
        self._clock = clock
        self._key = unsubscribe_key
        self._base_url = unsubscribe_base_url
        self._persist = persist

    def check(self, ledger: Ledger, row: Claimed) -> Ready | Stop:
        """`row` ready to go now, or why not: settled (an earlier attempt started; nothing can be composed)."""
        if row.attempt_id is not None:
            # An earlier attempt started and nobody knows how it ended: finish the writes, never send.
            status = self._persist(ledger, lambda: ledger.settle(row.id, Settle.UNCONFIRMED,
                                                                 "redelivered after an attempt had started"))
            return Report(row.id, ReportKind.CRASH, f"settled as {status}")
        now = datetime.fromtimestamp(self._clock(), UTC)
        url = unsubscribe_url(self._base_url, make_token(self._key, row.idempotency_key))
        try:
            content = compose(row, url, self._windows.tracking(ledger, row), self._key)
        except (TemplateError, ValueError) as exc:  # a lead that cannot fill its step: nothing can be sent
            why = f"cannot compose: {exc}"
            status = self._persist(ledger, lambda: ledger.settle(row.id, Settle.FAILED, why))
            return Report(row.id, ReportKind.settled(status), why)
        return Ready(now, url, content)
