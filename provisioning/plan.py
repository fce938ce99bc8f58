"""What provisioning should make true on each host: its slot addresses, interface and subnet.

Slot addresses come from a `SlotSource`: the IP pool's Redis state for a host that has a pool
(`provisioning.pool_source`), else the inventory's `private_ips`. The playbook receives what was resolved as
extra vars.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from provisioning.errors import ProvisionConfigError

# host name -> its slot addresses, or None when the source knows nothing about the host
SlotSource = Callable[[str], Sequence[str] | None]


@dataclass(frozen=True)
class HostPlan:
    """One sender host as provisioning sees it."""

    name: str
    interface: str
    subnet: str | None
    slot_addresses: tuple[str, ...]

    @property
    def prefix(self) -> int:
        """Prefix length the slot addresses are bound with: the subnet's, else a host route."""
        return ipaddress.IPv4Network(self.subnet).prefixlen if self.subnet else 32


def inventory_slots(addresses_by_host: dict[str, Sequence[str]]) -> SlotSource:
    """A slot source reading the inventory's `sendhost_pool.private_ips`."""
    return lambda host: addresses_by_host.get(host)


def resolve_plan(name: str, interface: str, subnet: str | None, source: SlotSource,
                 fallback: SlotSource | None = None) -> HostPlan:
    """Build the plan for one host from the first source that knows it; check every address against the subnet."""
    addresses = source(name)
    if addresses is None and fallback is not None:
        addresses = fallback(name)
    plan = HostPlan(name=name, interface=interface, subnet=subnet, slot_addresses=tuple(addresses or ()))
    check_plan(plan)
    return plan


def check_plan(plan: HostPlan) -> None:
    """Raise ProvisionConfigError for an address that is not IPv4 or lies outside the host's subnet."""
    network = ipaddress.IPv4Network(plan.subnet) if plan.subnet else None
    for address in plan.slot_addresses:
        try:
            parsed = ipaddress.IPv4Address(address)
        except ValueError:
            raise ProvisionConfigError(f"{plan.name}: slot address {address!r} is not an IPv4 address") from None
        if network is not None and parsed not in network:
            raise ProvisionConfigError(
                f"{plan.name}: slot address {address} is outside the host's subnet {network}; "
                "fix sendhost_pool.private_ips or sendhost_subnet"
            )


def slot_extravars(plans: Iterable[HostPlan]) -> dict[str, object]:
    """Extra vars carrying the resolved slot addresses to the `sender_addresses` role."""
    return {"sendhost_slot_addresses": {plan.name: list(plan.slot_addresses) for plan in plans}}
