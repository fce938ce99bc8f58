"""Writing what already happened to a row, through a database restart: reconnect and retry for a while."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from typing import Protocol, TypeVar

from sender.errors import LedgerUnavailable
from sender.ledger.store import Ledger

log = logging.getLogger("sendhost.sender")

PERSIST_FOR_S = 600.0  # how long a worker keeps trying to write a send it made before leaving it to sweep

T = TypeVar("T")


def persist(ledger: Ledger, write: Callable[[], T], sleep: Callable[[float], None],
            monotonic: Callable[[], float] = time.monotonic) -> T:
    """`write()`, retried while the ledger is unavailable (backing off, reconnecting) for up to PERSIST_FOR_S."""
    deadline = monotonic() + PERSIST_FOR_S
    delay = 0.1
    while True:
        try:
            return write()
        except LedgerUnavailable as exc:
            if monotonic() > deadline:
                raise
            log.warning("sender: ledger write failed, retrying: %s", exc)
            sleep(delay)
            delay = min(delay * 2, 5.0)
            with contextlib.suppress(LedgerUnavailable):
                ledger.reconnect()


class Persisting(Protocol):
    """`persist` with its sleep given: what the steps that write an outcome take."""

    def __call__(self, ledger: Ledger, write: Callable[[], T], /) -> T: ...
