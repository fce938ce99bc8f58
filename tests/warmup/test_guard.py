"""The guard against a real Redis, one process: statuses, gap and jitter, days, cancel responses, failing closed."""

from __future__ import annotations

import itertools
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from tests.support.net import free_port
from tests.warmup.conftest import NOW
from warmup import FailureClass, Guard
from warmup.days import jitter_ms
from warmup.errors import UnknownMailbox, WarmupConfigError, WarmupUnavailable
from warmup.keys import GroupKeys

TODAY = date(2026, 11, 30)
WEEK_TWO = TODAY - timedelta(days=7)  # day 8 today: cap 15


def test_a_reservation_counts_as_sent_only_once_confirmed(guard: Guard) -> None:
    guard.add_mailbox("a@x.com", start=WEEK_TWO, min_gap_s=0, jitter_s=(0, 0), now=NOW)
    first = guard.reserve("a@x.com", now=NOW).reservation
    second = guard.reserve("a@x.com", now=NOW + 1).reservation
    assert first is not None and second is not None
    [status] = guard.status(["a@x.com"], now=NOW + 2)
    assert (status.reserved, status.sent) == (2, 0)
    assert guard.confirm(first, now=NOW + 3)
    assert not guard.confirm(first, now=NOW + 4)  # settled once: not counted twice
    guard.cancel(second, now=NOW + 5)
    [status] = guard.status(["a@x.com"], now=NOW + 6)
    assert (status.reserved, status.sent) == (1, 1)
    tomorrow = guard.status(["a@x.com"], now=NOW + 86400)[0]
    assert (tomorrow.reserved, tomorrow.sent) == (0, 0)


def test_reserve_counts_against_the_cap_and_confirm_keeps_it(guard: Guard) -> None:
    guard.add_mailbox("a@x.com", start=TODAY, min_gap_s=0, jitter_s=(0, 0), now=NOW)
    decisions = [guard.reserve("a@x.com", now=NOW + i) for i in range(11)]
    assert [d.status for d in decisions] == ["reserved"] * 10 + ["skipped-daily-limit"]
    assert [d.reservation.count for d in decisions[:10] if d.reservation] == list(range(1, 11))
    first = decisions[0].reservation
    assert first is not None and first.cap == 10 and first.day == "2026-11-30"
    assert guard.confirm(first, now=NOW + 20) is True
    assert guard.confirm(first, now=NOW + 21) is False  # already settled
    assert guard.reserve("a@x.com", now=NOW + 30).status == "skipped-daily-limit"
    # Retry after: the mailbox's next midnight (UTC here), 12 h after NOW.
    assert decisions[-1].retry_after_s == pytest.approx(12 * 3600 - 10)


def test_gap_plus_jitter_is_enforced_and_the_wait_is_stored(guard: Guard, guard_client: Any) -> None:
    guard.add_mailbox("a@x.com", start=WEEK_TWO, min_gap_s=420, jitter_s=(0, 90), now=NOW)
    state = GroupKeys("default").mailbox("a@x.com").state
    seed = str(guard_client.hget(state, "jitter_seed"))
    gap_ms = 420_000 + jitter_ms(seed, 1, 0, 90_000)  # drawn at the first reservation, for the gap after it
    assert guard.reserve("a@x.com", now=NOW).reserved
    assert guard_client.hget(state, "next_send_ms") == str(int(NOW * 1000) + gap_ms)
    just_before = guard.reserve("a@x.com", now=NOW + (gap_ms - 1) / 1000)
    assert just_before.status == "skipped-cooldown"
    assert just_before.retry_after_s == pytest.approx(0.001)
    [status] = guard.status(["a@x.com"], now=NOW + 1)
    assert status.next_eligible is not None and status.next_eligible.timestamp() * 1000 == int(NOW * 1000) + gap_ms
    assert guard.reserve("a@x.com", now=NOW + gap_ms / 1000).reserved


