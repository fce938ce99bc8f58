"""The pool's promises, checked against AWS and Redis after faults: no leaked EIP, none in two slots, every slot
serving or falling back, no address over budget."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from ippool import Pool
from ippool.aws.adapter import Ec2Adapter
from ippool.eip_placement import serving
from ippool.states import EipState, SlotState


def violations(pool: Pool, aws: Ec2Adapter, host: str, now: float, pool_name: str = "sendhost",
               sends: Mapping[str, int] | None = None, budget_ceiling: int = 15) -> list[str]:
    """Every broken promise on `host`, as readable lines (empty when all hold). `sends` counts the sends each public
    IP made (from the senders' own records)."""
    found: list[str] = []
    ours = aws.describe_pool_addresses(pool_name, host=host)
    slots = pool.status(host, now=now)[0].slots if host in pool.hosts() else ()
    in_slots = Counter(s.allocation_id for s in slots if s.state != SlotState.EMPTY and s.allocation_id)
    for allocation_id, count in in_slots.items():
        if count > 1:
            found.append(f"{allocation_id} is in {count} slots")
    for address in ours:
        name = f"{address.public_ip} ({address.allocation_id}, slot {address.slot}, {address.state})"
        if address.state == EipState.ACTIVE:
            if not address.associated or address.allocation_id not in in_slots:
                found.append(f"leaked: {name} is active but serves no slot in Redis")
        elif address.state == EipState.PARKED:
            if address.parked_until is None:
                found.append(f"leaked: {name} is parked without a deadline")
            if address.associated:
                found.append(f"{name} is parked but still associated")
        else:
            found.append(f"leaked: {name} is left half-rotated")
    for slot in slots:
        if slot.state == SlotState.ACTIVE:
            live = serving(ours, slot.slot)
            if live is None or live.allocation_id != slot.allocation_id:
                found.append(f"slot {slot.slot} leases {slot.public_ip} but AWS serves "
                             f"{live.public_ip if live else 'nothing'} there")
        if slot.used > slot.budget and slot.state != SlotState.EMPTY and slot.budget:
            found.append(f"slot {slot.slot} used {slot.used} > budget {slot.budget}")
    for ip, count in (sends or {}).items():
        if count > budget_ceiling:
            found.append(f"{ip} made {count} sends > {budget_ceiling}")
    return found
