"""Creating and destroying a host's pool: secondary private IPs, one tagged EIP per slot, the slots in Redis.

The pool is the one source of slot addresses: `provision` and `host verify` read them from Redis. The inventory's
`sendhost_pool.private_ips`, when given, only tell `create` which addresses to assign (slot n gets private_ips[n]).

`create` is idempotent: it reads what AWS and Redis already hold and only adds what is missing, so a second run
(or a run after a crash halfway) changes nothing that is already right. `destroy` returns every EIP of the host:
PTR reset, detached, released, denied; then the slot IPs and the host's Redis keys go.
"""

from __future__ import annotations

import ipaddress
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from ippool import ownership
from ippool.aws.adapter import Ec2Adapter
from ippool.aws.models import Address, NetworkInterface
from ippool.aws.quotas import quota_advice
from ippool.eip_placement import place_new, serving
from ippool.errors import AddressQuotaExceeded, PtrStillSet, SlotLimitExceeded
from ippool.named_slots import check_named_slot_ips, named_slot_ips
from ippool.parking import PTR_STILL_SET, Reaper
from ippool.slot_store import SlotStore
from ippool.spec import DEFAULT_POOL_NAME, TAG_PRIVATE_IP
from ippool.states import EipState
from sendhost.model import SenderHost

log = logging.getLogger("ippool.pool_lifecycle")


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


