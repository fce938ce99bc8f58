"""The campaign's slot and the spread pace, in the reservation script, against a real Redis (issue 25)."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from sender.campaigns.pacing import HourRange
from sender.campaigns.window import Schedule
from tests.warmup.conftest import NOW
from warmup import CampaignSlot, FailureClass, Guard, Ramp
from warmup.days import jitter_ms
from warmup.keys import GroupKeys

TODAY = date(2026, 11, 30)
WEEK_TWO = TODAY - timedelta(days=7)  # day 8 today: cap 15
SETTLED = TODAY - timedelta(days=90)  # past the ramp: cap 40
DAY_ENDS_MS = int(datetime(2026, 12, 1, tzinfo=UTC).timestamp() * 1000)  # NOW is 12:00 UTC on TODAY


def slot(cap: int | None = 5, per_mailbox: int | None = None, day: str = "2026-11-30",
         ends_ms: int = DAY_ENDS_MS) -> CampaignSlot:
    return CampaignSlot("launch", day, cap, per_mailbox, ends_ms)


def add(guard: Guard, *addresses: str, start: date = WEEK_TWO) -> None:
    for address in addresses:
        guard.add_mailbox(address, start=start, min_gap_s=0, jitter_s=(0, 0), now=NOW)


def test_the_campaign_cap_is_exact_and_refuses_until_its_day_ends(guard: Guard) -> None:
    add(guard, "a@x.com", "b@x.com")
    decisions = [guard.pick(["a@x.com", "b@x.com"], now=NOW + i, campaign=slot(5)) for i in range(7)]
    assert [d.status for d in decisions] == ["reserved"] * 5 + ["skipped-campaign-cap"] * 2
    refused = decisions[-1]
    assert refused.mailbox is None and refused.reservation is None
    assert refused.retry_after_s == pytest.approx(12 * 3600 - 6)  # the campaign's midnight, 12 h after NOW
    assert refused.reason is not None and "launch" in refused.reason and "5 of its 5" in refused.reason
    # The mailboxes still had room: the same mailboxes reserve for another campaign, or for none.
    assert guard.pick(["a@x.com", "b@x.com"], now=NOW + 8, campaign=CampaignSlot("other", "2026-11-30", 1, None,
                                                                                 DAY_ENDS_MS)).reserved
    assert guard.pick(["a@x.com", "b@x.com"], now=NOW + 9).reserved
    count, per_mailbox = guard.campaign_counts("default", "launch", "2026-11-30")
    assert (count, per_mailbox) == (5, {"a@x.com": 3, "b@x.com": 2})
    # Its next day counts afresh, and the day before stays readable.
    assert guard.pick(["a@x.com"], now=NOW + 86400, campaign=slot(5, day="2026-12-01",
                                                                   ends_ms=DAY_ENDS_MS + 86_400_000)).reserved
    assert guard.campaign_counts("default", "launch", "2026-12-01") == (1, {"a@x.com": 1})
    assert guard.campaign_counts("default", "launch", "2026-11-30")[0] == 5


def test_a_campaign_without_a_cap_is_counted_not_limited(guard: Guard) -> None:
    add(guard, "a@x.com")
    decisions = [guard.pick(["a@x.com"], now=NOW + i, campaign=slot(None)) for i in range(16)]
    assert [d.status for d in decisions] == ["reserved"] * 15 + ["skipped-daily-limit"]  # the mailbox's cap only
    assert guard.campaign_counts("default", "launch", "2026-11-30") == (15, {"a@x.com": 15})


def test_a_mailbox_at_its_share_is_skipped_and_the_group_takes_the_send(guard: Guard) -> None:
    add(guard, "a@x.com", "b@x.com")
    decisions = [guard.pick(["a@x.com", "b@x.com"], now=NOW + i, campaign=slot(10, per_mailbox=2))
                 for i in range(5)]
    assert [d.status for d in decisions] == ["reserved"] * 4 + ["skipped-daily-limit"]
    assert sorted(d.mailbox for d in decisions[:4] if d.mailbox) == ["a@x.com", "a@x.com", "b@x.com", "b@x.com"]
    refused = decisions[-1]
    assert refused.reason is not None and "share of 2" in refused.reason
    assert refused.retry_after_s == pytest.approx(12 * 3600 - 4)
    # A mailbox alone at its share is refused; the campaign's own count stays below its cap.
    assert guard.pick(["a@x.com"], now=NOW + 6, campaign=slot(10, per_mailbox=2)).status == "skipped-daily-limit"
    assert guard.campaign_counts("default", "launch", "2026-11-30") == (4, {"a@x.com": 2, "b@x.com": 2})


def test_a_definite_refusal_frees_both_slots_once(guard: Guard) -> None:
    add(guard, "a@x.com")
    reservations = [guard.pick(["a@x.com"], now=NOW + i, campaign=slot(2, per_mailbox=2)).reservation
                    for i in range(2)]
    assert all(reservations)
    first = reservations[0]
    assert first is not None and (first.campaign, first.campaign_day) == ("launch", "2026-11-30")
    assert guard.pick(["a@x.com"], now=NOW + 3, campaign=slot(2, per_mailbox=2)).status == "skipped-campaign-cap"
    outcome = guard.cancel(first, FailureClass.RECIPIENT, now=NOW + 4)
    assert outcome.freed
    assert guard.campaign_counts("default", "launch", "2026-11-30") == (1, {"a@x.com": 1})
    assert guard.status(["a@x.com"], now=NOW + 5)[0].reserved == 1
    again = guard.cancel(first, FailureClass.RECIPIENT, now=NOW + 6)
    assert not again.settled and not again.freed
    assert guard.campaign_counts("default", "launch", "2026-11-30") == (1, {"a@x.com": 1})
    # The freed slot is one reservation again, and then the campaign is full.
    assert guard.pick(["a@x.com"], now=NOW + 7, campaign=slot(2, per_mailbox=2)).reserved
    assert guard.pick(["a@x.com"], now=NOW + 8, campaign=slot(2, per_mailbox=2)).status == "skipped-campaign-cap"


@pytest.mark.parametrize("failure", [FailureClass.ACCOUNT_QUOTA, FailureClass.RATE_LIMITED])
def test_a_refusal_that_keeps_the_mailboxs_slot_keeps_the_campaigns(guard: Guard, failure: FailureClass) -> None:
    add(guard, "a@x.com")
    reservation = guard.pick(["a@x.com"], now=NOW, campaign=slot(3)).reservation
    assert reservation is not None
    assert not guard.cancel(reservation, failure, now=NOW + 1).freed
    assert guard.campaign_counts("default", "launch", "2026-11-30") == (1, {"a@x.com": 1})


def test_an_unknown_outcome_keeps_both_slots(guard: Guard) -> None:
    # Never settled (the process died after handing the message over): both stay counted, tomorrow too.
    add(guard, "a@x.com")
    assert guard.pick(["a@x.com"], now=NOW, campaign=slot(1)).reserved
    assert guard.pick(["a@x.com"], now=NOW + 3600, campaign=slot(1)).status == "skipped-campaign-cap"
    assert guard.status(["a@x.com"], now=NOW + 3600)[0].reserved == 1
    assert guard.campaign_counts("default", "launch", "2026-11-30") == (1, {"a@x.com": 1})


def test_a_rebuild_from_the_senders_log_raises_the_campaigns_day_and_shares_never_lowers(guard: Guard) -> None:
    """After Redis lost the campaign's counters: the log's sends on the campaign's day (in its time zone, not
    after now) come back, the day's and each mailbox's, and the cap holds on them; a shorter log lowers nothing."""
    add(guard, "a@x.com", "b@x.com")
    at = datetime.fromtimestamp(NOW, UTC)
    log = [("a@x.com", at - timedelta(hours=1)), ("A@x.com", at - timedelta(hours=2)), ("b@x.com", at),
           ("b@x.com", at - timedelta(hours=13)),  # 23:00 yesterday in UTC
           ("a@x.com", at + timedelta(minutes=5))]  # after now: not yet
    assert guard.import_campaign_sends("default", "launch", "UTC", log, now=NOW) == 3
    assert guard.campaign_counts("default", "launch", "2026-11-30") == (3, {"a@x.com": 2, "b@x.com": 1})
    # At NOW it is 02:00 on 2026-12-01 on Kiritimati (UTC+14): that day began at 10:00 UTC, so the same log
    # counts on the campaign's 2026-12-01 there.
    assert guard.import_campaign_sends("default", "line", "Pacific/Kiritimati", log, now=NOW) == 3
    assert guard.campaign_counts("default", "line", "2026-12-01") == (3, {"a@x.com": 2, "b@x.com": 1})
    assert guard.campaign_counts("default", "line", "2026-11-30") == (0, {})
    # The restored shares hold (a has its 2, b takes one more), and so does the restored day's count.
    decisions = [guard.pick(["a@x.com", "b@x.com"], now=NOW + i, campaign=slot(5, per_mailbox=2)) for i in range(2)]
    assert [d.status for d in decisions] == ["reserved", "skipped-daily-limit"] and decisions[0].mailbox == "b@x.com"
    assert guard.pick(["a@x.com", "b@x.com"], now=NOW + 3, campaign=slot(4)).status == "skipped-campaign-cap"
    assert guard.import_campaign_sends("default", "launch", "UTC", log[:1], now=NOW + 10) == 4
    assert guard.campaign_counts("default", "launch", "2026-11-30") == (4, {"a@x.com": 2, "b@x.com": 2})


def test_a_caller_whose_day_lags_both_counted_days_is_refused(guard: Guard) -> None:
    add(guard, "a@x.com")
    for day in ("2026-11-30", "2026-12-01"):
        assert guard.pick(["a@x.com"], now=NOW + 1, campaign=slot(5, day=day)).reserved
    behind = guard.pick(["a@x.com"], now=NOW + 2, campaign=slot(5, day="2026-11-29"))
    assert behind.status == "skipped-campaign-cap"
    assert behind.reason is not None and "before the days" in behind.reason


def test_the_pace_spreads_the_remaining_cap_over_the_window_left(guard: Guard, guard_client: Any) -> None:
    guard.add_mailbox("a@x.com", start=SETTLED, min_gap_s=420, jitter_s=(0, 90), now=NOW)
    state = GroupKeys("default").mailbox("a@x.com").state
    seed = str(guard_client.hget(state, "jitter_seed"))
    window_left_s = 8 * 3600
    reservation = guard.pick(["a@x.com"], now=NOW, window_left_s=window_left_s).reservation
    assert reservation is not None and reservation.cap == 40
    # 39 sends left and the window's end split 8 hours into 40 parts (720 s, above the 420 s gap), plus the jitter.
    expected = int(NOW * 1000) + 8 * 3600 * 1000 // 40 + jitter_ms(seed, 1, 0, 90_000)
    assert guard_client.hget(state, "next_send_ms") == str(expected)
    assert guard.pick(["a@x.com"], now=(expected - 1) / 1000, window_left_s=window_left_s).status \
        == "skipped-cooldown"
    # Less window left: the pace shortens, and never below the gap.
    assert guard.pick(["a@x.com"], now=expected / 1000, window_left_s=600).reserved
    gap_only = expected + 420_000 + jitter_ms(seed, 2, 0, 90_000)
    assert guard_client.hget(state, "next_send_ms") == str(gap_only)


def test_the_pace_keeps_a_cap_of_forty_from_draining_in_the_first_hour(guard: Guard) -> None:
    guard.add_mailbox("a@x.com", start=SETTLED, min_gap_s=420, jitter_s=(0, 90), now=NOW)
    window_end = NOW + 8 * 3600
    at, sent = NOW, []
    while at < window_end:
        decision = guard.pick(["a@x.com"], now=at, window_left_s=window_end - at)
        if decision.reserved:
            sent.append(at)
            at += 1
        else:
            assert decision.retry_after_s is not None
            at += max(decision.retry_after_s, 1)
    hours = [int((t - NOW) // 3600) for t in sent]
    # All 40 go (the pace shortens as the window runs out, down to the gap), about 5 an hour: even a 420 s gap
    # alone would let 8 go in the first hour and none in the last three.
    assert len(sent) == 40
    assert all(4 <= hours.count(h) <= 6 for h in range(8)), hours


@pytest.mark.parametrize("cap", [8, 12, 25, 40])
@pytest.mark.parametrize("hours", [(HourRange(540, 1020),), (HourRange(540, 720), HourRange(780, 1020))],
                         ids=["09-17", "09-12+13-17"])
def test_a_day_through_the_window_check_spends_the_cap_a_quarter_an_hour_at_most(
        guard: Guard, cap: int, hours: tuple[HourRange, ...]) -> None:
    # The agent in miniature: a backlog, the window check first (a closed window waits for its opening), then the
    # pick with the window's open time left. The whole cap goes inside the window, no hour takes over a quarter.
    guard.add_mailbox("a@x.com", start=SETTLED, min_gap_s=420, jitter_s=(0, 90), now=NOW,
                      ramp=Ramp(week_one_cap=min(cap, 10), ceiling=cap))
    schedule, tz = Schedule(tuple(range(7)), hours), ZoneInfo("Europe/Berlin")
    at = datetime(2026, 11, 30, 8, 0, tzinfo=tz)  # before the window opens: the day's backlog is due at once
    sent: list[datetime] = []
    while at.astimezone(tz).date() == date(2026, 11, 30):
        if not schedule.is_open(at, tz):
            opening = schedule.next_opening(at, tz)
            assert opening is not None
            at = opening
            continue
        decision = guard.pick(["a@x.com"], now=at.timestamp(), window_left_s=schedule.open_seconds_left(at, tz))
        if decision.reserved:
            sent.append(at)
        assert decision.reserved or decision.retry_after_s is not None
        at += timedelta(seconds=1 if decision.reserved else max(decision.retry_after_s or 0, 1))
    by_hour = Counter(t.astimezone(tz).hour for t in sent)
    assert len(sent) == cap
    assert all(schedule.is_open(t, tz) for t in sent)
    assert max(by_hour.values()) <= cap / 4, sorted(by_hour.items())


def test_rows_without_a_window_keep_the_gap_and_jitter_only(guard: Guard, guard_client: Any) -> None:
    guard.add_mailbox("a@x.com", start=SETTLED, min_gap_s=420, jitter_s=(0, 90), now=NOW)
    state = GroupKeys("default").mailbox("a@x.com").state
    seed = str(guard_client.hget(state, "jitter_seed"))
    assert guard.pick(["a@x.com"], now=NOW, campaign=slot(None)).reserved
    assert guard_client.hget(state, "next_send_ms") == str(int(NOW * 1000) + 420_000 + jitter_ms(seed, 1, 0, 90_000))


def test_the_campaign_key_lives_under_the_groups_hash_tag() -> None:
    assert GroupKeys("g1").campaign("launch") == "sendhost:warmup:{g1}:campaign:launch"


@pytest.mark.service
def test_the_embedded_redis_runs_the_same_campaign_rules(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from sendhost.embedded import stop_embedded

    try:
        with Guard.from_url(None, state_dir=tmp_path / "state") as guard:
            add(guard, "a@x.com", "b@x.com")
            decisions = [guard.pick(["a@x.com", "b@x.com"], now=NOW + i, campaign=slot(3, per_mailbox=2))
                         for i in range(4)]
            assert [d.status for d in decisions] == ["reserved"] * 3 + ["skipped-campaign-cap"]
            first = decisions[0].reservation
            assert first is not None and guard.cancel(first, now=NOW + 5).freed
            assert guard.campaign_counts("default", "launch", "2026-11-30")[0] == 2
    finally:
        stop_embedded(tmp_path / "state")


def test_a_campaign_cap_below_its_mailboxes_caps_is_spread_over_the_window(guard: Guard) -> None:
    # Four settled mailboxes could send 160 in the day; the campaign may send 20. Paced per mailbox only, the 20
    # would go in the window's first hour (each mailbox's pace is 8 h / 40); the campaign's own pace spreads them.
    for address in ("a@x.com", "b@x.com", "c@x.com", "d@x.com"):
        guard.add_mailbox(address, start=SETTLED, min_gap_s=420, jitter_s=(0, 90), now=NOW)
    window_end = NOW + 8 * 3600
    at, sent, reasons = NOW, [], set()
    while at < window_end:
        decision = guard.pick(["a@x.com", "b@x.com", "c@x.com", "d@x.com"], now=at, window_left_s=window_end - at,
                              campaign=slot(20))
        if decision.reserved:
            sent.append(at)
            at += 1
        else:
            assert decision.status == "skipped-campaign-cap" and decision.retry_after_s is not None
            reasons.add((decision.reason or "").split(",")[-1].split(":")[0].strip())
            at += max(decision.retry_after_s, 1)
    hours = Counter(int((t - NOW) // 3600) for t in sent)
    assert len(sent) == 20
    assert max(hours.values()) <= 20 / 4, sorted(hours.items())
    assert "spread over its window" in reasons


def test_a_campaign_row_without_a_window_is_not_paced_by_the_campaign(guard: Guard) -> None:
    add(guard, "a@x.com", "b@x.com")
    assert guard.pick(["a@x.com", "b@x.com"], now=NOW, campaign=slot(5)).reserved
    assert guard.pick(["a@x.com", "b@x.com"], now=NOW, campaign=slot(5)).reserved
