"""The guard's half of a campaign's pace and of the stalled follow-ups (sender.guard_view), with no service: the
guard is a fake at its boundary answering what Redis would (warmup.mailboxes.MailboxStatus)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, date, datetime
from typing import cast
from zoneinfo import ZoneInfo

from sender.campaigns.spec import CampaignSpec, load_applied
from sender.guard_view import campaign_reader, campaign_view, mailbox_states
from sender.ledger.cap_wait import NOT_GUARDED, GuardView
from warmup import Guard
from warmup.errors import WarmupUnavailable
from warmup.mailboxes import MailboxConfig, MailboxStatus
from warmup.schedule import Ramp

BERLIN, TOKYO = ZoneInfo("Europe/Berlin"), ZoneInfo("Asia/Tokyo")
A, B, C, PINNED = "a@sender.example", "b@sender.example", "c@sender.example", "p@sender.example"
NOW = datetime(2026, 3, 10, 12, 0, tzinfo=BERLIN)
DAY_ENDS = datetime(2026, 3, 11, 0, 0, tzinfo=BERLIN)


def spec(per_mailbox: int | None = 3) -> CampaignSpec:
    cap = "" if per_mailbox is None else f"max_per_mailbox_per_day: {per_mailbox}\n"
    return load_applied("q1", f"name: q1\ngroup: default\nsteps:\n  - subject: Hi\n    body: Hello\n"
                              f"timezone: Europe/Berlin\n{cap}")


def status(address: str, state: str = "ready", *, reserved: int = 0, cap: int = 10, group: str = "default",
           next_eligible: datetime | None = None) -> MailboxStatus:
    return MailboxStatus(address, group, date(2026, 3, 10), 9, cap, reserved, state, None, next_eligible, "closed",
                         0, 0, reserved)


class Counts:
    """The guard at its boundary: the campaign's counts on its day, the mailboxes it holds, their time zones."""

    def __init__(self, *statuses: MailboxStatus, sent_today: int = 0, shares: dict[str, int] | None = None,
                 down: bool = False) -> None:
        self.statuses = {s.address: s for s in statuses}
        self.sent_today, self.shares, self.down = sent_today, shares or {}, down
        self.asked: list[tuple[str, str, str]] = []

    def campaign_counts(self, group: str, name: str, day: str) -> tuple[int, dict[str, int]]:
        if self.down:
            raise WarmupUnavailable("Redis at 127.0.0.1:6379 did not answer in 5s")
        self.asked.append((group, name, day))
        return self.sent_today, self.shares

    def knows(self, address: str) -> bool:
        return address in self.statuses

    def status(self, addresses: Iterable[str] | None = None, now: float | None = None) -> list[MailboxStatus]:
        return [self.statuses[a] for a in addresses] if addresses else list(self.statuses.values())

    def settings(self, address: str) -> MailboxConfig:
        return MailboxConfig(address, "default", "sender.example", "Asia/Tokyo", date(2026, 1, 1), 0, (0, 0), Ramp())


def view(guard: Counts, group: Iterable[str] | None = (A, B), pinned: Iterable[str] = (), *,
         per_mailbox: int | None = 3) -> GuardView:
    return campaign_view(cast(Guard, guard), spec(per_mailbox), group, pinned, NOW, DAY_ENDS)


def test_the_campaigns_count_is_read_on_its_own_day() -> None:
    guard = Counts(status(A), status(B), sent_today=7)
    assert view(guard).sent_today == 7
    assert guard.asked == [("default", "q1", "2026-03-10")]


def test_a_mailbox_with_room_frees_nothing() -> None:
    days = view(Counts(status(A, reserved=9), status(B))).mailboxes
    assert days[A].frees is None and (days[A].state, days[A].reserved, days[A].cap) == ("ready", 9, 10)


def test_a_mailbox_at_its_daily_limit_frees_when_the_guard_says() -> None:
    at = datetime(2026, 3, 11, 0, 0, tzinfo=UTC)
    days = view(Counts(status(A, "daily-limit", reserved=10, next_eligible=at), status(B))).mailboxes
    assert days[A].frees == at


def test_a_mailbox_whose_reservations_reached_its_cap_frees_at_its_own_local_midnight() -> None:
    days = view(Counts(status(A, "cooldown", reserved=10), status(B))).mailboxes
    assert days[A].frees == datetime(2026, 3, 11, 0, 0, tzinfo=TOKYO)  # the guard holds it in Tokyo's time


def test_a_mailbox_at_the_campaigns_share_frees_when_the_campaigns_day_ends() -> None:
    days = view(Counts(status(A), status(B), shares={A: 3, B: 2})).mailboxes
    assert (days[A].frees, days[A].campaign) == (DAY_ENDS, 3)
    assert (days[B].frees, days[B].campaign) == (None, 2)
    assert view(Counts(status(A), shares={A: 30}), per_mailbox=None).mailboxes[A].frees is None


def test_a_mailbox_held_by_both_caps_frees_when_the_later_one_does() -> None:
    early = datetime(2026, 3, 10, 15, 0, tzinfo=UTC)
    days = view(Counts(status(A, "daily-limit", reserved=10, next_eligible=early), shares={A: 3})).mailboxes
    assert days[A].frees == DAY_ENDS


def test_a_mailbox_not_under_the_guard_is_said_so() -> None:
    days = view(Counts(status(A)), group=(A, "New@Sender.example")).mailboxes
    assert days["new@sender.example"].state == NOT_GUARDED and days["new@sender.example"].in_group


def test_a_pinned_mailbox_outside_the_group_is_read_and_marked_so() -> None:
    days = view(Counts(status(A), status(PINNED)), group=(A,), pinned=(PINNED,)).mailboxes
    assert sorted(days) == [A, PINNED] and days[A].in_group and not days[PINNED].in_group


def test_with_no_group_given_the_group_is_the_mailboxes_the_guard_holds_in_it() -> None:
    days = view(Counts(status(A), status(C, group="other")), group=None).mailboxes
    assert sorted(days) == [A]


def test_the_reader_answers_why_when_redis_cannot_be_read() -> None:
    read = campaign_reader(cast(Guard, Counts(down=True)), spec(), (A,))
    assert read(NOW, DAY_ENDS) == "Redis at 127.0.0.1:6379 did not answer in 5s"
    ok = campaign_reader(cast(Guard, Counts(status(A), sent_today=2)), spec(), (A,))(NOW, DAY_ENDS)
    assert isinstance(ok, GuardView) and ok.sent_today == 2


def test_mailbox_states_are_those_the_guard_holds() -> None:
    guard = Counts(status(A, "paused"))
    assert mailbox_states(cast(Guard, guard), [A, B], None) == {A: guard.statuses[A]}
    assert mailbox_states(cast(Guard, guard), [B], None) == {}
