"""Fakes at the send path's boundaries, for the steps' unit tests (no service): the ledger's agent calls, the warm-up
guard's cancel and confirm, a lease, an executor that runs its task at once. Each records what it was asked, in
order, in one shared `calls` list, so a test can assert the order across them."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from concurrent.futures import Executor, Future
from datetime import date
from typing import Any, TypeVar, cast

from ippool import Lease
from sender.ledger.store import Claimed, Ledger, Settle, Status
from sendhost.model import Credential, Mailbox, Submission
from warmup import FailureClass, Guard, Reservation

T = TypeVar("T")

BOX = "box@sender.example"


def claimed(row_id: int = 7, **fields: Any) -> Claimed:
    """A row as the claim builds it: an enqueued row to to@lead.example unless `fields` say otherwise."""
    values: dict[str, Any] = {"id": row_id, "lead": "lead-1", "step": 1, "address": "to@lead.example",
                              "group": "sales", "subject": "Hi", "body": "Hello", "attempts": 0,
                              "idempotency_key": uuid.UUID(int=row_id), "message_id": None, "attempt_id": None}
    values.update(fields)
    return Claimed(**values)


def reservation(mailbox: str = BOX, group: str = "sales") -> Reservation:
    return Reservation("token-1", mailbox, group, "2026-03-02", 1, 10, 0)


def mailbox(address: str = BOX) -> Mailbox:
    credential = Credential(address, password_env="BOX_PASSWORD")
    return Mailbox(address, "sender.example", date(2026, 1, 1),
                   smtp=Submission("smtp.sender.example", 587, "starttls", address, credential))


class FakeLedger:
    """The ledger's calls the send path makes, answered from what the test sets; every call recorded."""

    def __init__(self, calls: list[tuple[Any, ...]] | None = None) -> None:
        self.calls = calls if calls is not None else []
        self.due: list[Claimed] = []  # what `claim` hands out, in order
        self.begin = ("ok", "<fixed@sender.example>")  # begin_attempt's answer
        self.status = Status.RETRY  # settle's answer
        self.next_claimed: Claimed | None = None  # what record_sent_and_claim claims next
        self.pair_fails: Exception | None = None  # raised by record_sent_and_claim

    def as_ledger(self) -> Ledger:
        return cast(Ledger, self)

    def claim(self, worker: str, limit: int = 1, groups: Any = None, mailboxes: Any = None) -> list[Claimed]:
        self.calls.append(("claim", worker, list(groups or ()), list(mailboxes or ())))
        return [self.due.pop(0)] if self.due else []

    def unclaim(self, email_id: int, delay_s: float = 0.0, why: str = "") -> bool:
        self.calls.append(("unclaim", email_id, delay_s, why))
        return True

    def settle(self, email_id: int, outcome: Settle, detail: str, delay_s: float = 0.0) -> Status:
        self.calls.append(("settle", email_id, outcome, detail, delay_s))
        return self.status

    def begin_attempt(self, email_id: int, attempt: uuid.UUID, mailbox: str, source_ip: str | None,
                      message_id: str, subject: str | None = None) -> tuple[str, str | None]:
        self.calls.append(("begin_attempt", email_id, mailbox, source_ip, message_id, subject))
        return self.begin

    def record_sent(self, email_id: int, reply: str) -> bool:
        self.calls.append(("record_sent", email_id, reply))
        return True

    def record_sent_and_claim(self, email_id: int, reply: str, worker: str, groups: Any = None,
                              mailboxes: Any = None) -> tuple[bool, Claimed | None]:
        self.calls.append(("record_sent_and_claim", email_id, reply, worker))
        if self.pair_fails is not None:
            raise self.pair_fails
        return True, self.next_claimed

    def reconnect(self) -> None:
        self.calls.append(("reconnect",))


class FakeGuard:
    """The warm-up guard's settling calls, recorded."""

    def __init__(self, calls: list[tuple[Any, ...]]) -> None:
        self.calls = calls

    def as_guard(self) -> Guard:
        return cast(Guard, self)

    def cancel(self, reservation: Reservation, failure: FailureClass | None = None) -> None:
        self.calls.append(("cancel", reservation.mailbox, failure))

    def confirm(self, reservation: Reservation) -> bool:
        self.calls.append(("confirm", reservation.mailbox))
        return True


class FakeReleaser:
    """What a lease releases itself through (ippool.Pool's `_release`), recorded."""

    def __init__(self, calls: list[tuple[Any, ...]]) -> None:
        self.calls = calls

    def _release(self, lease: Lease) -> None:
        self.calls.append(("release", lease.source_ip))


def lease(calls: list[tuple[Any, ...]], source_ip: str | None = "10.0.0.5") -> Lease:
    return Lease(cast(Any, FakeReleaser(calls)), "host-1", source_ip=source_ip, public_ip="198.51.100.5", slot=0,
                 member="m1", generation=1, ttl_s=60.0)


def write_now(ledger: Ledger, write: Callable[[], T]) -> T:
    """`persist` for a ledger that never goes away: the write, once."""
    return write()


class InlineExecutor(Executor):
    """Runs each task when it is submitted, in the caller's thread, and records that it did."""

    def __init__(self, calls: list[tuple[Any, ...]] | None = None) -> None:
        self.calls = calls if calls is not None else []

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        self.calls.append(("side task", getattr(fn, "__name__", repr(fn))))
        future: Future[T] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # the future holds it, as a thread pool's would
            future.set_exception(exc)
        return future
