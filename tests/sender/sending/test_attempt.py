"""The attempt step (sender.sending.attempt), with no service: the ledger, the guard, the token keeper and the
session's opener are fakes at their boundaries; side tasks run inline."""

from __future__ import annotations

from datetime import UTC, datetime
from email.message import EmailMessage
from typing import Any, cast

import pytest

from sender.oauth import TokenKeeper, TokenUnavailable
from sender.sending.attempt import Attempt, Attempts
from sender.sending.compose import compose
from sender.sending.report import GiveBack, Report
from sender.sending.reserve import Held
from sender.sending.submission import Result, ResultKind, Stage, SubmissionSession
from sendhost.errors import SecretUnavailable
from tests.sender.sending.fakes import BOX, FakeGuard, FakeLedger, InlineExecutor, claimed, lease, mailbox, reservation
from warmup import FailureClass

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
ROW = claimed(9, subject="Hello", body="Hi there")
CONTENT = compose(ROW, "https://u.example.test/u/t")


class FakeTokens:
    """The token keeper: the mailbox's secret, or the error it is told to raise."""

    def __init__(self, error: Exception | None = None) -> None:
        self.error = error

    def secret(self, credential: Any) -> str:
        if self.error is not None:
            raise self.error
        return "pw"


class FakeSession(SubmissionSession):
    """An opened session with no server behind it: what it was handed, whether it was closed."""

    def __init__(self, calls: list[tuple[Any, ...]]) -> None:  # no smtplib client
        self.calls = calls

    def hand_over(self, message: EmailMessage, rcpt: str) -> Result:
        self.calls.append(("hand_over", message["Message-ID"], message["From"], rcpt))
        return Result(ResultKind.ACCEPTED, Stage.DONE, 250, "ok")

    def close(self) -> None:
        self.calls.append(("close",))


class World:
    def __init__(self, tokens: FakeTokens | None = None, opened: Result | None = None) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.ledger = FakeLedger(self.calls)
        self.held = Held(FakeGuard(self.calls).as_guard(), reservation())
        self.held.lease = lease(self.calls)
        self.opened = opened

        def opener(keeper: Any, server: Any, secret: str, *, source_ip: str | None, timeout_s: float) -> Any:
            self.calls.append(("open", server.host, secret, source_ip, timeout_s))
            return self.opened if self.opened is not None else FakeSession(self.calls)

        self.attempts = Attempts({BOX: mailbox()}, cast(TokenKeeper, tokens or FakeTokens()),
                                 InlineExecutor(self.calls), lambda held: "192.0.2.8", opener, 7.0)

    def start(self) -> Attempt | GiveBack | Report:
        return self.attempts.start(self.ledger.as_ledger(), ROW, self.held, CONTENT)


def test_the_attempt_starts_from_the_leases_address_with_the_rows_fixed_message_id_and_subject() -> None:
    world = World()
    attempt = world.start()
    assert isinstance(attempt, Attempt)
    assert (attempt.mailbox.address, attempt.source_ip, attempt.message_id) == (BOX, "192.0.2.8",
                                                                                 "<fixed@sender.example>")
    opened, begun = world.calls[1], world.calls[2]
    assert opened == ("open", "smtp.sender.example", "pw", "192.0.2.8", 7.0)
    assert begun[:4] == ("begin_attempt", 9, BOX, "192.0.2.8") and begun[5] == "Hello"
    assert world.held.attempt_started and not world.held.cancelled


def test_the_submission_hands_over_the_message_with_the_stored_message_id() -> None:
    world = World()
    attempt = world.start()
    assert isinstance(attempt, Attempt)
    result = attempt.submit(ROW, CONTENT, "https://u.example.test/u/t", NOW)
    assert result.kind is ResultKind.ACCEPTED
    assert world.calls[-1] == ("hand_over", "<fixed@sender.example>", BOX, "to@lead.example")


def test_a_session_that_did_not_open_is_the_submissions_result() -> None:
    refused = Result(ResultKind.REJECTED, Stage.AUTH, 535, "bad login")
    attempt = World(opened=refused).start()
    assert isinstance(attempt, Attempt)
    assert attempt.submit(ROW, CONTENT, "u", NOW) is refused


@pytest.mark.parametrize(("answer", "kind"), [("suppressed", "suppressed"), ("ended", "cancelled"),
                                              ("lost", "lost")])
def test_a_row_the_last_check_stops_costs_only_a_quit_and_frees_the_reservation(answer: str, kind: str) -> None:
    world = World()
    world.ledger.begin = (answer, None)
    stop = world.start()
    assert stop == Report(9, kind, answer, BOX)
    assert [c[0] for c in world.calls] == ["side task", "open", "begin_attempt", "close", "cancel"]
    assert world.held.cancelled and not world.held.attempt_started
    assert not world.held.undo()  # nothing is given back twice


def test_a_token_endpoint_that_cannot_answer_gives_the_row_back_for_its_delay_and_the_reservation_free() -> None:
    world = World(FakeTokens(TokenUnavailable("token endpoint unreachable", refused=False, delay_s=60.0)))
    stop = world.start()
    assert stop == GiveBack(60.0, f"mailbox {BOX}: token endpoint unreachable",
                            detail="token endpoint unreachable", mailbox=BOX, login_failed=False)
    assert world.calls == [("cancel", BOX, None)]  # no session opened, no attempt begun


def test_a_refused_grant_says_the_login_failed() -> None:
    stop = World(FakeTokens(TokenUnavailable("grant refused", refused=True, delay_s=0.0))).start()
    assert isinstance(stop, GiveBack) and stop.login_failed and stop.report(9).login_failed


def test_a_secret_that_cannot_be_read_reroutes_the_row_and_disconnects_the_mailbox() -> None:
    world = World(FakeTokens(SecretUnavailable("BOX_PASSWORD is not set")))
    stop = world.start()
    assert stop == GiveBack(0.0, f"mailbox {BOX}: BOX_PASSWORD is not set", kind="rerouted",
                            detail="BOX_PASSWORD is not set", mailbox=BOX)
    assert world.calls == [("cancel", BOX, FailureClass.ACCOUNT_AUTH)]


def test_a_failing_attempt_start_closes_the_session_and_leaves_the_undo_to_the_path() -> None:
    world = World()

    def fails(*args: Any) -> Any:
        raise RuntimeError("the ledger broke")

    world.ledger.begin_attempt = fails  # type: ignore[method-assign]
    with pytest.raises(RuntimeError):
        world.start()
    assert world.calls[-1] == ("close",)
    assert world.held.undo()  # the reservation is cancelled by the path's undo
    assert world.calls[-1] == ("cancel", BOX, None)


def test_a_started_attempt_is_never_undone() -> None:
    world = World()
    world.start()
    assert not world.held.undo()
    assert "cancel" not in [c[0] for c in world.calls]
