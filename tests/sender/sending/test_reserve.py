"""The reservation step (sender.sending.reserve), with no service: the guard's pick is a fake that answers as told
and records what it was asked; what a row holds after it (`Held`) is undone and finished through a fake guard."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from sender.ledger.store import Claimed, Ledger
from sender.sending.report import GiveBack
from sender.sending.reserve import PAUSED_DELAY_S, UNAVAILABLE_DELAY_S, Held, Reserver
from sender.sending.windows import Pace
from tests.sender.sending.fakes import BOX, FakeGuard, FakeLedger, InlineExecutor, claimed, lease, reservation
from warmup import Answer, CampaignSlot, Decision
from warmup.errors import UnknownMailbox, WarmupConfigError, WarmupUnavailable

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
GROUPS = {"sales": ("a@sender.example", "b@sender.example"), "support": ("c@sender.example",)}
SLOT = CampaignSlot("q1", "2026-03-10", 50, 7, 0)
PACE = Pace(SLOT, 3600.0)


class FakePick:
    """The guard's pick: each call takes the next answer (a Decision, or an exception to raise)."""

    def __init__(self, *answers: Decision | Exception) -> None:
        self.answers = list(answers)
        self.asked: list[tuple[tuple[str, ...], CampaignSlot | None, float | None]] = []

    def __call__(self, addresses: Sequence[str], /, *, campaign: CampaignSlot | None = None,
                 window_left_s: float | None = None) -> Decision:
        self.asked.append((tuple(addresses), campaign, window_left_s))
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def reserver(pick: FakePick, rebuilt: list[str] | None = None, rebuild_fails: Exception | None = None,
             pace: Pace = PACE) -> Reserver:
    def rebuild(ledger: Ledger, group: str) -> None:
        if rebuilt is not None:
            rebuilt.append(group)
        if rebuild_fails is not None:
            raise rebuild_fails

    def paced(ledger: Ledger, row: Claimed, now: datetime) -> Pace:
        return pace

    return Reserver(FakeGuard([]).as_guard(), GROUPS, paced, rebuild, pick)


def reserve(pick: FakePick, **fields: Any) -> Any:
    """The reservation held, or the GiveBack."""
    rebuilt = fields.pop("rebuilt", None)
    fails = fields.pop("rebuild_fails", None)
    got = reserver(pick, rebuilt, fails).reserve(FakeLedger().as_ledger(), claimed(5, **fields), NOW)
    return got.reservation if isinstance(got, Held) else got


def reserved(mailbox: str = "a@sender.example") -> Decision:
    return Decision(Answer.RESERVED, mailbox, reservation(mailbox))


def test_a_row_reserves_among_its_groups_mailboxes_with_its_campaigns_pace() -> None:
    pick = FakePick(reserved())
    assert reserve(pick) == reservation("a@sender.example")
    assert pick.asked == [(GROUPS["sales"], SLOT, 3600.0)]


def test_a_later_step_reserves_only_the_mailbox_its_thread_is_pinned_to() -> None:
    pick = FakePick(reserved("b@sender.example"))
    assert reserve(pick, pinned_mailbox="b@sender.example") == reservation("b@sender.example")
    assert pick.asked[0][0] == ("b@sender.example",)


def test_a_pin_to_a_mailbox_this_agent_lacks_waits_without_asking_the_guard() -> None:
    pick = FakePick()
    back = reserve(pick, pinned_mailbox="gone@sender.example")
    assert back == GiveBack(PAUSED_DELAY_S, "waiting for mailbox gone@sender.example, which this agent does not "
                                            "send from")
    assert pick.asked == []


def test_a_group_this_agent_has_no_mailbox_of_waits() -> None:
    back = reserve(FakePick(), group="billing")
    assert back == GiveBack(PAUSED_DELAY_S, "no mailbox of group billing on this agent",
                            detail="no mailbox in group billing")
    assert back.report(5).detail == "no mailbox in group billing"


def test_a_mailbox_set_up_wrong_waits_with_the_guards_words() -> None:
    back = reserve(FakePick(WarmupConfigError("mailbox a@sender.example: start date in the future")))
    assert back == GiveBack(PAUSED_DELAY_S, "mailbox a@sender.example: start date in the future")


def test_mailboxes_redis_lost_are_rebuilt_from_the_ledger_and_picked_again() -> None:
    rebuilt: list[str] = []
    pick = FakePick(UnknownMailbox("a@sender.example", "add it"), reserved())
    assert reserve(pick, rebuilt=rebuilt) == reservation("a@sender.example")
    assert rebuilt == ["sales"] and len(pick.asked) == 2


def test_a_rebuild_redis_cannot_answer_waits_briefly_with_nothing_in_the_history() -> None:
    back = reserve(FakePick(UnknownMailbox("a@sender.example", "add it")), rebuilt=[],
                   rebuild_fails=WarmupUnavailable("redis down"))
    assert back == GiveBack(UNAVAILABLE_DELAY_S, "", detail="redis down")


def test_a_rebuild_the_inventory_refuses_waits_as_paused() -> None:
    back = reserve(FakePick(UnknownMailbox("a@sender.example", "add it")), rebuilt=[],
                   rebuild_fails=WarmupConfigError("start date in the future"))
    assert back == GiveBack(PAUSED_DELAY_S, "start date in the future")


def test_a_skip_waits_as_long_as_the_guard_says() -> None:
    back = reserve(FakePick(Decision(Answer.SKIPPED_COOLDOWN, "a@sender.example", retry_after_s=42.4, reason="gap")))
    assert back == GiveBack(42.4, "", detail="skipped-cooldown (gap) for 42s")


def test_a_skip_already_over_goes_back_at_once() -> None:
    back = reserve(FakePick(Decision(Answer.SKIPPED_COOLDOWN, None, retry_after_s=-3.0)))
    assert isinstance(back, GiveBack) and back.delay_s == 0.0


def test_a_pause_without_an_end_waits_the_paused_delay_and_redis_down_the_short_one() -> None:
    paused = reserve(FakePick(Decision(Answer.SKIPPED_PAUSED, None, reason="paused")))
    assert paused == GiveBack(PAUSED_DELAY_S, "", detail="skipped-paused (paused) for 300s")
    down = reserve(FakePick(Decision(Answer.SKIPPED_UNAVAILABLE, None, retry_after_s=60.0)))
    assert isinstance(down, GiveBack) and down.delay_s == UNAVAILABLE_DELAY_S


def test_a_reservation_given_back_before_the_attempt_started_is_cancelled_once() -> None:
    calls: list[tuple[Any, ...]] = []
    held = Held(FakeGuard(calls).as_guard(), reservation())
    assert held.undo()
    assert not held.undo()
    assert calls == [("cancel", BOX, None)]


def test_the_lease_is_released_after_any_end_and_only_an_accepted_send_confirms() -> None:
    calls: list[tuple[Any, ...]] = []
    for accepted in (False, True):
        held = Held(FakeGuard(calls).as_guard(), reservation())
        held.lease = lease(calls)
        held.accepted = accepted
        held.finish(InlineExecutor(calls))
    assert calls == [("side task", "_finish"), ("release", "10.0.0.5"),
                     ("side task", "_finish"), ("confirm", BOX), ("release", "10.0.0.5")]


def test_nothing_leased_nothing_to_finish() -> None:
    calls: list[tuple[Any, ...]] = []
    Held(FakeGuard(calls).as_guard(), reservation()).finish(InlineExecutor(calls))
    assert calls == []
