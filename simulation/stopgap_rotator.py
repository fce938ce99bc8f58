"""A stop-gap rotator and reaper for the simulation, built only on the lease engine's fenced admin methods and
the AWS adapter, used until ippool's own rotator and reaper are merged.

It follows DESIGN.md's rotation steps: claim a ready slot (generation CAS), allocate a tagged EIP, park and redraw
an address that is denied or parked, associate with AllowReassociation, park the old EIP for `park_minutes`, tag
the new one active and publish it. The reaper releases parked EIPs past their deadline and denies their address
for 7 days. Reverse DNS is not touched (moto does not implement it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ippool import Pool
from ippool.aws import Ec2Adapter
from ippool.aws_models import STATE_ACTIVE, STATE_INCOMING, STATE_PARKED, Address, pool_tags

DENY_S = 7 * 86_400
MAX_REDRAWS = 8


@dataclass
class _Parked:
    host: str
    slot: int
    address: Address
    until: float


@dataclass
class StopgapRotator:
    """Rotates ready slots and reaps parked EIPs of one pool (all hosts of one account and region)."""

    pool: Pool
    adapter: Ec2Adapter
    pool_name: str
    clock: Callable[[], float]
    enis: dict[str, str]  # host -> the ENI holding its slots
    park_minutes: dict[str, float]  # host -> parking time
    denied: dict[str, float] = field(default_factory=dict)  # public IP -> end of its denial
    parked: dict[str, _Parked] = field(default_factory=dict)  # allocation id -> parked EIP

    def rotate_ready(self, host: str) -> int:
        """Rotate every ready slot of `host`; return how many were rotated."""
        rotated = 0
        for ready in self.pool.ready_slots(host):
            claimed = self.pool.mark_rotating(host, ready.slot, ready.generation)
            if claimed is None or claimed.private_ip is None:
                continue
            new = self._draw(host, ready.slot)
            self.adapter.associate_address(new.allocation_id, self.enis[host], claimed.private_ip)
            if claimed.allocation_id and claimed.public_ip:
                old = Address(claimed.allocation_id, claimed.public_ip)
                self._park(host, ready.slot, old)
            self.adapter.create_tags(new.allocation_id, pool_tags(self.pool_name, host, ready.slot, STATE_ACTIVE))
            placed = self.pool.publish(host, ready.slot, ready.generation, private_ip=claimed.private_ip,
                                       public_ip=new.public_ip, allocation_id=new.allocation_id)
            if placed is None:  # fenced out: park what we allocated rather than leak it
                self._park(host, ready.slot, new)
                continue
            rotated += 1
        return rotated

    def _draw(self, host: str, slot: int) -> Address:
        """A new EIP whose address is neither denied nor parked: refused draws are parked, and we draw again."""
        tags = pool_tags(self.pool_name, host, slot, STATE_INCOMING)
        for _ in range(MAX_REDRAWS):
            address = self.adapter.allocate_address(tags)
            if not self._refused(address.public_ip):
                return address
            self._park(host, slot, address)
        return self.adapter.allocate_address(tags)  # bounded: after that, accept what AWS gives

    def _refused(self, public_ip: str) -> bool:
        return (self.denied.get(public_ip, 0.0) > self.clock()
                or any(p.address.public_ip == public_ip for p in self.parked.values()))

    def _park(self, host: str, slot: int, address: Address) -> None:
        until = self.clock() + self.park_minutes[host] * 60
        self.adapter.create_tags(address.allocation_id,
                                 pool_tags(self.pool_name, host, slot, STATE_PARKED, parked_until=until))
        self.parked[address.allocation_id] = _Parked(host, slot, address, until)

    def reap(self) -> int:
        """Release every parked EIP past its deadline and deny its address for 7 days; return how many."""
        now = self.clock()
        due = [key for key, parked in self.parked.items() if parked.until <= now]
        for allocation_id in due:
            parked = self.parked.pop(allocation_id)
            self.adapter.release_address(allocation_id)
            self.denied[parked.address.public_ip] = now + DENY_S
        return len(due)
