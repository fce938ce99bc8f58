"""The simulation's pool worker: provisions each host's pool with ippool's pool lifecycle (`pool create`), then
runs ippool's pool worker cycle (`Worker.run_cycle`: the Rotator on ready slots, the Reaper on parked EIPs past
their deadline), all built by ippool's composition root, and turns what changed into events. A cycle with no
ready slot and no parking deadline passed would do nothing but read, so the simulation skips it: a two-week run has
four thousand worker cycles and only a few hundred do work.

What changed is read back from the real state, not from the components' word: slot generations from Redis
(`pool.status`) and parked/held EIPs from their AWS tags, so the log shows what the pool and AWS really did.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Sequence

from ippool import Pool
from ippool.assembly import PoolMachinery
from ippool.aws.adapter import Ec2Adapter
from ippool.operator_actions import retire_address
from ippool.states import EipState, SlotState
from ippool.status import SlotStatus
from sendhost.model import SenderHost
from simulation import events
from simulation.moto_world import HostWorld


class PoolWorker:
    """Provision, rotate, reap; log placements, retirements, parking and releases."""

    def __init__(self, pool: Pool, adapter: Ec2Adapter, pool_name: str, hosts: list[HostWorld],
                 clock: Callable[[], float], log: events.EventLog) -> None:
        self.pool = pool
        self.adapter = adapter
        self.pool_name = pool_name
        self.hosts = hosts
        self.clock = clock
        self.log = log
        self.specs = {world.host.name: _spec(world) for world in hosts}
        self.machinery = PoolMachinery(pool, adapter, self.specs, clock, pool_name)
        self.records = self.machinery.records
        self.denylist = self.machinery.denylist
        self.worker = self.machinery.worker("simulation", reconcile=False)
        self.outcomes: Counter[str] = Counter()  # rotation outcomes as the rotator reported them
        self.redraw_reasons: Counter[str] = Counter()
        self.errors: list[str] = []  # what the worker's cycles reported as failed
        self.seen_ips: set[str] = set()  # every address that ever served in a slot
        self._parked: dict[str, events.Parked] = {}  # allocation id -> its parking, as AWS tags say
        self.held = 0
        self._by_command: set[tuple[str, int, int]] = set()  # (host, slot, generation) retired by on-call
        # Each host's slots active and under budget, read from Redis at a sample, until that host's pool changes.
        self._leasable: dict[str, int] = {}
        # Hosts a look found with no slot ready, unchanged since. A slot becomes ready only when it is leased (its
        # budget spent) and its leases are gone; the agents release each lease within the send, so a host with no
        # change since such a look has no slot ready now. A lease changes its own host alone; a cycle or on-call's
        # retirement may change any (`leased`).
        self._unready: set[str] = set()

    def provision(self) -> None:
        """`pool create` for every host: slot IPs, one tagged and associated EIP per slot, slots in Redis."""
        lifecycle = self.machinery.lifecycle()
        for name, spec in self.specs.items():
            lifecycle.create(spec, spec.pool.slots)
            for slot in self._slots(name).values():
                if slot.public_ip:
                    self._placed(name, slot.slot, slot.generation, slot.public_ip, slot.allocation_id or "",
                                 slot.budget, "provision")
        self._read_aws()

    def cycle(self) -> None:
        """One pool worker cycle, when there is work: a slot ready to rotate or a parked EIP past its deadline."""
        now = self.clock()
        due = any(parked.until <= now for parked in self._parked.values())
        names = [world.host.name for world in self.hosts]
        # Only the hosts that changed since a look found none ready are asked (every host, after a cycle).
        asked = [name for name in names if name not in self._unready]
        if not due and not asked:
            return  # no slot was ready at the last look and the pool has not changed since: none is now
        ready = self.pool.slots.ready_by_host(asked, now=now)
        if not any(ready.values()) and not due:
            self._unready.update(asked)
            return
        # only a host with a slot ready now can rotate in this cycle (the clock stands still during it)
        before = self._slots_of([name for name in names if ready.get(name)])
        report = self.worker.run_cycle()
        self.leased()
        for result in report.rotations:
            self.outcomes[result.outcome] += 1
            self.redraw_reasons.update(reason.split(":")[0] for reason in result.redraws)
        self.errors += report.errors
        for name, slots in before.items():
            self._diff(name, slots)
        if report.rotations or report.reaped or report.errors:
            self._read_aws()  # else the cycle allocated, parked and released nothing: AWS is as last read

    def retire(self, host: str, slot: int, reason: str = "on-call: burned address") -> str:
        """On-call's `pool retire --ip`: the slot's address takes no new lease and is denied; the worker rotates it."""
        current = self._slots(host)[slot]
        if current.public_ip is None or current.state != SlotState.ACTIVE:
            return current.state  # already on its way out (or empty): the command changes nothing
        self._by_command.add((host, slot, current.generation))
        self.leased()
        return retire_address(self.pool.slots, self.denylist, self.records, current.public_ip, reason).state

    def leasable(self) -> int:
        """Slots active and under budget, across hosts: the addresses in service now. A host is read again only
        after its pool changed: most samples of a night fall where nothing leased, rotated or retired, and a lease
        changes one host of a fleet."""
        stale = [world.host.name for world in self.hosts if world.host.name not in self._leasable]
        for host, slots in self._slots_of(stale).items():
            self._leasable[host] = sum(1 for slot in slots.values()
                                       if slot.state == SlotState.ACTIVE and slot.used < slot.budget)
        return sum(self._leasable.values())

    def leased(self, host: str | None = None) -> None:
        """The pool of `host` may have changed (a sender's attempt there leased), or any host's (None: a cycle
        rotated, on-call retired): read it again."""
        if host is None:
            self._leasable.clear()
            self._unready.clear()
        else:
            self._leasable.pop(host, None)
            self._unready.discard(host)

    @property
    def parked_count(self) -> int:
        return len(self._parked)

    def _slots(self, host: str) -> dict[int, SlotStatus]:
        return self._slots_of([host])[host]

    def _slots_of(self, hosts: Sequence[str]) -> dict[str, dict[int, SlotStatus]]:
        """Each host's slots, every host read at once (a fleet's sample is a few round trips, not two per host)."""
        if not hosts:
            return {}
        return {status.host: {slot.slot: slot for slot in status.slots}
                for status in self.pool.status_of(hosts, now=self.clock())}

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
        self.log.placements.append(events.PlacementRecord(self.clock(), host, slot, generation, public_ip,
                                                          allocation_id, budget, fresh, by))

    def _read_aws(self) -> None:
        """Parked and held EIPs from their AWS tags; log what was parked or released since the last look."""
        now = self.clock()
        addresses = self.adapter.describe_pool_addresses(self.pool_name)
        self.held = len(addresses)
        retired_ids = {r.allocation_id for r in self.log.retirements}
        current: dict[str, events.Parked] = {}
        for address in addresses:
            if address.state != EipState.PARKED:
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


def _spec(world: HostWorld) -> SenderHost:
    """The host's record, on the instance moto made for it."""
    return dataclasses.replace(world.host, instance_id=world.instance_id)