def test_jitter_is_drawn_per_send_and_spreads_over_its_range(guard: Guard, guard_client: Any) -> None:
    """200 sends under steady demand (a caller ready the moment the guard allows): every gap is the minimum plus
    the jitter predicted for that send, and the gaps spread across the whole jitter range."""
    from warmup.schedule import Ramp

    low_ms, high_ms = 10_000, 70_000
    guard.add_mailbox("a@x.com", start=TODAY - timedelta(days=60), min_gap_s=60, jitter_s=(10, 70),
                      ramp=Ramp(step=500, ceiling=1000), now=NOW)
    seed = str(guard_client.hget(GroupKeys("default").mailbox("a@x.com").state, "jitter_seed"))
    now_ms = int(NOW * 1000)
    sent: list[int] = []
    while len(sent) < 200:
        decision = guard.reserve("a@x.com", now=now_ms / 1000)
        if decision.reserved:
            sent.append(now_ms)
            continue
        assert decision.status == "skipped-cooldown", decision
        assert decision.retry_after_s is not None
        now_ms += round(decision.retry_after_s * 1000)
    jitters = [later - earlier - 60_000 for earlier, later in itertools.pairwise(sent)]
    assert jitters == [jitter_ms(seed, n, low_ms, high_ms) for n in range(1, 200)]
    assert all(low_ms <= j <= high_ms for j in jitters)
    assert len(set(jitters)) >= 190  # one per send, not one per day
    # Spread over the range: every sixth of it is hit, as 199 uniform draws all but surely do.
    sixths = {min(5, (j - low_ms) * 6 // (high_ms - low_ms)) for j in jitters}
    assert sixths == set(range(6))


def test_a_reserve_whose_now_lags_keeps_the_later_last_send(guard: Guard, guard_client: Any) -> None:
    """A caller whose clock lags another's never moves the last send (or the next eligible time) backwards: its
    reserve is refused until the later caller's gap has passed, and the state stays max(now, last)."""
    guard.add_mailbox("a@x.com", start=WEEK_TWO, min_gap_s=0, jitter_s=(0, 0), now=NOW)
    state = GroupKeys("default").mailbox("a@x.com").state
    assert guard.reserve("a@x.com", now=NOW + 60).reserved  # one caller's clock
    before = guard_client.hmget(state, "last_send_ms", "next_send_ms", "day_count")
    lagging = guard.reserve("a@x.com", now=NOW)  # another's, a minute behind
    assert lagging.status == "skipped-cooldown" and lagging.retry_after_s == 60
    assert guard_client.hmget(state, "last_send_ms", "next_send_ms", "day_count") == before
    assert before[:2] == [str(int((NOW + 60) * 1000))] * 2
    assert guard.reserve("a@x.com", now=NOW + 60).reserved  # the later clock goes on


def test_paused_mailbox_is_skipped_until_resumed(guard: Guard) -> None:
    guard.add_mailbox("a@x.com", start=TODAY, min_gap_s=0, jitter_s=(0, 0), now=NOW)
    guard.pause("a@x.com", "looking into\tcomplaints")
    skipped = guard.reserve("a@x.com", now=NOW)
    assert (skipped.status, skipped.retry_after_s, skipped.reason) == ("skipped-paused", None,
                                                                       "looking into\tcomplaints")
    guard.resume("a@x.com")
    assert guard.reserve("a@x.com", now=NOW).reserved


def test_a_rest_halves_the_ramp_until_lifted_and_survives_a_settings_update(guard: Guard) -> None:
    guard.add_mailbox("a@x.com", start=WEEK_TWO, min_gap_s=0, jitter_s=(0, 0), now=NOW)
    guard.rest("a@x.com", "placement: inbox share 0% at google over tests 1 is below 70%", now=NOW)
    assert guard.rest_reason("a@x.com") == "placement: inbox share 0% at google over tests 1 is below 70%"
    # the agent's settings cycle writes the mailbox again: the rest stays
    guard.add_mailbox("a@x.com", start=WEEK_TWO, min_gap_s=0, jitter_s=(0, 0), now=NOW + 1)
    assert guard.status(["a@x.com"], now=NOW + 2)[0].cap == 7  # 15 halved, rounded down
    reserved = [guard.reserve("a@x.com", now=NOW + 3 + n).reserved for n in range(9)]
    assert reserved == [True] * 7 + [False] * 2
    guard.lift_rest("a@x.com", now=NOW + 20)
    assert (guard.status(["a@x.com"], now=NOW + 21)[0].cap, guard.rest_reason("a@x.com")) == (15, None)
    guard.rest("a@x.com", "again", now=NOW + 22)
    guard.resume("a@x.com", now=NOW + 23)  # `warmup resume` lifts a rest too
    assert (guard.status(["a@x.com"], now=NOW + 24)[0].cap, guard.rest_reason("a@x.com")) == (15, None)


def test_a_mailbox_added_paused_reserves_nothing_until_resumed(guard: Guard) -> None:
    assert guard.add_mailbox("a@x.com", start=TODAY, min_gap_s=0, jitter_s=(0, 0), now=NOW, paused="rebuilding")
    skipped = guard.reserve("a@x.com", now=NOW)
    assert (skipped.status, skipped.reason) == ("skipped-paused", "rebuilding")
    guard.resume("a@x.com")
    assert guard.reserve("a@x.com", now=NOW).reserved


def test_the_rebuild_lock_is_one_holders_and_a_dead_holders_expires(guard: Guard,
                                                                    guard_client: Any) -> None:
    lock = GroupKeys("sales").rebuild_lock
    assert lock == "sendhost:sender:{sales}:rebuild"  # the name sender ACL users already grant
    waited: list[float] = []
    with guard.rebuilding("sales"):
        token = guard_client.get(lock)
        assert token
        # A second holder waits (here: sleeps, its sleep injected) until the first gives up or dies.
        with guard.rebuilding("sales", wait_s=0.2, sleep=waited.append):
            assert guard_client.get(lock) == token  # a live holder's lock is never taken over
        assert waited
    assert guard_client.get(lock) is None


def test_pick_takes_the_least_used_eligible_mailbox(guard: Guard) -> None:
    for address in ("a@x.com", "b@x.com", "c@x.com"):
        guard.add_mailbox(address, start=TODAY, min_gap_s=0, jitter_s=(0, 0), now=NOW)
    guard.reserve("a@x.com", now=NOW)
    guard.reserve("a@x.com", now=NOW)
    guard.reserve("b@x.com", now=NOW)
    guard.pause("c@x.com")
    picked = [guard.pick(["a@x.com", "b@x.com", "c@x.com"], now=NOW + i).mailbox for i in range(3)]
    assert picked == ["b@x.com", "a@x.com", "b@x.com"]


def test_pick_reports_the_soonest_available_when_none_is_eligible(guard: Guard) -> None:
    guard.add_mailbox("a@x.com", start=TODAY, min_gap_s=100, jitter_s=(0, 0), now=NOW)
    guard.add_mailbox("b@x.com", start=TODAY, min_gap_s=50, jitter_s=(0, 0), now=NOW)
    guard.reserve("a@x.com", now=NOW)
    guard.reserve("b@x.com", now=NOW)
    decision = guard.pick(["a@x.com", "b@x.com"], now=NOW + 10)
    assert (decision.status, decision.mailbox, decision.retry_after_s) == ("skipped-cooldown", "b@x.com", 40)


def test_pick_across_groups_is_refused(guard: Guard) -> None:
    guard.add_mailbox("a@x.com", start=TODAY, group="one", now=NOW)
    guard.add_mailbox("b@x.com", start=TODAY, group="two", now=NOW)
    with pytest.raises(WarmupConfigError, match="one group"):
        guard.pick(["a@x.com", "b@x.com"], now=NOW)


def test_week_one_mailbox_gets_ten_per_local_day_across_its_midnight(guard: Guard) -> None:
    tz = ZoneInfo("America/New_York")
    guard.add_mailbox("ny@x.com", start=TODAY, min_gap_s=0, jitter_s=(0, 0), timezone="America/New_York", now=NOW)
    midnight = datetime(2026, 12, 1, tzinfo=tz).timestamp()  # 05:00 UTC on Dec 1
    before = [guard.reserve("ny@x.com", now=midnight - 600 + i) for i in range(12)]
    after = [guard.reserve("ny@x.com", now=midnight + i) for i in range(12)]
    assert [d.status for d in before].count("reserved") == 10
    assert [d.status for d in after].count("reserved") == 10
    assert {d.reservation.day for d in before if d.reservation} == {"2026-11-30"}
    assert {d.reservation.day for d in after if d.reservation} == {"2026-12-01"}
    # A UTC day would have rolled over five hours earlier: still the New York day, still capped.
    assert guard.reserve("ny@x.com", now=midnight - 1).status == "skipped-daily-limit"


def test_schedule_past_its_written_horizon_is_extended_on_demand(guard: Guard) -> None:
    guard.add_mailbox("a@x.com", start=TODAY, min_gap_s=0, jitter_s=(0, 0), now=NOW)
    far = NOW + 200 * 86400  # beyond the 62 days written at add time
    decision = guard.reserve("a@x.com", now=far)
    assert decision.reserved and decision.reservation is not None
    assert decision.reservation.cap == 40
    assert decision.reservation.day == (TODAY + timedelta(days=200)).isoformat()


def test_now_before_the_start_date_reserves_nothing(guard: Guard) -> None:
    guard.add_mailbox("a@x.com", start=TODAY, now=NOW)
    decision = guard.reserve("a@x.com", now=NOW - 3 * 86400)
    assert decision.status == "skipped-not-started" and decision.reason == f"first sending day is {TODAY}"
    first_midnight = datetime(2026, 11, 30, tzinfo=UTC).timestamp()
    assert decision.retry_after_s == first_midnight - (NOW - 3 * 86400)


def test_a_mailbox_registered_ahead_of_its_first_day_waits_for_it(guard: Guard) -> None:
    start = TODAY + timedelta(days=100)  # beyond the written horizon, too
    assert guard.add_mailbox("a@x.com", start=start, min_gap_s=0, jitter_s=(0, 0), now=NOW)
    skipped = guard.reserve("a@x.com", now=NOW)
    assert skipped.status == "skipped-not-started" and skipped.reservation is None
    [status] = guard.status(["a@x.com"], now=NOW)
    assert (status.state, status.cap, status.day_number, status.sent) == ("not-started", 0, 0, 0)
    assert status.next_eligible == datetime(start.year, start.month, start.day, tzinfo=ZoneInfo("UTC"))
    first_day = NOW + 100 * 86400
    decision = guard.reserve("a@x.com", now=first_day)
    assert decision.reserved and decision.reservation is not None
    assert (decision.reservation.day, decision.reservation.cap) == (start.isoformat(), 10)


def test_moving_the_start_earlier_out_of_week_one_needs_force(guard: Guard, guard_client: Any) -> None:
    guard.add_mailbox("a@x.com", start=TODAY - timedelta(days=2), now=NOW)  # day 3: week one
    before = guard_client.hgetall("sendhost:warmup:{default}:mbx:a@x.com")
    with pytest.raises(WarmupConfigError, match=r"would lift it out of week one today \(day 3 -> day 31, cap 10 "
                                                r"-> \d+\); pass --force"):
        guard.add_mailbox("a@x.com", start=TODAY - timedelta(days=30), now=NOW)
    assert guard_client.hgetall("sendhost:warmup:{default}:mbx:a@x.com") == before
    assert guard.reserve("a@x.com", now=NOW).reservation.cap == 10  # type: ignore[union-attr]
    # Earlier but still within week one: no force needed.
    guard.add_mailbox("a@x.com", start=TODAY - timedelta(days=5), now=NOW)
    guard.add_mailbox("a@x.com", start=TODAY - timedelta(days=30), now=NOW, force=True)
    moved = guard_client.hget("sendhost:warmup:{default}:mbx:a@x.com", "start_moved")
    assert moved == f"{TODAY - timedelta(days=5)} -> {TODAY - timedelta(days=30)} at 2026-11-30T12:00:00+00:00 " \
                    "(forced out of week one)"
    [status] = guard.status(["a@x.com"], now=NOW)
    assert status.day_number == 31 and status.cap > 10


def test_add_refuses_bad_input_and_writes_nothing(guard: Guard, guard_client: Any) -> None:
    with pytest.raises(WarmupConfigError, match="not an email address"):
        guard.add_mailbox("not-an-address", start=TODAY, now=NOW)
    with pytest.raises(WarmupConfigError, match="IANA"):
        guard.add_mailbox("a@x.com", start=TODAY, timezone="Mars/Olympus", now=NOW)
    assert guard_client.keys("*") == []


def test_unknown_mailbox_is_a_config_error(guard: Guard) -> None:
    with pytest.raises(WarmupConfigError, match=r"unknown mailbox 'nobody@x\.com'"):
        guard.reserve("nobody@x.com", now=NOW)


def test_an_unknown_mailbox_is_told_by_its_type_wherever_it_is_met(guard: Guard) -> None:
    # The sender's agent tells "Redis lost the mailbox" from other bad input by this type, not by the message.
    with pytest.raises(UnknownMailbox) as picked:
        guard.pick(["nobody@x.com"], now=NOW)
    assert picked.value.address == "nobody@x.com"
    for call in (lambda: guard.pause("nobody@x.com"), lambda: guard.status(["nobody@x.com"], now=NOW)):
        with pytest.raises(UnknownMailbox):
            call()


@pytest.mark.service
def test_redis_down_fails_closed_by_default_and_open_when_asked() -> None:
    dead_url = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    with Guard.from_url(dead_url) as closed_guard:
        closed = closed_guard.reserve("a@x.com")
        assert closed.status == "skipped-unavailable" and closed.reservation is None
        with pytest.raises(WarmupUnavailable, match="Redis unreachable"):
            closed_guard.add_mailbox("a@x.com", start=TODAY, now=NOW)
    with Guard.from_url(dead_url, fail_open=True) as open_guard:
        opened = open_guard.reserve("a@x.com")
        assert opened.reserved and opened.reservation is not None and opened.reservation.unguarded
        assert open_guard.confirm(opened.reservation) is False  # nothing to settle


@pytest.mark.service
def test_from_url_without_url_uses_the_embedded_redis(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from sendhost.embedded import stop_embedded

    try:
        with Guard.from_url(None, state_dir=tmp_path / "state") as guard:
            guard.add_mailbox("a@x.com", start=TODAY, min_gap_s=0, jitter_s=(0, 0))
            assert guard.reserve("a@x.com").reserved
    finally:
        stop_embedded(tmp_path / "state")  # even when an assertion failed: no server outlives its test


class TestCancel:
    @pytest.fixture(autouse=True)
    def _mailbox(self, guard: Guard) -> None:
        guard.add_mailbox("a@x.com", start=WEEK_TWO, min_gap_s=0, jitter_s=(0, 0), now=NOW)

    def _count(self, guard: Guard) -> int:
        return guard.status(["a@x.com"], now=NOW + 5)[0].reserved

    @pytest.mark.parametrize("failure", [None, FailureClass.RECIPIENT, FailureClass.CONTENT,
                                         FailureClass.TRANSIENT, FailureClass.ACCOUNT_AUTH])
    def test_definite_rejection_frees_the_slot(self, guard: Guard, failure: FailureClass | None) -> None:
        reservation = guard.reserve("a@x.com", now=NOW).reservation
        assert reservation is not None
        outcome = guard.cancel(reservation, failure=failure, now=NOW + 1)
        assert outcome.settled and outcome.freed
        assert self._count(guard) == 0
        again = guard.cancel(reservation, failure=failure, now=NOW + 2)
        assert not again.settled and not again.freed  # idempotent: never frees twice

    def test_account_quota_keeps_the_slot_and_parks_until_local_midnight(self, guard: Guard) -> None:
        reservation = guard.reserve("a@x.com", now=NOW).reservation
        assert reservation is not None
        assert not guard.cancel(reservation, FailureClass.ACCOUNT_QUOTA, now=NOW + 1).freed
        assert self._count(guard) == 1
        parked = guard.reserve("a@x.com", now=NOW + 2)
        assert parked.status == "skipped-daily-limit"
        assert parked.retry_after_s == pytest.approx(12 * 3600 - 2)
        assert guard.reserve("a@x.com", now=NOW + 12 * 3600).reserved

    def test_rate_limited_keeps_the_slot_and_cools_down_four_hours(self, guard: Guard) -> None:
        reservation = guard.reserve("a@x.com", now=NOW).reservation
        assert reservation is not None
        assert not guard.cancel(reservation, FailureClass.RATE_LIMITED, now=NOW).freed
        assert self._count(guard) == 1
        assert guard.reserve("a@x.com", now=NOW + 4 * 3600 - 1).status == "skipped-cooldown"
        assert guard.reserve("a@x.com", now=NOW + 4 * 3600).reserved

    def test_account_auth_disconnects_until_resumed(self, guard: Guard) -> None:
        reservation = guard.reserve("a@x.com", now=NOW).reservation
        assert reservation is not None
        guard.cancel(reservation, FailureClass.ACCOUNT_AUTH, now=NOW)
        later = guard.reserve("a@x.com", now=NOW + 86400)
        assert later.status == "skipped-paused" and "authentication" in (later.reason or "")
        guard.resume("a@x.com")
        assert guard.reserve("a@x.com", now=NOW + 86400).reserved

    def test_unknown_outcome_keeps_the_reservation(self, guard: Guard) -> None:
        for i in range(15):
            assert guard.reserve("a@x.com", now=NOW + i).reserved  # never confirmed nor cancelled
        assert guard.reserve("a@x.com", now=NOW + 20).status == "skipped-daily-limit"


def test_spam_rate_gates_hold_and_pause(guard: Guard) -> None:
    guard.add_mailbox("a@x.com", start=TODAY - timedelta(days=13), min_gap_s=0, jitter_s=(0, 0), now=NOW)
    guard.add_mailbox("b@x.com", start=TODAY - timedelta(days=13), min_gap_s=0, jitter_s=(0, 0), now=NOW)
    guard.add_mailbox("c@y.com", start=TODAY - timedelta(days=13), min_gap_s=0, jitter_s=(0, 0), now=NOW)
    assert guard.plan("a@x.com", 15)[-1].cap == 20  # day 15 (tomorrow) if healthy
    held = guard.record_spam_rate(0.0015, TODAY - timedelta(days=1), domain="x.com", now=NOW)
    assert (held.verdict, held.paused) == ("hold", ())
    assert guard.plan("a@x.com", 15)[-1].cap == 15
    paused = guard.record_spam_rate(0.004, TODAY - timedelta(days=2), domain="x.com", now=NOW)
    assert paused.verdict == "pause" and paused.paused == ("a@x.com", "b@x.com")
    assert guard.reserve("a@x.com", now=NOW).status == "skipped-paused"
    assert guard.reserve("c@y.com", now=NOW).reserved  # another domain is untouched
    guard.resume("a@x.com")
    decision = guard.reserve("a@x.com", now=NOW)
    assert decision.reservation is not None and decision.reservation.cap == 10  # stepped back from 15


def test_import_sends_raises_todays_counters_never_lowers(guard: Guard) -> None:
    guard.add_mailbox("a@x.com", start=TODAY, min_gap_s=600, jitter_s=(0, 0), now=NOW)
    guard.reserve("a@x.com", now=NOW - 3600)
    at = datetime.fromtimestamp(NOW, UTC)
    log = [("a@x.com", at - timedelta(hours=h)) for h in (1, 2, 3, 4, 30)]  # 30 h ago: yesterday
    log.append(("a@x.com", at - timedelta(minutes=5)))
    assert guard.import_sends(log, now=NOW) == {"a@x.com": (5, int((NOW - 300) * 1000))}
    status = guard.status(["a@x.com"], now=NOW)[0]
    assert status.sent == status.reserved == 5 and status.state == "cooldown"
    assert guard.import_sends([("a@x.com", at - timedelta(hours=2))], now=NOW)["a@x.com"][0] == 5


@pytest.mark.parametrize(("gap_s", "words"), [(45, "45 s"), (59.001, "1 min 0 s"), (472.7, "7 min 53 s"),
                                              (3600, "1 h 0 min"), (3601, "1 h 1 min"), (200_000, "2 d 8 h")])
def test_the_guard_and_the_cli_word_a_wait_alike_rounded_up(guard: Guard, gap_s: float, words: str) -> None:
    from warmup.days import format_duration

    assert format_duration(gap_s * 1000) == words
    guard.add_mailbox("a@x.com", start=WEEK_TWO, min_gap_s=gap_s, jitter_s=(0, 0), now=NOW)
    assert guard.reserve("a@x.com", now=NOW).reserved
    skipped = guard.reserve("a@x.com", now=NOW)
    assert skipped.reason == f"needs {words} between sends; {words} left"


def test_a_clock_given_is_the_time_of_every_call_without_now(guard_client: Any) -> None:
    at = [NOW]
    guard = Guard(guard_client, clock=lambda: at[0])
    guard.add_mailbox("a@x.com", start=WEEK_TWO, min_gap_s=600, jitter_s=(0, 0))
    first = guard.reserve("a@x.com")
    assert first.reserved and first.reservation is not None and first.reservation.day == TODAY.isoformat()
    at[0] = NOW + 60
    blocked = guard.pick(["a@x.com"])
    assert blocked.status == "skipped-cooldown" and blocked.retry_after_s == pytest.approx(540, abs=1)
    assert guard.confirm(first.reservation)
    [status] = guard.status(["a@x.com"])
    assert (status.reserved, status.sent) == (1, 1)
    # an explicit `now` still wins over the clock
    assert guard.reserve("a@x.com", now=NOW + 600).reserved
    at[0] = NOW + 86400  # tomorrow, by the clock alone
    [tomorrow] = guard.status(["a@x.com"])
    assert (tomorrow.reserved, tomorrow.sent) == (0, 0)
    assert guard.status(["a@x.com"], now=NOW + 601)[0].reserved == 2
