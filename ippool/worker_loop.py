"""The pool worker's loop (`sendhost pool worker`): reconcile once at start, then rotate and reap in a loop that
sleeps after each cycle.

Every `quota_every_s` it also records the region's Elastic IP quota and the EIPs the account holds
(`record_quota`), which the exporter serves; a failed reading is logged and only ages the last one.

It reconciles again when a host it saw in Redis vanishes from it (Redis restarted empty), so the pool rebuilds from
AWS tags without waiting for a person.

The sleep comes after a cycle ends, never on a fixed schedule, so cycles cannot overlap however long one takes.
`stop()` (the CLI wires SIGTERM to it) lets the step in hand finish (the slot being rotated, the address being
released) and starts no other.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TypeVar

from ippool.errors import AwsCredentialsError, HostedZoneNotFound, IppoolError, UnknownInstance
from ippool.parking import Reaper, ReapResult
from ippool.rotator import RotationResult, Rotator
from ippool.states import RotationOutcome

log = logging.getLogger("ippool.worker")  # the logger name operators filter on: kept
T = TypeVar("T")


@dataclass(frozen=True)
class CycleReport:
    rotations: list[RotationResult]
    reaped: list[ReapResult]
    errors: list[str]

    def to_json(self) -> dict[str, object]:
        return {"rotations": [r.to_json() for r in self.rotations], "reaped": [r.to_json() for r in self.reaped],
                "errors": self.errors}


@dataclass(frozen=True)
class Lane:
    """Hosts the worker serves through one rotator and reaper: those of one region, whose AWS adapter they use."""

    rotator: Rotator
    reaper: Reaper
    hosts: Sequence[str]


@dataclass
class Worker:
    """Runs `rotator` and `reaper` over `hosts` (and each of `more_lanes` over its own hosts: other regions);
    `reconcile()` (if given) runs once before the first cycle. Heartbeats go through `rotator`: every lane's
    rotator shares its Redis and owner."""

    rotator: Rotator
    reaper: Reaper
    hosts: Sequence[str]
    interval_s: float = 10.0
    reconcile: Callable[[], object] | None = None
    reconcile_every_s: float = 600.0  # also reconcile this often: leftovers of failed steps get cleaned up
    monotonic: Callable[[], float] = time.monotonic
    _stop: threading.Event = field(default_factory=threading.Event)
    reconciled: object = None  # what the last reconcile returned
    rebuilt_hosts: set[str] = field(default_factory=set)  # hosts in Redis after the start-up reconcile
    more_lanes: Sequence[Lane] = ()  # the hosts of further regions, with their region's rotator and reaper

    def lanes(self) -> list[Lane]:
        return [Lane(self.rotator, self.reaper, self.hosts), *self.more_lanes]

    def all_hosts(self) -> list[str]:
        return [host for lane in self.lanes() for host in lane.hosts]
    record_quota: Callable[[], object] | None = None  # reads the EIP quota and usage from AWS into Redis
    quota_every_s: float = 300.0  # Service Quotas allows few requests a second: every few minutes is plenty
    _quota_read_at: float | None = None  # monotonic time of the last attempt

    def stop(self) -> None:
        """Finish the step in hand, then return from `run` (safe to call from a signal handler)."""
        self._stop.set()

    def stopping(self) -> bool:
        return self._stop.is_set()

    def run(self, once: bool = False, on_cycle: Callable[[CycleReport], None] | None = None) -> int:
        """Cycle until stopped (or once); returns the number of cycles run."""
        log.info("worker %s started: %d host(s), sleeping %gs after each cycle", self.rotator.owner,
                 len(self.all_hosts()), self.interval_s)
        if self.reconcile is not None:
            self.reconciled, _error = self._guard("reconcile", self.reconcile)
            registered, _error = self._guard("list hosts", self.rotator.slots.hosts)
            self.rebuilt_hosts = set(registered or []) & set(self.all_hosts())
        cycles = 0
        last_reconcile = self.monotonic()
        while not self.stopping():
            if self.reconcile is not None and self.monotonic() - last_reconcile >= self.reconcile_every_s:
                self.reconciled, _error = self._guard("reconcile", self.reconcile)
                last_reconcile = self.monotonic()
            report = self.run_cycle()
            cycles += 1
            if on_cycle is not None:
                on_cycle(report)
            if once:
                break
            self._stop.wait(self.interval_s)  # the sleep after the cycle; stop() wakes it
        self._guard("drop heartbeat", partial(self.rotator.records.drop_heartbeat, self.rotator.owner))
        return cycles

    def run_cycle(self) -> CycleReport:
        """Rotate every ready slot, then reap every due parked EIP, host by host."""
        rotations: list[RotationResult] = []
        reaped: list[ReapResult] = []
        errors: list[str] = []
        ttl = max(self.rotator.heartbeat_s, 3 * self.interval_s)
        _done, error = self._guard("heartbeat", partial(self.rotator.records.heartbeat, self.rotator.owner, ttl))
        if error:
            errors.append(error)
        self._record_quota_when_due()
        if self.reconcile is not None:
            # Redis lost its data (restarted empty): rebuild from AWS now rather than fall back until a restart.
            registered, error = self._guard("list hosts", self.rotator.slots.hosts)
            if registered is not None and self.rebuilt_hosts and not self.rebuilt_hosts <= set(registered):
                log.warning("hosts %s vanished from Redis: reconciling from AWS",
                            ", ".join(sorted(self.rebuilt_hosts - set(registered))))
                self.reconciled, error = self._guard("reconcile", self.reconcile)
            if error:
                errors.append(error)
        for lane, host in self._each_host():
            if self.stopping():
                break
            found, error = self._guard(f"rotate {host}", partial(lane.rotator.rotate_ready, host, self.stopping))
            if error:
                errors.append(error)
            rotations += found or []
            errors += [f"{r.host} slot {r.slot}: {r.detail}" for r in found or []
                       if r.outcome == RotationOutcome.FAILED]
        for lane in self.lanes():
            if self.stopping():
                break
            # one read of the lane's parked EIPs, then each host's releases: not one AWS read per host
            due, error = self._guard(f"read parked EIPs of {len(lane.hosts)} host(s)",
                                     partial(lane.reaper.due_by_host, lane.hosts))
            if error:
                errors.append(error)
            for host in lane.hosts:
                if self.stopping() or due is None:
                    break
                if host not in due:
                    continue
                done, error = self._guard(f"reap {host}", partial(lane.reaper.reap, host, self.stopping, due[host]))
                if error:
                    errors.append(error)
                reaped += done or []
        return CycleReport(rotations, reaped, errors)

    def _each_host(self) -> list[tuple[Lane, str]]:
        return [(lane, host) for lane in self.lanes() for host in lane.hosts]
    def _record_quota_when_due(self) -> None:
        """Record the EIP quota reading when `quota_every_s` passed since the last attempt (or none was made).

        A failure is logged, not a cycle error, and never stops the worker, not even a refusal of credentials (a
        policy from before servicequotas:GetServiceQuota): rotating and reaping matter more than the reading, and
        the exporter shows the reading's age, which an alert watches."""
        if self.record_quota is None:
            return
        now = self.monotonic()
        if self._quota_read_at is not None and now - self._quota_read_at < self.quota_every_s:
            return
        self._quota_read_at = now
        record = self.record_quota

        def read() -> object:
            try:
                return record()
            except AwsCredentialsError as exc:
                raise IppoolError(str(exc)) from exc

        self._guard("read the EIP quota", read)

    def _guard(self, what: str, action: Callable[[], T]) -> tuple[T | None, str]:
        """Run one part of a cycle: (its result, ""), or (None, message) after a failure the next cycle may not meet
        (Redis or AWS down, throttled, a host Redis just forgot), logged. Errors only a person can fix (credentials,
        an inventory naming an unknown instance or zone) stop the worker."""
        import redis

        try:
            return action(), ""
        except (AwsCredentialsError, UnknownInstance, HostedZoneNotFound):
            raise
        except (IppoolError, OSError, redis.RedisError) as exc:
            log.warning("%s failed: %s (retrying next cycle)", what, exc)
            return None, f"{what}: {exc}"
        except Exception as exc:  # a bug or an answer nobody expected: log it whole, keep the worker alive
            log.exception("%s failed unexpectedly (retrying next cycle)", what)
            return None, f"{what}: {type(exc).__name__}: {exc}"
