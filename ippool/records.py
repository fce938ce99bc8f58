"""Bookkeeping beside the slots, in Redis: parked EIPs, counters, rotation claims and worker heartbeats.

None of it is the durable record (AWS tags are; `pool reconcile` rebuilds the parked index from them). It makes the
fast checks cheap (is a fresh draw one of our parked addresses?) and gives `pool status` and the exporter their
numbers. Every key is hash-tagged with its host, except the heartbeats, which belong to a worker.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ippool.keys import AWS_THROTTLES_KEY, HOSTS_KEY, WORKER_PREFIX, HostKeys
from ippool.status import text


@dataclass(frozen=True)
class ParkedEntry:
    """A parked EIP as the index holds it."""

    allocation_id: str
    public_ip: str
    slot: int
    parked_until: float  # epoch seconds

    def to_json(self, now: float) -> dict[str, Any]:
        return {"allocation_id": self.allocation_id, "public_ip": self.public_ip, "slot": self.slot,
                "parked_until": self.parked_until, "seconds_left": max(0, int(self.parked_until - now))}


class PoolRecords:
    """The Redis side-records of the pools; `clock` gives epoch seconds."""

    def __init__(self, client: Any, clock: Callable[[], float]) -> None:
        self._client = client
        self._clock = clock

    # -- parked EIPs ---------------------------------------------------------------------------------------

    def park(self, host: str, allocation_id: str, public_ip: str, slot: int, parked_until: float) -> None:
        """Record a parked EIP (after its `parked` tag is set in AWS)."""
        self._client.hset(HostKeys(host).parked, allocation_id, f"{public_ip}|{slot}|{int(parked_until)}")

    def unpark(self, host: str, allocation_id: str) -> None:
        """Forget a parked EIP (released, or back in service)."""
        self._client.hdel(HostKeys(host).parked, allocation_id)

    def parked(self, host: str) -> list[ParkedEntry]:
        """The host's parked EIPs, soonest deadline first."""
        entries = []
        for allocation_id, value in self._client.hgetall(HostKeys(host).parked).items():
            public_ip, slot, until = text(value).split("|")
            entries.append(ParkedEntry(text(allocation_id), public_ip, int(slot), float(until)))
        return sorted(entries, key=lambda entry: (entry.parked_until, entry.allocation_id))

    def is_parked_ip(self, public_ip: str) -> bool:
        """Whether any host holds `public_ip` parked."""
        for host in self._client.smembers(HOSTS_KEY):
            if any(entry.public_ip == public_ip for entry in self.parked(text(host))):
                return True
        return False

    # -- counters --------------------------------------------------------------------------------------------

    def count(self, host: str, name: str, amount: int = 1) -> None:
        """Add to one of the host's counters (rotations, redraws:<reason>, aws_throttles, ...)."""
        self._client.hincrby(HostKeys(host).stats, name, amount)

    def stats(self, host: str) -> dict[str, float]:
        """Every counter and value of the host."""
        return {text(k): float(text(v)) for k, v in self._client.hgetall(HostKeys(host).stats).items()}

    def throttled(self, operation: str = "") -> None:
        """Count one throttled AWS attempt (the adapter's `on_throttle` hook)."""
        self._client.incr(AWS_THROTTLES_KEY)

    def throttles(self) -> int:
        return int(self._client.get(AWS_THROTTLES_KEY) or 0)

    def rotated(self, host: str) -> None:
        """Count a finished rotation and remember when it happened."""
        keys = HostKeys(host)
        self._client.hincrby(keys.stats, "rotations", 1)
        self._client.hset(keys.stats, "last_rotation_ms", int(self._clock() * 1000))

    # -- rotation claims and heartbeats ----------------------------------------------------------------------

    def claim(self, host: str, slot: int, owner: str) -> None:
        self._client.hset(HostKeys(host).claims, str(slot), owner)

    def unclaim(self, host: str, slot: int) -> None:
        self._client.hdel(HostKeys(host).claims, str(slot))

    def claim_owner(self, host: str, slot: int) -> str | None:
        value = self._client.hget(HostKeys(host).claims, str(slot))
        return text(value) if value is not None else None

    def heartbeat(self, owner: str, ttl_s: float) -> None:
        """Say `owner` is alive for the next `ttl_s` seconds (wall time in Redis: a key expiry)."""
        self._client.set(WORKER_PREFIX + owner, "1", px=max(1, int(ttl_s * 1000)))

    def alive(self, owner: str | None) -> bool:
        """Whether `owner` refreshed its heartbeat recently (a killed worker's heartbeat expires)."""
        return owner is not None and bool(self._client.exists(WORKER_PREFIX + owner))

    def drop_heartbeat(self, owner: str) -> None:
        self._client.delete(WORKER_PREFIX + owner)
