"""Clocks that tests move by hand instead of sleeping."""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass
class FakeClock:
    """Named fake: stands in for wall-clock time (seconds since the epoch)."""

    now_s: float = 1_796_000_000.0  # 2026-11-30, a fixed instant so runs repeat

    def __call__(self) -> float:
        return self.now_s

    def advance(self, seconds: float) -> float:
        self.now_s += seconds
        return self.now_s

    def sleep(self, seconds: float) -> None:
        self.advance(seconds)


@dataclass
class ShiftedClock:
    """The real time moved by `offset_s`: for agents in processes of their own, where a test cannot move a clock by
    hand. Time still runs (a wait of a second takes a second) while `advance` jumps days; a child process given the
    same offset reads the same time."""

    offset_s: float = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset_s

    def advance(self, seconds: float) -> float:
        self.offset_s += seconds
        return self()
