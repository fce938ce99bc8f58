"""The simulation's pool worker: provisions each host's slots, then, every cycle, rotates ready slots and reaps
parked EIPs through a rotation backend, and turns what changed into events.

What changed is read back from the real state, not from the backend's word: slot generations from Redis
(`pool.status`) and parked/held EIPs from their AWS tags, so the log shows what the pool and AWS really did.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from ippool import Pool
from ippool.aws import Ec2Adapter
from ippool.aws_models import STATE_ACTIVE, STATE_PARKED, pool_tags
from ippool.status import SlotStatus
from simulation import events
from simulation.moto_world import HostWorld


class RotationBackend(Protocol):
    """What the worker drives: rotate a host's ready slots, and release parked EIPs past their deadline."""

    def rotate_ready(self, host: str) -> int: ...

    def reap(self) -> int: ...


class PoolWorker:
    """Provision, rotate, reap; log placements, retirements, parking and releases."""

    def __init__(self, pool: Pool, adapter: Ec2Adapter, pool_name: str, hosts: list[HostWorld],
                 backend: RotationBackend, clock: Callable[[], float], log: events.EventLog) -> None:
        self.pool = pool
        self.adapter = adapter
        self.pool_name = pool_name
        self.hosts = hosts
        self.backend = backend
        self.clock = clock
        self.log = log
        self.seen_ips: set[str] = set()  # every address that ever served in a slot
        self._parked: dict[str, events.Parked] = {}  # allocation id -> its parking, as AWS tags say
        self.held = 0
        self._by_command: set[tuple[str, int, int]] = set()  # (host, slot, generation) retired by on-call

    def provision(self) -> None:
        """Register every host and put a freshly allocated, associated EIP in each of its slots."""
        for world in self.hosts:
            host = world.host
            self.pool.register_host(host.name, host.primary_ip, budget=host.budget)
            for slot, private_ip in enumerate(world.slot_ips):
                address = self.adapter.allocate_address(pool_tags(self.pool_name, host.name, slot, STATE_ACTIVE))
                self.adapter.associate_address(address.allocation_id, world.eni_id, private_ip)
                placed = self.pool.put_address(host.name, slot, private_ip=private_ip, public_ip=address.public_ip,
                                               allocation_id=address.allocation_id)
                self._placed(host.name, slot, placed.generation, address.public_ip, address.allocation_id,
                             placed.budget, "provision")
        self._read_aws()

    def cycle(self) -> None:
        """One worker pass: rotate hosts with ready slots, reap when a parking deadline has passed."""
        now = self.clock()
        changed = False
        for world in self.hosts:
            name = world.host.name
            if not self.pool.ready_slots(name):
                continue
            before = self._slots(name)
            if self.backend.rotate_ready(name):
                changed = True
                self._diff(name, before)
        if any(parked.until <= now for parked in self._parked.values()) and self.backend.reap():
            changed = True
        if changed:
            self._read_aws()

    def retire(self, host: str, slot: int) -> str:
        """On-call's `pool retire`: stop new leases on the slot now; the next cycle rotates it."""
        generation = self._slots(host)[slot].generation
        self._by_command.add((host, slot, generation))
        return self.pool.retire(host, slot)

    def leasable(self) -> int:
        """Slots active and under budget, across hosts: the addresses in service now."""
        return sum(1 for world in self.hosts for slot in self._slots(world.host.name).values()
                   if slot.state == "active" and slot.used < slot.budget)

    @property
    def parked_count(self) -> int:
        return len(self._parked)

    def _slots(self, host: str) -> dict[int, SlotStatus]:
        return {slot.slot: slot for slot in self.pool.status(host, now=self.clock())[0].slots}

    def _diff(self, host: str, before: dict[int, SlotStatus]) -> None:
        for index, after in self._slots(host).items():
            old = before.get(index)
            if old is None or after.generation == old.generation or after.public_ip is None:
                continue
            if old.public_ip and old.allocation_id:
                self.log.retirements.append(events.Retirement(
                    self.clock(), host, index, old.generation, old.public_ip, old.allocation_id, old.used,
                    old.budget, by_command=(host, index, old.generation) in self._by_command))
            self._placed(host, index, after.generation, after.public_ip, after.allocation_id or "", after.budget,
                         "rotation")

    def _placed(self, host: str, slot: int, generation: int, public_ip: str, allocation_id: str, budget: int,
                by: str) -> None:
        fresh = public_ip not in self.seen_ips
        self.seen_ips.add(public_ip)
        self.log.placements.append(events.Placement(self.clock(), host, slot, generation, public_ip, allocation_id,
                                                    budget, fresh, by))

    def _read_aws(self) -> None:
        """Parked and held EIPs from their AWS tags; log what was parked or released since the last look."""
        now = self.clock()
        addresses = self.adapter.describe_pool_addresses(self.pool_name)
        self.held = len(addresses)
        retired_ids = {r.allocation_id for r in self.log.retirements}
        current: dict[str, events.Parked] = {}
        for address in addresses:
            if address.state != STATE_PARKED:
                continue
            known = self._parked.get(address.allocation_id)
            if known is None:
                reason = "retired" if address.allocation_id in retired_ids else "redraw"
                known = events.Parked(now, address.host or "?", address.public_ip, address.allocation_id,
                                      address.parked_until or now, reason)
                self.log.parked.append(known)
            current[address.allocation_id] = known
        for allocation_id, parked in self._parked.items():
            if allocation_id not in current:
                self.log.released.append(events.Released(now, parked.host, parked.public_ip, allocation_id,
                                                         parked.at))
        self._parked = current
