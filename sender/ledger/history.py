"""The ledger's history by month (schema version 13): sender_events and sender_send_log are partitioned by month,
made ahead here so that no send lands in the DEFAULT partition, and retired a whole month at a time.

What retiring drops is each month's history entries and send-log entries; what it keeps forever is the rows, their
leads, sender_sent (a send's time and mailbox, which the sequence rules read), the suppressions, the feedback and
the counters (`sendhost sender status` counts a retired entry as before)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING

import psycopg

from sender.errors import SenderError
from sender.ledger import connection as db
from sender.ledger.queries import query
from sendhost.errors import OperationFailed

if TYPE_CHECKING:
    from sender.ledger.store import Ledger

RETIRE_TIMEOUT_MS = 30 * 60 * 1000  # a person's command, once in a while, reading whole months


class HistoryInUse(SenderError, OperationFailed):
    """A month to retire holds the history of a row still `sending` or `unconfirmed`: nothing was dropped. Exit 1."""

    exit_code = 1


@dataclass(frozen=True)
class Retired:
    history: str  # sender_events | sender_send_log
    month: date   # the first day of the UTC month dropped
    entries: int


def month_start(day: date) -> date:
    """The first day of `day`'s month: what `--before` is rounded down to."""
    return day.replace(day=1)


def make_partitions(ledger: Ledger) -> int:
    """Make the history's month partitions through two months ahead of the ledger's now (and a month for any row
    that landed in DEFAULT, moved into it): how many were made. Idempotent; two callers at once take turns."""
    return int(ledger.fetch_value("make_partitions", {}, "make history partitions"))


def retire_history(ledger: Ledger, before: date) -> list[Retired]:
    """Drop every whole month of history before `before` (a month's first day), all months or none: HistoryInUse
    names the first month that holds the history of a row still sending or unconfirmed."""
    if before != month_start(before):
        raise ValueError(f"{before} is not the first day of a month")
    start = datetime(before.year, before.month, 1, tzinfo=UTC)
    make_partitions(ledger)  # entries that landed in DEFAULT go to their months first, to be retired with them
    with ledger.calling("retire history") as conn, db.transaction(conn):
        # counting what a month held reads all of it: longer than the ledger's statements may take
        db.set_local_timeout(conn, RETIRE_TIMEOUT_MS)
        try:
            rows = conn.execute(query("retire_history"), {"before": start}).fetchall()
        except psycopg.errors.ObjectInUse as exc:  # an OperationalError, which `calling` would call unavailable
            raise HistoryInUse(f"{exc.diag.message_primary}: nothing dropped; settle them first (`sendhost sender "
                               "unconfirmed`, `sendhost sender sweep`)") from None
    return [Retired(history, month.astimezone(UTC).date(), int(entries)) for history, month, entries in rows]
