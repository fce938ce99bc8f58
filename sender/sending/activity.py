"""What the running agent says it does (issue 43): a line per send and per put-back, a summary per idle minute.

At INFO on the logger `sendhost.sender.activity` (`sendhost sender run` shows it by default; `--quiet` or
`--log-level warning` silence it; under systemd each line goes to the journal):
- `sent row 42 (lead crm-4127, step 2) via alice@example.com from 203.0.113.7: 250 2.0.0 OK` (the caller's id)
- `put back row 43 (ann@acme.example, step 1) until 2026-12-14T09:00:00+01:00: outside the sending window ...`
- `retry row 44 (..., step 1) via ... from ...: 451 4.3.0 try later` (and so for every other outcome)
- `idle: in the last 60 s 3 sent, 2 put back, 0 other; next row due in 4 min` once a minute while nothing is due.
The lines come from one place, what the send path reports for each row (sender.sending.report.Report), so the
send path itself logs nothing more for them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime

from sender.sending.report import Report, ReportKind

log = logging.getLogger("sendhost.sender.activity")
SUMMARY_EVERY_S = 60.0


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class Activity:
    """The agent's lines, shared by its worker threads."""

    def __init__(self, logger: logging.Logger = log, clock: Callable[[], float] = time.monotonic,
                 every_s: float = SUMMARY_EVERY_S) -> None:
        self._log = logger
        self._clock = clock
        self._every_s = every_s
        self._lock = threading.Lock()
        self._since = clock()
        self._counts = {"sent": 0, "put back": 0, "other": 0}

    def row(self, report: Report) -> None:
        """One line for what the send path did to one row (its lead, by the caller's id or else its address, and
        step when the report names them)."""
        lead = f"lead {report.lead}" if report.lead is not None else report.address
        who = f" ({lead}, step {report.step})" if lead is not None else ""
        if report.kind is ReportKind.BLOCKED:
            until = f" until {report.until.isoformat(timespec='seconds')}" if isinstance(report.until, datetime) \
                else ""
            self._log.info("put back row %d%s%s: %s", report.row, who, until, report.detail)
            counted = "put back"
        else:
            via = f" via {report.mailbox}" if report.mailbox else ""
            source = f" from {report.source_ip}" if report.source_ip else ""
            self._log.info("%s row %d%s%s%s: %s", report.kind, report.row, who, via, source, report.detail)
            counted = "sent" if report.kind is ReportKind.SENT else "other"
        with self._lock:
            self._counts[counted] += 1

    def idle(self, next_due_s: float | None) -> None:
        """Nothing was due: a summary line once a minute (`next_due_s`: when the next row is due; None: none)."""
        with self._lock:
            now = self._clock()
            if now - self._since < self._every_s:
                return
            counts, self._counts = self._counts, dict.fromkeys(self._counts, 0)
            elapsed, self._since = now - self._since, now
        due = "no row queued" if next_due_s is None else f"next row due in {_duration(max(next_due_s, 0.0))}"
        self._log.info("idle: in the last %s %d sent, %d put back, %d other; %s", _duration(elapsed), counts["sent"],
                       counts["put back"], counts["other"], due)
