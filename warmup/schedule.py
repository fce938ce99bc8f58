"""Ramp schedules as pure functions: (start date, day, health history) -> that day's send cap.

Days 1-7 of a mailbox allow at most `week_one_cap` sends. After that the cap rises by `step` for every
`step_days` healthy days, up to `ceiling`. A day whose spam rate is at or above the hold threshold (0.1%)
does not count towards the next step; one at or above the pause threshold (0.3%) steps the ramp back one
step (and `Guard.record_spam_rate` pauses the mailbox until someone resumes it). Days are the mailbox's
own calendar days; converting instants to days is the caller's job (see `warmup.days`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Literal

from warmup.health import RateGate, verdict

DayState = Literal["not-started", "week-one", "ramp", "held", "stepped-back", "ceiling"]


@dataclass(frozen=True)
class Ramp:
    """How a mailbox's cap grows. The defaults are the house rules."""

    week_one_cap: int = 10
    step: int = 5
    step_days: int = 7
    ceiling: int = 40

    def __post_init__(self) -> None:
        if not 1 <= self.week_one_cap <= 10:
            raise ValueError(f"week_one_cap {self.week_one_cap} must be 1..10: new mailboxes send at most 10 a day")
        if self.step < 0 or self.step_days < 1:
            raise ValueError(f"ramp step {self.step} per {self.step_days} days must be >= 0 per >= 1 day")
        if self.ceiling < self.week_one_cap:
            raise ValueError(f"ceiling {self.ceiling} is below the week-one cap {self.week_one_cap}")


@dataclass(frozen=True)
class DayCap:
    """One day of a plan: which day of the mailbox's life it is, its cap and why."""

    day: date
    day_number: int  # 1 on the start date
    cap: int
    state: DayState


def plan(start: date, until: date, ramp: Ramp = Ramp(), history: Mapping[date, float] | None = None) -> list[DayCap]:
    """Every day's cap from `start` to `until` inclusive; `history` maps a day to its spam rate (a fraction).

    A day with no reported rate counts as healthy: Postmaster Tools reports nothing for low volumes, and a
    new mailbox sending 10 a day would otherwise never ramp.
    """
    history = history or {}
    days: list[DayCap] = []
    level = 0  # steps earned so far
    streak = 0  # healthy days since the last step
    last_verdict: RateGate = "ok"
    day = start
    number = 1
    while day <= until:
        days.append(DayCap(day, number, _cap(number, level, ramp), _state(number, level, ramp, last_verdict)))
        last_verdict = verdict(history[day]) if day in history else "ok"
        if last_verdict == "ok":
            streak += 1
        elif last_verdict == "pause":
            level, streak = max(0, level - 1), 0
        if streak >= ramp.step_days:
            level, streak = level + 1, 0
        day += timedelta(days=1)
        number += 1
    return days


def cap_on(start: date, day: date, ramp: Ramp = Ramp(), history: Mapping[date, float] | None = None) -> DayCap:
    """The cap of one day (0 before the start date)."""
    if day < start:
        return DayCap(day, 0, 0, "not-started")
    return plan(start, day, ramp, history)[-1]


def _cap(number: int, level: int, ramp: Ramp) -> int:
    if number <= 7:
        return min(ramp.week_one_cap, ramp.ceiling)
    return min(ramp.ceiling, ramp.week_one_cap + ramp.step * level)


def _state(number: int, level: int, ramp: Ramp, last_verdict: RateGate) -> DayState:
    if number <= 7:
        return "week-one"
    if last_verdict == "pause":
        return "stepped-back"
    if last_verdict == "hold":
        return "held"
    return "ceiling" if _cap(number, level, ramp) >= ramp.ceiling else "ramp"
