"""What provisioning should make true on each host: its slot addresses, interface and subnet.

Slot addresses have one source: the host's IP pool (`provisioning.pool_source`), which `sendhost pool create`
fills (from the inventory's `private_ips` when it lists them). A host without a pool is an error naming the fix,
never a guess from the inventory. The playbook receives what was resolved as extra vars.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from provisioning.errors import ProvisionConfigError


class SlotAddress(NamedTuple):
    """One slot as its pool holds it: the private IP bound on the host and the Elastic IP it presents."""

    private_ip: str
    public_ip: str | None = None


# host name -> its slots in slot order, or None when the source holds no pool for the host
SlotSource = Callable[[str], Sequence[SlotAddress] | None]


@dataclass(frozen=True)
class ProvisionPlan:
    """One sender host as provisioning sees it."""

    name: str
    interface: str | None  # None: the host's default-route interface (facts for the role, `ip route` for verify)
    subnet: str | None
    slot_addresses: tuple[str, ...]
    elastic_ips: tuple[str | None, ...] = ()  # slot n's Elastic IP, when the pool knows it

    @property
    def prefix(self) -> int:
        """Prefix length the slot addresses are bound with: the subnet's, else a host route."""
        return ipaddress.IPv4Network(self.subnet).prefixlen if self.subnet else 32


def resolve_plan(name: str, interface: str | None, subnet: str | None, source: SlotSource) -> ProvisionPlan:
    """Build the plan for one host from its pool; refuse a host without one and check every address."""
    slots = source(name)
    if slots is None:
        raise ProvisionConfigError(
            f"{name}: no IP pool for this host in Redis, and only its pool says which slot addresses to bind: "
            f"run `sendhost pool create {name}` first")
    if not slots:
        raise ProvisionConfigError(f"{name}: its IP pool holds no slot addresses: run `sendhost pool create {name}`")
    plan = ProvisionPlan(name=name, interface=interface, subnet=subnet,
                    slot_addresses=tuple(s.private_ip for s in slots), elastic_ips=tuple(s.public_ip for s in slots))
    check_plan(plan)
    return plan


def check_plan(plan: ProvisionPlan) -> None:
    """Raise ProvisionConfigError for an address that is not IPv4 or lies outside the host's subnet."""
    network = ipaddress.IPv4Network(plan.subnet) if plan.subnet else None
    for address in plan.slot_addresses:
        try:
            parsed = ipaddress.IPv4Address(address)
        except ValueError:
            raise ProvisionConfigError(f"{plan.name}: slot address {address!r} is not an IPv4 address") from None
        if network is not None and parsed not in network:
            raise ProvisionConfigError(
                f"{plan.name}: slot address {address} of its IP pool is outside the host's subnet {network}; "
                f"fix sendhost_subnet, or recreate the pool (`sendhost pool destroy {plan.name}`, then `create`)"
            )


def slot_extravars(plans: Iterable[ProvisionPlan]) -> dict[str, object]:
    """Extra vars carrying the resolved slot addresses to the `sender_addresses` role."""
    return {"sendhost_slot_addresses": {plan.name: list(plan.slot_addresses) for plan in plans}}
