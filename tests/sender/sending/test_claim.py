"""The claim step (sender.sending.claim), with no service: the ledger is a fake at its boundary."""

from __future__ import annotations

from sender.sending.claim import Claims
from tests.sender.sending.fakes import FakeLedger, claimed, write_now

GROUPS, MAILBOXES = ["sales", "support"], ["a@sender.example", "b@sender.example"]


def test_a_claim_asks_for_one_row_of_the_agents_groups_and_mailboxes() -> None:
    ledger = FakeLedger()
    ledger.due = [claimed(1)]
    row = Claims(GROUPS, MAILBOXES).next(ledger.as_ledger(), "w:0")
    assert row is not None and row.id == 1
    assert ledger.calls == [("claim", "w:0", GROUPS, MAILBOXES)]


def test_nothing_due_is_none() -> None:
    assert Claims(GROUPS, MAILBOXES).next(FakeLedger().as_ledger(), "w:0") is None


def test_a_send_record_claims_the_workers_next_row_which_its_next_claim_takes_without_asking() -> None:
    ledger = FakeLedger()
    ledger.next_claimed = claimed(2)
    claims = Claims(GROUPS, MAILBOXES)
    claims.record(ledger.as_ledger(), claimed(1), "250 ok", "w:0", write_now)
    assert ledger.calls == [("record_sent_and_claim", 1, "250 ok", "w:0")]
    row = claims.next(ledger.as_ledger(), "w:0")
    assert row is not None and row.id == 2
    assert [c[0] for c in ledger.calls] == ["record_sent_and_claim"]  # no claim of its own
    assert claims.next(ledger.as_ledger(), "w:1") is None  # another worker's claim asks the ledger
    assert ledger.calls[-1][0] == "claim"


def test_a_failed_pair_records_the_send_alone() -> None:
    ledger = FakeLedger()
    ledger.pair_fails = RuntimeError("pipeline broke")
    ledger.next_claimed = claimed(2)
    claims = Claims(GROUPS, MAILBOXES)
    claims.record(ledger.as_ledger(), claimed(1), "250 ok", "w:0", write_now)
    assert ledger.calls == [("record_sent_and_claim", 1, "250 ok", "w:0"), ("record_sent", 1, "250 ok")]
    assert claims.ahead("w:0") is None


def test_a_stopping_worker_takes_its_row_claimed_ahead_once() -> None:
    ledger = FakeLedger()
    ledger.next_claimed = claimed(2)
    claims = Claims(GROUPS, MAILBOXES)
    claims.record(ledger.as_ledger(), claimed(1), "250 ok", "w:0", write_now)
    ahead = claims.ahead("w:0")
    assert ahead is not None and ahead.id == 2
    assert claims.ahead("w:0") is None
