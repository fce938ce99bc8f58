"""A clock that tests move by hand instead of sleeping."""

from __future__ import annotations

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
