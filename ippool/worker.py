"""The pool worker: reconcile once at start, then rotate and reap in a loop that sleeps after each cycle.

The sleep comes after a cycle ends, never on a fixed schedule, so cycles cannot overlap however long one takes.
`stop()` (the CLI wires SIGTERM to it) lets the step in hand finish (the slot being rotated, the address being
released) and starts no other.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TypeVar

from ippool.errors import PoolConfigError, PoolOperationFailed
from ippool.reaper import Reaper, ReapResult
from ippool.rotator import RotationResult, Rotator

log = logging.getLogger("ippool.worker")
T = TypeVar("T")


@dataclass(frozen=True)
class CycleReport:
    rotations: list[RotationResult]
    reaped: list[ReapResult]
    errors: list[str]

    def to_json(self) -> dict[str, object]:
        return {"rotations": [r.to_json() for r in self.rotations], "reaped": [r.to_json() for r in self.reaped],
                "errors": self.errors}


@dataclass
class Worker:
    """Runs `rotator` and `reaper` over `hosts`; `reconcile()` (if given) runs once before the first cycle."""

    rotator: Rotator
    reaper: Reaper
    hosts: Sequence[str]
    interval_s: float = 10.0
    reconcile: Callable[[], object] | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    reconciled: object = None  # what the start-up reconcile returned

    def stop(self) -> None:
        """Finish the step in hand, then return from `run` (safe to call from a signal handler)."""
        self._stop.set()

    def stopping(self) -> bool:
        return self._stop.is_set()

    def run(self, once: bool = False, on_cycle: Callable[[CycleReport], None] | None = None) -> int:
        """Cycle until stopped (or once); returns the number of cycles run."""
        log.info("worker %s started: %d host(s), sleeping %gs after each cycle", self.rotator.owner,
                 len(self.hosts), self.interval_s)
        if self.reconcile is not None:
            self.reconciled, _error = self._guard("reconcile", self.reconcile)
        cycles = 0
        while not self.stopping():
            report = self.run_cycle()
            cycles += 1
            if on_cycle is not None:
                on_cycle(report)
            if once:
                break
            self._stop.wait(self.interval_s)  # the sleep after the cycle; stop() wakes it
        return cycles

    def run_cycle(self) -> CycleReport:
        """Rotate every ready slot, then reap every due parked EIP, host by host."""
        rotations: list[RotationResult] = []
        reaped: list[ReapResult] = []
        errors: list[str] = []
        self.rotator.ledger.heartbeat(self.rotator.owner, max(self.rotator.heartbeat_s, 3 * self.interval_s))
        for host in self.hosts:
            if self.stopping():
                break
            found, error = self._guard(f"rotate {host}", partial(self.rotator.rotate_ready, host, self.stopping))
            if error:
                errors.append(error)
            rotations += found or []
            errors += [f"{r.host} slot {r.slot}: {r.detail}" for r in found or [] if r.outcome == "failed"]
        for host in self.hosts:
            if self.stopping():
                break
            done, error = self._guard(f"reap {host}", partial(self.reaper.reap, host, self.stopping))
            if error:
                errors.append(error)
            reaped += done or []
        return CycleReport(rotations, reaped, errors)

    def _guard(self, what: str, action: Callable[[], T]) -> tuple[T | None, str]:
        """Run one part of a cycle: (its result, ""), or (None, message) after an operational failure (Redis or AWS
        down, throttled), logged so the next cycle retries. Configuration errors (bad credentials) stop the worker."""
        import redis

        try:
            return action(), ""
        except PoolConfigError:
            raise
        except (PoolOperationFailed, OSError, redis.RedisError) as exc:
            log.warning("%s failed: %s (retrying next cycle)", what, exc)
            return None, f"{what}: {exc}"
