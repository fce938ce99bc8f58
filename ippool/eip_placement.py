"""Putting an Elastic IP into a slot, as `pool create` and a rotation both do, through the same steps:

    allocate, tagged `incoming` for the slot (never an untagged moment)      allocate_incoming
    tag the intent (the EIP it replaces, the slot's private IP, its PTR)     prepare  -> "tag"
    forward A record (waited INSYNC) + reverse DNS (waited until set)        prepare  -> "ptr"
    free the slot's private IP: detach the EIP it replaces, refuse others    associate
    associate with AllowReassociation=False                                  associate
    tag it `active`                                                           activate

So the first address of a `ptr: true` slot gets its A record and PTR exactly as a rotated one does. The rotator
interleaves its own steps between these (its fence check, parking the old EIP), so each step is a function;
`place_new` is the whole sequence for a slot with nothing to replace. Also which EIP of ours serves a slot.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ippool.aws.adapter import Ec2Adapter
from ippool.aws.models import TAG_STATE, Address, pool_tags
from ippool.errors import AddressAlreadyAssociated
from ippool.spec import TAG_PRIVATE_IP, TAG_PTR, TAG_PTR_ZONE, TAG_REPLACES, ptr_name
from ippool.states import EipState
from sendhost.model import SenderHost


def no_step(name: str) -> None:
    """The step hook of a placement nobody watches: does nothing."""
    return None


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


def prepare(aws: Ec2Adapter, spec: SenderHost, slot: int, address: Address, private_ip: str,
            replaces: str | None, step: Callable[[str], None] = no_step) -> None:
    """Tag the intent on the new EIP, then, when the host asks for PTR, publish its A record and its reverse DNS
    and wait until AWS serves both: the address is not put into service before (ReverseDnsFailed otherwise).

    `step(name)` is called after the tags ("tag") and after the PTR ("ptr"): the rotator's checkpoints."""
    intent = {TAG_REPLACES: replaces or "none", TAG_PRIVATE_IP: private_ip}
    if spec.forward_zone:
        # Tagged before the PTR exists, so the reaper resets it (and deletes the A record) even if we die halfway.
        intent[TAG_PTR] = ptr_name(spec, slot, address.public_ip)
        intent[TAG_PTR_ZONE] = spec.forward_zone
    aws.create_tags(address.allocation_id, intent)
    step("tag")
    if spec.forward_zone:
        name = ptr_name(spec, slot, address.public_ip)
        # AWS checks that the name resolves to the address before it sets the PTR: wait until Route 53 serves it.
        aws.wait_for_change(aws.upsert_a_record(spec.forward_zone, name, address.public_ip))
        aws.set_reverse_dns(address.allocation_id, name)
        aws.wait_reverse_dns(address.allocation_id, name)
        step("ptr")


def associate(aws: Ec2Adapter, address: Address, eni_id: str, private_ip: str, replaces: str | None = None) -> None:
    """Point `address` at the slot's private IP. An EIP already there is detected first: the one this address
    `replaces` is detached; any other (a stranger's, or ours for another purpose) is refused, never taken over."""
    for other in aws.describe_interface_addresses(eni_id):
        if other.private_ip != private_ip or other.allocation_id == address.allocation_id or not other.associated:
            continue
        if replaces is not None and other.allocation_id == replaces and other.association_id:
            aws.disassociate_address(other.association_id)
            continue
        raise AddressAlreadyAssociated(
            f"private IP {private_ip} on {eni_id} already holds Elastic IP {other.public_ip} "
            f"({other.allocation_id}, pool tag {other.pool or 'none'}): not taken over; run `sendhost pool "
            f"reconcile` and free the address, or give the slot another private IP")
    aws.associate_address(address.allocation_id, eni_id, private_ip)


def activate(aws: Ec2Adapter, address: Address) -> None:
    """Tag `address` active: it serves its slot (reconcile reads this tag as the durable record)."""
    aws.create_tags(address.allocation_id, {TAG_STATE: EipState.ACTIVE})


def place_new(aws: Ec2Adapter, pool_name: str, spec: SenderHost, slot: int, eni_id: str, private_ip: str) -> Address:
    """Allocate, prepare (tags, A record, PTR), associate and activate a fresh EIP on an empty slot; the EIP as AWS
    now reports it."""
    address = allocate_incoming(aws, pool_name, spec.name, slot, {TAG_PRIVATE_IP: private_ip})
    prepare(aws, spec, slot, address, private_ip, replaces=None)
    associate(aws, address, eni_id, private_ip)
    activate(aws, address)
    placed = aws.get_address(address.allocation_id)
    return placed if placed is not None else address
