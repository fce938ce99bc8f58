"""The settle step (sender.sending.settle), with no service: the ledger, the guard and the pool's retirement of a
blamed address are fakes at their boundaries. What each result means is sender.sending.outcomes' (test_outcomes);
here: what the step does with it, in which order, and what it reports."""

from __future__ import annotations

from typing import Any

from ippool import Lease
from sender.ledger.store import Claimed, Ledger, Settle, Status
from sender.sending.outcomes import BLAMED_KEPT, BLAMED_RETIRED
from sender.sending.report import Report
from sender.sending.settle import Settler
from sender.sending.submission import Result, ResultKind, Stage
from tests.sender.sending.fakes import BOX, FakeGuard, FakeLedger, claimed, lease, reservation, write_now
from warmup import FailureClass

ROW = claimed(4)
ACCEPTED = Result(ResultKind.ACCEPTED, Stage.DONE, 250, "2.0.0 queued as 1234")
BLAMED = Result(ResultKind.REJECTED, Stage.RCPT, 550,
                "5.7.1 Service unavailable; client host [10.0.0.5] blocked using Spamhaus")


class World:
    def __init__(self, retires: bool = True) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.ledger = FakeLedger(self.calls)
        self.retires = retires

        def retire_blamed(blamed: Lease) -> bool:
            self.calls.append(("retire_blamed", blamed.source_ip))
            return self.retires

        def checkpoint(name: str) -> None:
            self.calls.append(("checkpoint", name))

        self.settler = Settler(FakeGuard(self.calls).as_guard(), retire_blamed, 1800.0, write_now, checkpoint)

    def settle(self, result: Result, leased: Lease | None = None) -> Report:
        def record(ledger: Ledger, row: Claimed, reply: str) -> None:
            self.calls.append(("record", row.id, reply))

        return self.settler.settle(self.ledger.as_ledger(), ROW, reservation(), BOX, "192.0.2.8", result, record,
                                   "<fixed@sender.example>", leased)


def test_an_accepted_send_is_recorded_then_checkpointed_and_reported_sent() -> None:
    world = World()
    report = world.settle(ACCEPTED)
    assert report == Report(4, "sent", ACCEPTED.text, BOX, "192.0.2.8", message_id="<fixed@sender.example>")
    assert world.calls == [("record", 4, ACCEPTED.text), ("checkpoint", "recorded")]  # the guard confirms later


def test_a_retryable_refusal_settles_the_row_then_frees_the_reservation_with_its_class() -> None:
    world = World()
    world.ledger.status = Status.RETRY
    result = Result(ResultKind.REJECTED, Stage.MAIL, 451, "4.3.0 try again later")
    report = world.settle(result)
    assert world.calls == [("settle", 4, Settle.RETRY, str(result), 1800.0),
                           ("cancel", BOX, FailureClass.TRANSIENT)]
    assert report == Report(4, "retry", str(result), BOX, "192.0.2.8", False, login_failed=False)


def test_an_unknown_outcome_keeps_the_reservation() -> None:
    world = World()
    world.ledger.status = Status.UNCONFIRMED
    report = world.settle(Result(ResultKind.NO_REPLY, Stage.AFTER_DATA, None, "timed out"))
    assert [c[0] for c in world.calls] == ["settle"]
    assert report.kind == "unconfirmed"


def test_a_refused_login_reroutes_and_says_the_login_failed() -> None:
    world = World()
    world.ledger.status = Status.QUEUED
    report = world.settle(Result(ResultKind.REJECTED, Stage.AUTH, 535, "5.7.8 bad credentials"))
    assert world.calls[0][2] is Settle.REROUTE and world.calls[1] == ("cancel", BOX, FailureClass.ACCOUNT_AUTH)
    assert report.kind == "rerouted" and report.login_failed and not report.unreachable


def test_a_server_that_cannot_be_reached_is_reported_unreachable() -> None:
    world = World()
    report = world.settle(Result(ResultKind.NO_REPLY, Stage.CONNECT, None, "connection refused"))
    assert report.unreachable and not report.login_failed


def test_a_blamed_address_is_retired_before_the_row_goes_back_for_another() -> None:
    world = World(retires=True)
    report = world.settle(BLAMED, lease(world.calls))
    assert world.calls[0] == ("retire_blamed", "10.0.0.5")
    assert world.calls[1][:3] == ("settle", 4, Settle.REROUTE) and BLAMED_RETIRED in world.calls[1][3]
    assert world.calls[2] == ("cancel", BOX, None)  # the mailbox is not at fault
    assert report.kind == "rerouted"


def test_a_blamed_address_that_cannot_be_retired_makes_the_row_wait_as_a_retry() -> None:
    world = World(retires=False)
    world.ledger.status = Status.RETRY
    world.settle(BLAMED, lease(world.calls))
    assert world.calls[1][:3] == ("settle", 4, Settle.RETRY) and BLAMED_KEPT in world.calls[1][3]
    assert world.calls[1][4] == 1800.0


def test_a_blamed_address_with_no_lease_is_kept_and_nothing_retired() -> None:
    world = World()
    world.settle(BLAMED, None)
    assert world.calls[0][2] is Settle.RETRY and "retire_blamed" not in [c[0] for c in world.calls]
