"""Whether the README's promises held (simulation.promises): a clean made-up run keeps each, and each is reported
broken, with its figures, when the run's records break it."""

from __future__ import annotations

from datetime import timedelta

from simulation.promises import check_promises
from tests.simulation.runs import BUDGET, MONDAY, MadeRun

ALICE, BOB = "alice@example.com", "bob@example.com"


def _clean() -> MadeRun:
    """Three leads: two sequences of two steps (the second three days on, from the same mailbox), one of one."""
    run = MadeRun(days=7)
    run.send(ALICE, MONDAY, 10, "lead-1@leads.example")
    run.send(BOB, MONDAY, 11, "lead-2@leads.example")
    run.send(ALICE, MONDAY, 12, "lead-3@leads.example", slot=None, reason="no_slot")
    run.send(ALICE, MONDAY + timedelta(days=3), 10, "lead-1@leads.example", step=2)
    run.send(BOB, MONDAY + timedelta(days=3), 12, "lead-2@leads.example", step=2)
    return run


def _held(run: MadeRun) -> dict[str, bool]:
    return {promise.code: promise.held for promise in check_promises(run.result())}


def test_a_clean_run_keeps_every_promise_and_says_with_what() -> None:
    promises = {promise.code: promise for promise in check_promises(_clean().result())}
    assert list(promises) == ["no-eip-leaked", "ip-budget", "no-send-blocked", "mailbox-caps", "followups",
                              "sent-once"]
    assert all(promise.held for promise in promises.values()), promises
    assert promises["no-send-blocked"].figures == (
        "5 sends, each with an address: 4 on a slot's EIP, 1 on the host's primary address (the fallback: no_slot "
        "1); the server accepted 5")
    assert promises["followups"].figures.startswith("2 follow-ups sent, 0 before their step's delay, 0 from another "
                                                    "mailbox than step 1's; the soonest at 1.00 times its delay")
    assert promises["no-eip-leaked"].figures.startswith("pool reconcile at the end: no differences; 1 EIPs held at "
                                                        "the end (1 in slots, 0 parked)")


def test_a_reconcile_difference_breaks_the_eip_promise() -> None:
    run = _clean()
    run.reconcile = ["leaked sender-1 eipalloc-9 (198.51.100.9): tagged active but serves no slot"]
    [promise] = [p for p in check_promises(run.result()) if p.code == "no-eip-leaked"]
    assert not promise.held and "1 difference (first: leaked sender-1 eipalloc-9" in promise.figures


def test_an_address_past_its_budget_breaks_the_budget_promise() -> None:
    run = _clean()
    for n in range(BUDGET):
        run.send("carol@example.org", MONDAY, 13 + n * 0.2, f"lead-{10 + n}@leads.example")
    assert _held(run)["ip-budget"] is False


def test_a_send_without_an_address_breaks_the_blocked_promise() -> None:
    run = _clean()
    run.send(BOB, MONDAY, 14, "lead-4@leads.example", slot=None, reason=None)
    assert _held(run)["no-send-blocked"] is False


def test_a_mailbox_over_its_cap_breaks_the_cap_promise() -> None:
    run = _clean()
    for n in range(10):  # bob's first week: 10 a day, and it sent one on Monday already
        run.send(BOB, MONDAY, 13 + n * 0.2, f"lead-{20 + n}@leads.example")
    assert _held(run)["mailbox-caps"] is False


def test_a_follow_up_early_or_from_another_mailbox_breaks_the_follow_up_promise() -> None:
    early = MadeRun(days=7)
    early.send(ALICE, MONDAY, 10, "lead-1@leads.example")
    early.send(ALICE, MONDAY + timedelta(days=2), 10, "lead-1@leads.example", step=2)
    assert _held(early)["followups"] is False
    elsewhere = MadeRun(days=7)
    elsewhere.send(ALICE, MONDAY, 10, "lead-1@leads.example")
    elsewhere.send(BOB, MONDAY + timedelta(days=3), 10, "lead-1@leads.example", step=2)
    assert _held(elsewhere)["followups"] is False


def test_a_message_accepted_twice_breaks_the_once_promise() -> None:
    run = _clean()
    run.delivered.append(run.delivered[0])
    assert _held(run)["sent-once"] is False
