"""Follow-ups stalled behind their mailbox (sender.ledger.stalled), with no service: the ledger's `pinned_due` rows
and the guard's mailbox states are given. tests/sender/sending/test_stalled_followups.py has them as a real agent
leaves them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

import pytest

from sender.ledger.stalled import DISCONNECTED, PAUSED, MailboxState, Stalled, stalled_followups
from sender.ledger.store import Ledger
from warmup.errors import WarmupUnavailable

A, B, C = "a@sender.example", "b@sender.example", "c@sender.example"
NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)


def at(hour: int) -> datetime:
    return datetime(2026, 3, 10, hour, 0, tzinfo=UTC)


@dataclass(frozen=True)
class State:
    state: str
    reason: str | None = None
    breaker: str = "closed"


class Pinned:
    """The ledger at its boundary: its clock and the `pinned_due` rows (campaign, mailbox, rows, due since)."""

    def __init__(self, *rows: tuple[str, str, int, datetime]) -> None:
        self.rows = list(rows)
        self.asked: dict[str, Any] = {}

    def now(self) -> datetime:
        return NOW

    def fetch_all(self, name: str, params: dict[str, Any], what: str) -> list[tuple[Any, ...]]:
        assert name == "pinned_due"
        self.asked = params
        return [row for row in self.rows if params["name"] in (None, row[0])]


def stalled(ledger: Pinned, states: Mapping[str, MailboxState], campaign: str | None = None,
            asked: list[tuple[Sequence[str], float | None]] | None = None) -> list[Stalled]:
    def states_of(mailboxes: Sequence[str], now: float | None) -> Mapping[str, MailboxState]:
        if asked is not None:
            asked.append((list(mailboxes), now))
        return {m: states[m] for m in mailboxes if m in states}
    return stalled_followups(cast(Ledger, ledger), states_of, campaign)


def test_only_rows_behind_a_paused_mailbox_are_stalled() -> None:
    ledger = Pinned(("q1", A, 2, at(9)), ("q1", B, 1, at(8)), ("q1", C, 4, at(7)))
    found = stalled(ledger, {A: State("paused", "spam rate 0.31%"), B: State("cooldown")})
    assert found == [Stalled("q1", A, 2, at(9), PAUSED, "spam rate 0.31%")]  # C: not under the guard


def test_a_pause_for_a_lost_login_is_a_disconnection() -> None:
    ledger = Pinned(("q1", A, 1, at(9)), ("q1", B, 1, at(9)))
    found = stalled(ledger, {A: State("paused", "disconnected: 535 authentication failed"),
                             B: State("paused", None, breaker="disconnected")})
    assert [(s.mailbox, s.state, s.reason) for s in found] == [
        (A, DISCONNECTED, "disconnected: 535 authentication failed"), (B, DISCONNECTED, "")]


def test_the_oldest_comes_first_then_by_campaign_and_mailbox() -> None:
    ledger = Pinned(("q2", A, 1, at(9)), ("q1", B, 1, at(9)), ("q1", A, 1, at(9)), ("q3", A, 1, at(6)))
    found = stalled(ledger, {A: State("paused"), B: State("paused")})
    assert [(s.campaign, s.mailbox) for s in found] == [("q3", A), ("q1", A), ("q1", B), ("q2", A)]


def test_the_guard_is_asked_once_for_each_mailbox_at_the_ledgers_clock() -> None:
    asked: list[tuple[Sequence[str], float | None]] = []
    ledger = Pinned(("q1", B, 1, at(9)), ("q2", B, 1, at(9)), ("q1", A, 1, at(9)))
    stalled(ledger, {}, "q1", asked)
    assert ledger.asked == {"name": "q1"}
    assert asked == [([A, B], NOW.timestamp())]


def test_redis_unread_passes_through() -> None:
    def down(mailboxes: Sequence[str], now: float | None) -> Mapping[str, MailboxState]:
        raise WarmupUnavailable("Redis did not answer")
    with pytest.raises(WarmupUnavailable):
        stalled_followups(cast(Ledger, Pinned(("q1", A, 1, at(9)))), down)


def test_the_advice_names_the_commands() -> None:
    paused, lost = Stalled("q1", A, 1, at(9), PAUSED, "spam"), Stalled("q1", A, 1, at(9), DISCONNECTED, "x")
    assert paused.advice().startswith(f"once its cause is fixed, `sendhost warmup resume {A}`; or `sendhost campaign "
                                      f"reassign q1 --from {A} --to OTHER_BOX`")
    assert lost.advice().startswith("fix its login, then `sendhost warmup resume")
