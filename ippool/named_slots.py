"""The slot addresses an inventory names (`sendhost_pool.private_ips`), checked against AWS before `pool create`
assigns them: slot n gets exactly private_ips[n] or nothing happens.

Every refusal is one line naming `<host>.sendhost_pool.private_ips` and the fix, raised before anything is
assigned or allocated (PoolConfigError: exit 2).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence

from ippool.aws.adapter import Ec2Adapter
from ippool.aws.models import Address, NetworkInterface
from ippool.errors import PoolConfigError

# AWS keeps the first four addresses of every subnet (network, router, DNS, future use) and its last one.
_RESERVED_LOW = 4


def inventory_key(host: str) -> str:
    return f"{host}.sendhost_pool.private_ips"


def named_slot_ips(host: str, private_ips: Sequence[str], slots: int) -> tuple[str, ...]:
    """The first `slots` of the inventory's addresses; refused when it lists fewer than asked for."""
    if len(private_ips) < slots:
        raise PoolConfigError(
            f"{inventory_key(host)}: lists {len(private_ips)} addresses for {slots} slots: add the missing slot "
            f"addresses to {inventory_key(host)} or create fewer slots (--slots {len(private_ips)})")
    return tuple(private_ips[:slots])


def check_named_slot_ips(aws: Ec2Adapter, pool_name: str, host: str, eni: NetworkInterface, named: Sequence[str],
                         kept: Mapping[int, str], interface_addresses: Sequence[Address]) -> None:
    """Refuse `named` (slot n -> named[n]) unless every address may become that slot's on `eni`.

    `kept`: the private IP each existing slot already serves from (its EIP is there); `interface_addresses`: every
    EIP associated with the ENI. Raises PoolConfigError on the first address that cannot be used."""
    key = inventory_key(host)
    network = ipaddress.IPv4Network(aws.subnet_cidr(eni.subnet_id))
    reserved = {network.network_address + n for n in range(_RESERVED_LOW)} | {network.broadcast_address}
    for address in named:
        parsed = ipaddress.IPv4Address(address)
        if parsed not in network:
            raise PoolConfigError(
                f"{key}: {address} is outside subnet {network} of {host}'s interface {eni.eni_id}: list addresses "
                f"inside {network}")
        if parsed in reserved:
            raise PoolConfigError(
                f"{key}: {address} is reserved by AWS in subnet {network} (its first four addresses and its last): "
                f"list other addresses inside {network}")
        if address == eni.primary_private_ip:
            raise PoolConfigError(
                f"{key}: {address} is {host}'s primary private IP: list secondary addresses, not the primary")
    for slot, address in enumerate(named):
        if kept.get(slot, address) != address:
            raise PoolConfigError(
                f"{key}: slot {slot} already serves from {kept[slot]}, not {address}: list {kept[slot]} as slot "
                f"{slot}'s address, or run `sendhost pool destroy {host}` first to start over")
    for address, holder in sorted(aws.interfaces_holding(eni.subnet_id, named).items()):
        if holder != eni.eni_id:
            raise PoolConfigError(
                f"{key}: {address} is already assigned to network interface {holder}: list a free address")
    for eip in interface_addresses:
        if eip.associated and eip.private_ip in named and eip.pool != pool_name:
            raise PoolConfigError(
                f"{key}: {eip.private_ip} already holds Elastic IP {eip.public_ip} ({eip.allocation_id}), which is "
                f"not this pool's: list a free address, or release that Elastic IP first")
