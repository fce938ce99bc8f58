"""The agent's lines (sender.sending.activity), with no service: its reports given, its clock driven."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest

from sender.sending.activity import Activity
from sender.sending.report import Report, ReportKind


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_summary_line_once_a_minute_while_idle(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    activity = Activity(logging.getLogger("test.activity"), clock)
    caplog.set_level(logging.INFO, "test.activity")
    activity.row(Report(1, ReportKind.SENT, "250 OK", "a@x.example", "10.0.0.5"), None)
    activity.row(Report(2, ReportKind.BLOCKED, "skipped-cooldown", until=datetime(2026, 3, 10, 12, tzinfo=UTC)), None)
    activity.idle(30.0)
    clock.now += 59
    activity.idle(30.0)
    assert [r.getMessage() for r in caplog.records] == [
        "sent row 1 via a@x.example from 10.0.0.5: 250 OK",
        "put back row 2 until 2026-03-10T12:00:00+00:00: skipped-cooldown"]
    clock.now += 1
    activity.idle(300.0)
    clock.now += 60
    activity.idle(None)
    assert [r.getMessage() for r in caplog.records[2:]] == [
        "idle: in the last 60 s 1 sent, 1 put back, 0 other; next row due in 5 min",
        "idle: in the last 60 s 0 sent, 0 put back, 0 other; no row queued"]

