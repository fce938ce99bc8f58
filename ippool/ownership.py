"""Redis is not an authority over AWS: before the pool mutates an Elastic IP or points one at a private IP that it
read from Redis, it reads that EIP or interface from AWS and requires it to be this pool's.

An EIP must carry this pool's `sendhost:pool`, the host's `sendhost:host` and the slot's `sendhost:slot` tags (and,
while associated, sit on the host's interface); a slot's private IP must be one of the secondary private IPs of the
host's interface, never its primary. Anything else raises `AddressNotOurs` before a single change, because every
sender host holds a Redis URL and could otherwise steer the rotator at another deployment's addresses.
"""

from __future__ import annotations

from typing import Protocol

from ippool.aws.models import TAG_HOST, TAG_POOL, TAG_SLOT, Address, NetworkInterface
from ippool.errors import AddressNotOurs


class _AddressReader(Protocol):
    def get_address(self, allocation_id: str) -> Address | None: ...


def mismatches(address: Address, pool_name: str, host: str, slot: int | None = None,
               eni_id: str | None = None) -> list[str]:
    """What about `address` (as AWS reports it) says it is not this pool's host's slot; empty when it is."""
    wrong = []
    for tag, wanted in ((TAG_POOL, pool_name), (TAG_HOST, host), (TAG_SLOT, None if slot is None else str(slot))):
        if wanted is not None and address.tags.get(tag) != wanted:
            wrong.append(f"{tag}={address.tags.get(tag, '(none)')} (want {wanted})")
    if eni_id is not None and address.network_interface_id and address.network_interface_id != eni_id:
        wrong.append(f"associated to {address.network_interface_id} (want the host's {eni_id})")
    return wrong


def require_owned(address: Address, pool_name: str, host: str, slot: int | None = None,
                  eni_id: str | None = None) -> Address:
    """`address` itself when it is this pool's host's (slot's) EIP; AddressNotOurs naming what differs otherwise."""
    wrong = mismatches(address, pool_name, host, slot, eni_id)
    if wrong:
        where = f"{host} slot {slot}" if slot is not None else host
        raise AddressNotOurs(
            f"refused to touch EIP {address.allocation_id} ({address.public_ip}) for pool {pool_name} {where}: "
            f"AWS says {', '.join(wrong)}; nothing was changed. Redis named an address that is not ours: "
            f"run `sendhost pool reconcile {host}` (it reports slot_not_ours)")
    return address


def owned_address(aws: _AddressReader, allocation_id: str, pool_name: str, host: str, slot: int,
                  eni_id: str | None = None) -> Address | None:
    """Read the EIP Redis holds in a slot from AWS: None when AWS no longer has it (nothing to touch), the address
    when it is this pool's host's slot's, AddressNotOurs otherwise."""
    address = aws.get_address(allocation_id)
    if address is None:
        return None
    return require_owned(address, pool_name, host, slot, eni_id)


def private_ip_problem(interface: NetworkInterface, private_ip: str | None) -> str | None:
    """Why `private_ip` cannot back a slot of this interface, or None when it is one of its secondary IPs."""
    if not private_ip:
        return "no private IP"
    if private_ip == interface.primary_private_ip:
        return f"{private_ip} is the primary private IP of {interface.eni_id}"
    if private_ip not in interface.secondary_private_ips:
        return f"{private_ip} is not a secondary private IP of {interface.eni_id}"
    return None


def require_slot_private_ip(interface: NetworkInterface, private_ip: str | None, host: str, slot: int) -> str:
    """`private_ip` when it is a secondary private IP of the host's interface; AddressNotOurs otherwise."""
    problem = private_ip_problem(interface, private_ip)
    if problem is not None:
        raise AddressNotOurs(
            f"refused to point an EIP at {host} slot {slot}'s private IP from Redis: {problem}; nothing was "
            f"changed. Run `sendhost pool reconcile {host}` (it reports slot_not_ours)")
    assert private_ip is not None
    return private_ip
