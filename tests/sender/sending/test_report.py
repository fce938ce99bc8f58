"""A step's stops (sender.sending.report): what a give-back reports about its row, and the kinds of a report."""

from __future__ import annotations

import pytest

from sender.ledger.store import Status
from sender.sending.report import GiveBack, Report, ReportKind


def test_a_give_back_reports_its_reason_unless_it_has_words_of_its_own() -> None:
    assert GiveBack(30.0, "outside the window").report(3) == Report(3, ReportKind.BLOCKED, "outside the window")
    assert GiveBack(5.0, "", detail="redis down").report(3) == Report(3, ReportKind.BLOCKED, "redis down")
    assert GiveBack(0.0, "why", kind=ReportKind.REROUTED, mailbox="b@x.example", login_failed=True).report(3) == \
        Report(3, ReportKind.REROUTED, "why", "b@x.example", login_failed=True)


def test_a_settled_row_is_reported_by_the_ledger_status_it_ended_in_word_for_word() -> None:
    # every status a settle can return: those it sets, and those past `sending` the rank guard leaves in place
    for status in set(Status) - {Status.WAITING, Status.QUEUED, Status.SENDING}:
        assert ReportKind.settled(status) == status.value
    with pytest.raises(ValueError):
        ReportKind.settled(Status.QUEUED)


def test_the_agents_own_kinds_are_the_only_ones_that_are_no_ledger_status() -> None:
    own = {kind for kind in ReportKind if kind.value not in {status.value for status in Status}}
    assert own == {ReportKind.REROUTED, ReportKind.BLOCKED, ReportKind.LOST, ReportKind.CRASH}
    assert f"{ReportKind.REROUTED} row" == "rerouted row" and str(ReportKind.SENT) == "sent"  # logs and JSON alike
