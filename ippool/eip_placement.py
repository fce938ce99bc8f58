"""Putting an Elastic IP into a slot, as `pool create` and a rotation both do: allocate it tagged `incoming` for
the slot (never an untagged moment), associate it with the slot's private IP, tag it `active`. Also which EIP of
ours serves a slot.

The rotator interleaves its own steps between these (the intent tags, PTR, its fence check, parking the old EIP),
so each step is a function; `place_new` is the whole sequence for a slot with nothing to replace.
"""

from __future__ import annotations

from collections.abc import Mapping

from ippool.aws.adapter import Ec2Adapter
from ippool.aws.models import TAG_STATE, Address, pool_tags
from ippool.spec import TAG_PRIVATE_IP
from ippool.states import EipState


def serving(addresses: list[Address], slot: int) -> Address | None:
    """The EIP of ours that serves `slot`: tagged active for it and associated (moto ignores the private IP, so the
    slot tag, not the reported private IP, says which slot)."""
    for address in addresses:
        if address.slot == slot and address.state == EipState.ACTIVE and address.associated:
            return address
    return None


def allocate_incoming(aws: Ec2Adapter, pool_name: str, host: str, slot: int,
                      extra_tags: Mapping[str, str] | None = None) -> Address:
    """A new EIP for `slot`, tagged ours and `incoming` in the allocating call (plus `extra_tags`)."""
    tags = pool_tags(pool_name, host, slot, EipState.INCOMING)
    tags.update(extra_tags or {})
    return aws.allocate_address(tags)


def associate(aws: Ec2Adapter, address: Address, eni_id: str, private_ip: str) -> None:
    """Point `address` at the slot's private IP, taking it over from any EIP there (the slot never lacks one)."""
    aws.associate_address(address.allocation_id, eni_id, private_ip)


def activate(aws: Ec2Adapter, address: Address) -> None:
    """Tag `address` active: it serves its slot (reconcile reads this tag as the durable record)."""
    aws.create_tags(address.allocation_id, {TAG_STATE: EipState.ACTIVE})


def place_new(aws: Ec2Adapter, pool_name: str, host: str, slot: int, eni_id: str, private_ip: str) -> Address:
    """Allocate, associate and activate a fresh EIP on an empty slot; the EIP as AWS now reports it."""
    address = allocate_incoming(aws, pool_name, host, slot, {TAG_PRIVATE_IP: private_ip})
    associate(aws, address, eni_id, private_ip)
    activate(aws, address)
    placed = aws.get_address(address.allocation_id)
    return placed if placed is not None else address
