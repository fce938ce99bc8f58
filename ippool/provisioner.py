"""Creating and destroying a host's pool: secondary private IPs, one tagged EIP per slot, the slots in Redis.

`create` is idempotent: it reads what AWS and Redis already hold and only adds what is missing, so a second run
(or a run after a crash halfway) changes nothing that is already right. `destroy` returns every EIP of the host:
PTR reset, detached, released, denied; then the slot IPs and the host's Redis keys go.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Callable
from dataclasses import dataclass

from ippool.aws import Ec2Adapter
from ippool.aws_models import STATE_ACTIVE, STATE_INCOMING, TAG_STATE, Address, pool_tags
from ippool.errors import AddressQuotaExceeded, SlotLimitExceeded
from ippool.keys import HOSTS_KEY, HostKeys
from ippool.pool import Pool
from ippool.quota import quota_advice
from ippool.reaper import Reaper
from ippool.spec import DEFAULT_POOL_NAME, TAG_PRIVATE_IP, HostSpec

log = logging.getLogger("ippool.provisioner")


@dataclass(frozen=True)
class SlotRecord:
    """One slot after `create`: its addresses and whether this run made them."""

    slot: int
    private_ip: str
    public_ip: str
    allocation_id: str
    action: str  # "created" or "kept"

    def to_json(self) -> dict[str, object]:
        return {"slot": self.slot, "private_ip": self.private_ip, "public_ip": self.public_ip,
                "allocation_id": self.allocation_id, "action": self.action}


def serving(addresses: list[Address], slot: int) -> Address | None:
    """The EIP of ours that serves `slot`: tagged active for it and associated (moto ignores the private IP, so the
    slot tag, not the reported private IP, says which slot)."""
    for address in addresses:
        if address.slot == slot and address.state == STATE_ACTIVE and address.associated:
            return address
    return None


@dataclass
class Provisioner:
    aws: Ec2Adapter
    pool: Pool
    reaper: Reaper
    pool_name: str = DEFAULT_POOL_NAME

    def create(self, spec: HostSpec, slots: int, progress: Callable[[str], None] = lambda line: None,
               ) -> list[SlotRecord]:
        """Give `spec`'s host `slots` slots, each with a tagged EIP, registered in Redis. Idempotent."""
        instance = self.aws.describe_instance(spec.instance_id)
        allowed = self.aws.max_private_ips_per_interface(instance.instance_type) - 1
        if slots > allowed:
            raise SlotLimitExceeded(
                f"host {spec.name}: --slots {slots} is more than instance type {instance.instance_type} allows "
                f"({allowed} secondary private IPs per interface): lower --slots or use a larger instance type")
        eni = instance.primary_interface
        ours = self.aws.describe_pool_addresses(self.pool_name, host=spec.name)
        private_ips = self._slot_private_ips(spec, slots, eni.eni_id, list(eni.secondary_private_ips), ours)
        self.pool.register_host(spec.name, spec.primary_ip or eni.primary_private_ip, budget=spec.budget)
        records = []
        for slot, private_ip in enumerate(private_ips):
            current = serving(ours, slot)
            action = "kept"
            if current is None:
                try:
                    current = self._place(spec, slot, eni.eni_id, private_ip)
                except AddressQuotaExceeded as exc:
                    raise AddressQuotaExceeded(
                        f"{exc}; slots 0..{slot - 1} of {spec.name} are in service, {slots - slot} still need an "
                        f"address; {quota_advice(self.aws, extra=slots - slot)}") from exc
                action = "created"
            held = self.pool.slot_status(spec.name, slot)
            if held.allocation_id != current.allocation_id:
                self.pool.put_address(spec.name, slot, private_ip=private_ip, public_ip=current.public_ip,
                                      allocation_id=current.allocation_id)
            progress(f"slot {slot}: {private_ip} -> {current.public_ip} ({action})")
            records.append(SlotRecord(slot, private_ip, current.public_ip, current.allocation_id, action))
        return records

    def _slot_private_ips(self, spec: HostSpec, slots: int, eni_id: str, secondary: list[str],
                          ours: list[Address]) -> list[str]:
        """Slot n keeps the private IP it had (Redis, else its EIP's tag); new slots take free secondary IPs,
        assigned on the ENI when there are too few."""
        known: dict[int, str] = {}
        for address in ours:
            if address.slot is not None and address.tags.get(TAG_PRIVATE_IP) and address.state == STATE_ACTIVE:
                known.setdefault(address.slot, address.tags[TAG_PRIVATE_IP])
        registered = self.pool.status(spec.name)[0].slots if spec.name in self.pool.hosts() else ()
        for held in registered:
            if held.private_ip:
                known[held.slot] = held.private_ip
        free = [ip for ip in secondary if ip not in known.values()]
        missing = [slot for slot in range(slots) if slot not in known]
        if len(free) < len(missing):
            interface = self.aws.assign_secondary_private_ips(eni_id, len(missing) - len(free))
            free += [ip for ip in interface.secondary_private_ips if ip not in free and ip not in known.values()]
        free.sort(key=ipaddress.ip_address)
        for slot in missing:
            known[slot] = free.pop(0)
        return [known[slot] for slot in range(slots)]

    def _place(self, spec: HostSpec, slot: int, eni_id: str, private_ip: str) -> Address:
        tags = pool_tags(self.pool_name, spec.name, slot, STATE_INCOMING)
        tags[TAG_PRIVATE_IP] = private_ip
        address = self.aws.allocate_address(tags)
        self.aws.associate_address(address.allocation_id, eni_id, private_ip)
        self.aws.create_tags(address.allocation_id, {TAG_STATE: STATE_ACTIVE})
        placed = self.aws.get_address(address.allocation_id)
        return placed if placed is not None else address

    def destroy(self, spec: HostSpec) -> list[Address]:
        """Return every EIP of the host (PTR reset, detached, released, denied), unassign its slot IPs, forget it
        in Redis. Safe to run again after a failure: it starts from what AWS still holds."""
        ours = self.aws.describe_pool_addresses(self.pool_name, host=spec.name)
        for address in ours:
            self.reaper.release(spec.name, address, detach=True)
        slot_ips = [s.private_ip for s in self.pool.status(spec.name)[0].slots if s.private_ip] \
            if spec.name in self.pool.hosts() else []
        slot_ips += [a.tags[TAG_PRIVATE_IP] for a in ours if a.tags.get(TAG_PRIVATE_IP)]
        eni = self.aws.describe_instance(spec.instance_id).primary_interface
        to_unassign = sorted(set(slot_ips) & set(eni.secondary_private_ips), key=ipaddress.ip_address)
        if to_unassign:
            self.aws.unassign_secondary_private_ips(eni.eni_id, to_unassign)
        self._forget(spec.name)
        return ours

    def _forget(self, host: str) -> None:
        keys = HostKeys(host)
        client = self.pool.client
        count = int(client.hget(keys.meta, "slot_count") or 0)
        for key in [keys.meta, keys.leases, keys.parked, keys.claims, keys.stats, *keys.slots(count)]:
            client.delete(key)
        client.srem(HOSTS_KEY, host)
