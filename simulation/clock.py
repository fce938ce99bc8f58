"""The simulated clock: one instance injected into every part of the simulation (pool, guard, rotator, reaper)."""

from __future__ import annotations


class SimClock:
    """Seconds since the epoch, moved only by the simulation's event loop (never backwards)."""

    def __init__(self, start_s: float) -> None:
        self.now_s = float(start_s)

    def __call__(self) -> float:
        return self.now_s

    def advance_to(self, when_s: float) -> None:
        """Move to `when_s`; an event scheduled in the past runs at the current instant instead."""
        self.now_s = max(self.now_s, float(when_s))

    def sleep(self, seconds: float) -> None:
        """What a component's `sleep=` gets: waiting moves simulated time, it never blocks the process."""
        self.now_s += max(0.0, seconds)
