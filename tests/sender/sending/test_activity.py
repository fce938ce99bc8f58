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
    activity.row(Report(1, ReportKind.SENT, "250 OK", "a@x.example", "10.0.0.5", lead="eve@x.example", step=2))
    activity.row(Report(2, ReportKind.BLOCKED, "skipped-cooldown", until=datetime(2026, 3, 10, 12, tzinfo=UTC)))
    activity.idle(30.0)
    clock.now += 59
    activity.idle(30.0)
    assert [r.getMessage() for r in caplog.records] == [
        "sent row 1 (lead eve@x.example, step 2) via a@x.example from 10.0.0.5: 250 OK",
        "put back row 2 until 2026-03-10T12:00:00+00:00: skipped-cooldown"]
    clock.now += 1
    activity.idle(300.0)
    clock.now += 60
    activity.idle(None)
    assert [r.getMessage() for r in caplog.records[2:]] == [
        "idle: in the last 60 s 1 sent, 1 put back, 0 other; next row due in 5 min",
        "idle: in the last 60 s 0 sent, 0 put back, 0 other; no row queued"]


def test_every_other_outcome_is_a_line_of_its_kind_counted_as_other(caplog: pytest.LogCaptureFixture) -> None:
    activity = Activity(logging.getLogger("test.activity"), Clock(), every_s=0.0)
    caplog.set_level(logging.INFO, "test.activity")
    activity.row(Report(3, ReportKind.REROUTED, "535 5.7.8 bad login", "b@x.example", lead="ann@x.example", step=1))
    activity.idle(None)
    assert [r.getMessage() for r in caplog.records] == [
        "rerouted row 3 (lead ann@x.example, step 1) via b@x.example: 535 5.7.8 bad login",
        "idle: in the last 0 s 0 sent, 0 put back, 1 other; no row queued"]
