"""A step's stops (sender.sending.report): what a give-back reports about its row."""

from __future__ import annotations

from sender.sending.report import GiveBack, Report


def test_a_give_back_reports_its_reason_unless_it_has_words_of_its_own() -> None:
    assert GiveBack(30.0, "outside the window").report(3) == Report(3, "blocked", "outside the window")
    assert GiveBack(5.0, "", detail="redis down").report(3) == Report(3, "blocked", "redis down")
    assert GiveBack(0.0, "why", kind="rerouted", mailbox="b@x.example", login_failed=True).report(3) == \
        Report(3, "rerouted", "why", "b@x.example", login_failed=True)
