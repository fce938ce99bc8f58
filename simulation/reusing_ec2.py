"""An EC2 stand-in that hands recently released Elastic IPs straight back, for the simulator and `bench/reuse.py`.

Named fake, so it lives beside the simulation, not in `ippool`. AWS does not promise a fresh address on
AllocateAddress: in staging, 498 redraws returned only 4 distinct IPs. This stand-in models that, and nothing
else: it is the real `Ec2Adapter` (run it against moto,
in-process under `moto.mock_aws()` or a moto server via `endpoint_url`), except that it chooses which address
each allocation gets and asks for it through AllocateAddress's `Address` parameter, which moto honours.

The model, per stand-in (one stand-in = one AWS account and region):

- AWS remembers the last `recent` addresses released (default 4, the staging observation), most recent last;
- an allocation, with probability `reuse_probability` (default 0.99), gets one of those that nobody holds now,
  chosen uniformly; otherwise, or when all of them are held again, it gets a never-seen address from
  `fresh_network` (default 198.18.0.0/15, the benchmarking range, so a stand-in address can never be real);
- an address still allocated (active, incoming or parked) is never handed to anyone else;
- a released address's tags go with it, as in AWS. moto keeps them, and reads every tag it ever held for each
  address it describes, so without this its DescribeAddresses slowed as a run went on (a third of `make demo`).

So a rotator that releases the old address at once mostly gets it back; one that keeps recently retired
addresses parked (still allocated) leaves AWS nothing recent to hand back, and draws fresh ones.
Deterministic for a given `seed`: the same calls give the same addresses.
"""

from __future__ import annotations

import ipaddress
import random
from collections import deque
from collections.abc import Mapping
from typing import Any

from ippool.aws.adapter import Ec2Adapter, SessionFactory
from ippool.aws.models import Address


class ReusingEc2StandIn(Ec2Adapter):
    """Named fake: `Ec2Adapter` whose allocations follow the address-reuse model in this module's docstring."""

    def __init__(self, session_factory: SessionFactory, region: str, *, seed: int,
                 reuse_probability: float = 0.99, recent: int = 4, fresh_network: str = "198.18.0.0/15",
                 **adapter_kwargs: Any) -> None:
        if not 0.0 <= reuse_probability <= 1.0 or recent < 1:
            raise ValueError("reuse_probability must be in [0, 1] and recent >= 1")
        super().__init__(session_factory, region, **adapter_kwargs)
        self.reuse_probability = reuse_probability
        self._choices = random.Random(seed)  # its own RNG: the adapter's jitter RNG must not shift the addresses
        self._network = ipaddress.ip_network(fresh_network)
        self._recently_released: deque[str] = deque(maxlen=recent)
        self._held: set[str] = set()
        self._ip_by_allocation: dict[str, str] = {}
        self._tag_keys: dict[str, set[str]] = {}  # allocation id -> the keys it was tagged with
        self.ever_allocated: set[str] = set()
        self.handed_back = 0  # allocations that got a recently released address
        self.fresh = 0  # allocations that got a never-seen address

    def _fresh_address(self) -> str:
        size = self._network.num_addresses
        if len(self.ever_allocated) >= size - 2:
            raise RuntimeError(f"stand-in ran out of fresh addresses in {self._network}")
        while True:
            candidate = str(self._network[self._choices.randrange(1, size - 1)])
            if candidate not in self.ever_allocated:
                return candidate

    def _choose_address(self) -> str:
        returnable = [ip for ip in self._recently_released if ip not in self._held]
        if returnable and self._choices.random() < self.reuse_probability:
            self.handed_back += 1
            return self._choices.choice(returnable)
        self.fresh += 1
        return self._fresh_address()

    def allocate_address(self, tags: Mapping[str, str], address: str | None = None) -> Address:
        """Allocate through the real adapter, asking for the address the reuse model picks (or `address`)."""
        wanted = address if address is not None else self._choose_address()
        if wanted in self._held:
            raise ValueError(f"stand-in: {wanted} is still allocated")
        allocated = super().allocate_address(tags, address=wanted)
        self._held.add(allocated.public_ip)
        self._ip_by_allocation[allocated.allocation_id] = allocated.public_ip
        self._tag_keys[allocated.allocation_id] = set(tags)
        self.ever_allocated.add(allocated.public_ip)
        return allocated

    def create_tags(self, resource_id: str, tags: Mapping[str, str]) -> None:
        super().create_tags(resource_id, tags)
        self._tag_keys.setdefault(resource_id, set()).update(tags)

    def release_address(self, allocation_id: str) -> bool:
        """Release through the real adapter; the address joins AWS's recently released list, and its tags go."""
        released = super().release_address(allocation_id)
        keys = self._tag_keys.pop(allocation_id, set())
        if released and keys:
            self._drop_tags(allocation_id, sorted(keys))
        public_ip = self._ip_by_allocation.pop(allocation_id, None)
        if released and public_ip is not None:
            self._held.discard(public_ip)
            if public_ip in self._recently_released:
                self._recently_released.remove(public_ip)
            self._recently_released.append(public_ip)
        return released

    def _drop_tags(self, allocation_id: str, keys: list[str]) -> None:
        """AWS's own doing, not a call of the tool's: past the adapter's pacing and its on_call hook."""
        self._client("ec2").delete_tags(Resources=[allocation_id], Tags=[{"Key": key} for key in keys])

    @property
    def recently_released(self) -> tuple[str, ...]:
        """The addresses AWS would hand back next, oldest first."""
        return tuple(self._recently_released)
