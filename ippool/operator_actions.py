"""What on-call does by hand (`sendhost pool rotate`, `retire`, `status`): rotate a host's slots now, retire a burned
address, read the pool's side records.

Each returns data for the CLI to render; waiting and time are injected (`sleep`, `clock`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ippool.denylist import Denylist
from ippool.errors import PoolConfigError, PoolOperationFailed
from ippool.records import PoolRecords
from ippool.rotator import RotationResult, Rotator
from ippool.slot_store import SlotStore
from ippool.states import SlotState

POLL_S = 0.5


def rotate_now(rotator: Rotator, host: str, slots: list[int] | None, *, timeout_s: float, force: bool,
               sleep: Callable[[float], None]) -> list[RotationResult]:
    """Retire the slots (all with an address when `slots` is None) and rotate each as soon as it is ready.

    Without `force`, a slot waits for its live leases to be released or to expire, up to `timeout_s` (counted on the
    rotator's clock); then PoolOperationFailed says how many are still live (the slot stays retiring and the worker
    rotates it when they end). With `force`, the leases are dropped and the slot rotates at once.
    """
    pool, clock = rotator.slots, rotator.clock
    state = pool.status(host, now=clock())[0]
    wanted = slots if slots is not None else [s.slot for s in state.slots if s.state != SlotState.EMPTY]
    for slot in wanted:
        if slot >= len(state.slots) or state.slots[slot].state == SlotState.EMPTY:
            raise PoolConfigError(f"host {host} has no slot {slot} with an address (slots: 0..{len(state.slots) - 1})")
    results = []
    for slot in wanted:
        pool.retire(host, slot)
        if force:
            pool.force_ready(host, slot)
        deadline = clock() + timeout_s
        while True:
            ready = {r.slot: r for r in pool.ready_slots(host, now=clock())}
            if slot in ready:
                results.append(rotator.rotate_slot(host, ready[slot]))
                break
            if clock() >= deadline:
                current = pool.slot_status(host, slot, now=clock())
                raise PoolOperationFailed(
                    f"{host} slot {slot} still has {current.live_leases} live lease(s) after {timeout_s:g}s "
                    f"(state {current.state}): it takes no new leases and the worker rotates it when they end; "
                    f"pass --force to rotate now")
            sleep(POLL_S)
    return results


@dataclass(frozen=True)
class Retired:
    host: str | None
    slot: int | None
    public_ip: str
    state: str  # the slot's state afterwards (a SlotState), or "parked" for an address not in a slot
    reason: str

    def to_json(self) -> dict[str, object]:
        return {"host": self.host, "slot": self.slot, "public_ip": self.public_ip, "state": self.state,
                "reason": self.reason}


def retire_address(pool: SlotStore, denylist: Denylist, records: PoolRecords, public_ip: str, reason: str) -> Retired:
    """Take `public_ip` out of service now (no new lease) and deny it for 7 days, wherever it is.

    The slot rotates as soon as its live leases end (the worker, or `pool rotate`); a parked address only gets
    denied. PoolConfigError when no host holds the address.
    """
    for state in pool.status():
        for slot in state.slots:
            if slot.public_ip == public_ip and slot.state != SlotState.EMPTY:
                after = pool.retire(state.host, slot.slot)
                denylist.add(state.host, public_ip)
                records.count(state.host, "retired")
                return Retired(state.host, slot.slot, public_ip, after, reason)
        if any(entry.public_ip == public_ip for entry in records.parked(state.host)):
            denylist.add(state.host, public_ip)
            return Retired(state.host, None, public_ip, "parked", reason)
    hosts = ", ".join(s.host for s in pool.status()) or "none registered"
    raise PoolConfigError(f"address {public_ip} is in no slot and not parked on any host ({hosts}): "
                          f"check it with `sendhost pool status`")


@dataclass(frozen=True)
class HostExtras:
    """What `pool status` adds to the slots: parked EIPs with time left, denylist size, last rotation."""

    parked: list[dict[str, Any]]
    denylist_size: int
    last_rotation: float | None  # epoch seconds


def host_extras(records: PoolRecords, denylist: Denylist, host: str, now: float) -> HostExtras:
    """The parked EIPs, denylist size and last rotation of `host`, read at `now` (epoch seconds)."""
    stats = records.stats(host)
    last = stats.get("last_rotation_ms")
    return HostExtras(parked=[entry.to_json(now) for entry in records.parked(host)],
                      denylist_size=denylist.size(host), last_rotation=last / 1000 if last else None)