@dataclass
class PoolLifecycle:
    """Creates and destroys the pools of hosts (`sendhost pool create` / `destroy`)."""

    aws: Ec2Adapter
    slots: SlotStore
    reaper: Reaper
    pool_name: str = DEFAULT_POOL_NAME
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep
    ptr_release_wait_s: float = 1800.0  # AWS refuses release for minutes after a PTR reset: destroy waits this long
    ptr_release_poll_s: float = 30.0

    def create(self, spec: SenderHost, slots: int, progress: Callable[[str], None] = lambda line: None,
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
        private_ips = self._slot_private_ips(spec, slots, eni, ours)  # checked and assigned before any EIP
        self.slots.register_host(spec.name, spec.primary_ip or eni.primary_private_ip, budget=spec.pool.budget)
        records = []
        for slot, private_ip in enumerate(private_ips):
            current = serving(ours, slot)
            action = "kept"
            if current is None:
                try:
                    current = place_new(self.aws, self.pool_name, spec, slot, eni.eni_id, private_ip)
                except AddressQuotaExceeded as exc:
                    raise AddressQuotaExceeded(
                        f"{exc}; slots 0..{slot - 1} of {spec.name} are in service, {slots - slot} still need an "
                        f"address; {quota_advice(self.aws, extra=slots - slot)}") from exc
                action = "created"
            held = self.slots.slot_status(spec.name, slot)
            if held.allocation_id != current.allocation_id:
                self.slots.put_address(spec.name, slot, private_ip=private_ip, public_ip=current.public_ip,
                                      allocation_id=current.allocation_id)
            progress(f"slot {slot}: {private_ip} -> {current.public_ip} ({action})")
            records.append(SlotRecord(slot, private_ip, current.public_ip, current.allocation_id, action))
        return records

    def _slot_private_ips(self, spec: SenderHost, slots: int, eni: NetworkInterface, ours: list[Address],
                          ) -> list[str]:
        """Slot n's private IP. With the inventory's `private_ips`: exactly private_ips[n], checked against AWS
        before anything is assigned (PoolConfigError otherwise). Without: slot n keeps the private IP it had (Redis,
        else its EIP's tag); new slots take free secondary IPs, assigned on the ENI when there are too few."""
        secondary = list(eni.secondary_private_ips)
        known = self._kept_private_ips(spec, secondary, ours)
        on_interface = self.aws.describe_interface_addresses(eni.eni_id)
        if spec.pool.private_ips:
            named = named_slot_ips(spec.name, spec.pool.private_ips, slots)
            check_named_slot_ips(self.aws, self.pool_name, spec.name, eni, named, known, on_interface)
            missing_ips = [ip for ip in named if ip not in secondary]
            if missing_ips:
                self.aws.assign_private_ips(eni.eni_id, missing_ips)
            return list(named)
        # A secondary IP that already holds an Elastic IP not tagged as this pool's belongs to someone else.
        taken = {a.private_ip for a in on_interface if a.associated and a.private_ip and a.pool != self.pool_name}
        free = [ip for ip in secondary if ip not in known.values() and ip not in taken]
        missing = [slot for slot in range(slots) if slot not in known]
        if len(free) < len(missing):
            interface = self.aws.assign_secondary_private_ips(eni.eni_id, len(missing) - len(free))
            free += [ip for ip in interface.secondary_private_ips
                     if ip not in free and ip not in known.values() and ip not in taken]
        free.sort(key=ipaddress.ip_address)
        for slot in missing:
            known[slot] = free.pop(0)
        return [known[slot] for slot in range(slots)]

    def _kept_private_ips(self, spec: SenderHost, secondary: list[str], ours: list[Address]) -> dict[int, str]:
        """slot -> the private IP an existing slot serves from: Redis's when AWS says it is a secondary IP of this
        ENI, else the tag of the slot's active EIP."""
        known: dict[int, str] = {}
        for address in ours:
            if address.slot is not None and address.tags.get(TAG_PRIVATE_IP) and address.state == EipState.ACTIVE:
                known.setdefault(address.slot, address.tags[TAG_PRIVATE_IP])
        registered = self.slots.status(spec.name)[0].slots if spec.name in self.slots.hosts() else ()
        for held in registered:  # Redis's private IP only when AWS says it is a secondary IP of this ENI
            if held.private_ip and held.private_ip in secondary:
                known[held.slot] = held.private_ip
        return known

    def _release_waiting(self, host: str, address: Address) -> None:
        """Release one EIP, waiting out AWS's InvalidAddress.PtrSet after its PTR reset (minutes) instead of failing;
        past `ptr_release_wait_s`, a clear error: run destroy again later."""
        deadline = self.clock() + self.ptr_release_wait_s
        current: Address | None = address
        while current is not None:
            result = self.reaper.release(host, current, detach=True)
            if result.released or result.detail != PTR_STILL_SET:
                return
            if self.clock() >= deadline:
                raise PtrStillSet(
                    f"host {host}: AWS still holds the reverse DNS of {address.public_ip} ({address.allocation_id}) "
                    f"after {self.ptr_release_wait_s:.0f}s: run `sendhost pool destroy` again later")
            self.sleep(self.ptr_release_poll_s)
            current = self.aws.get_address(address.allocation_id)

    def destroy(self, spec: SenderHost) -> list[Address]:
        """Return every EIP of the host (PTR reset, detached, released, denied), unassign its slot IPs, forget it
        in Redis. Safe to run again after a failure: it starts from what AWS still holds."""
        ours = self.aws.describe_pool_addresses(self.pool_name, host=spec.name)
        for address in ours:
            self._release_waiting(spec.name, address)
        slot_ips = [s.private_ip for s in self.slots.status(spec.name)[0].slots if s.private_ip] \
            if spec.name in self.slots.hosts() else []
        slot_ips += [a.tags[TAG_PRIVATE_IP] for a in ours if a.tags.get(TAG_PRIVATE_IP)]
        eni = self.aws.describe_instance(spec.instance_id).primary_interface
        # Redis may name any IP (a sender can write it): unassign only secondary IPs that carry no EIP but ours.
        held_by_others = {a.private_ip for a in self.aws.describe_interface_addresses(eni.eni_id)
                          if a.private_ip and ownership.mismatches(a, self.pool_name, spec.name)}
        to_unassign = sorted(set(slot_ips) & set(eni.secondary_private_ips) - held_by_others,
                             key=ipaddress.ip_address)
        if to_unassign:
            self.aws.unassign_secondary_private_ips(eni.eni_id, to_unassign)
        self.slots.forget_host(spec.name)
        return ours
