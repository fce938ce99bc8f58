"""The ramp schedule: a pure function of start date, day and health history."""

from __future__ import annotations

from datetime import date, timedelta

import pytest

from warmup.schedule import Ramp, cap_on, plan

START = date(2026, 11, 2)


def day(n: int) -> date:
    """Day number n (1-based) of a mailbox started on START."""
    return START + timedelta(days=n - 1)


def test_week_one_allows_at_most_ten_a_day() -> None:
    days = plan(START, day(7))
    assert [d.cap for d in days] == [10] * 7
    assert {d.state for d in days} == {"week-one"}
    assert [d.day_number for d in days] == list(range(1, 8))


def test_healthy_ramp_adds_five_per_week_up_to_the_ceiling() -> None:
    caps = [d.cap for d in plan(START, day(56))]
    weekly = [caps[i] for i in range(0, 56, 7)]
    assert weekly == [10, 15, 20, 25, 30, 35, 40, 40]
    assert plan(START, day(50))[-1].state == "ceiling"


def test_ramp_is_configurable() -> None:
    ramp = Ramp(week_one_cap=8, step=3, step_days=7, ceiling=17)
    weekly = [cap_on(START, day(n), ramp).cap for n in (1, 8, 15, 22, 29)]
    assert weekly == [8, 11, 14, 17, 17]


def test_hold_rate_day_does_not_count_towards_the_next_step() -> None:
    held = {day(10): 0.001}  # exactly 0.1%: at or above holds
    assert cap_on(START, day(15), history=held).cap == 15  # would be 20 without the held day
    assert cap_on(START, day(16), history=held).cap == 20
    assert cap_on(START, day(11), history=held).state == "held"


def test_rate_just_below_the_hold_threshold_still_ramps() -> None:
    assert cap_on(START, day(15), history={day(10): 0.0009}).cap == 20


def test_pause_rate_steps_the_ramp_back_one_step() -> None:
    bad = {day(20): 0.003}  # exactly 0.3%
    before = cap_on(START, day(20), history=bad)
    after = cap_on(START, day(21), history=bad)
    assert before.cap == 20
    assert after.cap == 15
    assert after.state == "stepped-back"
    # The streak restarts: seven more healthy days to climb again.
    assert cap_on(START, day(28), history=bad).cap == 20


def test_step_back_never_goes_below_week_one_cap() -> None:
    bad = {day(3): 0.01, day(9): 0.01}
    assert all(d.cap >= 10 for d in plan(START, day(30), history=bad))
    assert cap_on(START, day(10), history=bad).cap == 10


def test_week_one_stays_at_ten_even_with_a_generous_ramp() -> None:
    assert max(d.cap for d in plan(START, day(7), Ramp(week_one_cap=10, step=100, step_days=1, ceiling=500))) == 10


def test_days_before_the_start_have_no_sends() -> None:
    assert cap_on(START, START - timedelta(days=1)).cap == 0


@pytest.mark.parametrize("kwargs", [{"week_one_cap": 11}, {"week_one_cap": 0}, {"step": -1}, {"step_days": 0},
                                    {"ceiling": 5}])
def test_invalid_ramps_are_refused(kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        Ramp(**kwargs)
