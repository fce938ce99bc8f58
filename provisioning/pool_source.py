"""Slot addresses from an existing IP pool: a host registered in ippool's Redis has its slots' private IPs there."""

from __future__ import annotations

from collections.abc import Sequence

from ippool.errors import PoolConfigError
from ippool.pool import Pool
from provisioning.plan import SlotSource


def pool_slot_source(pool: Pool) -> SlotSource:
    """A slot source reading `pool`: a registered host's slot private IPs, or None for a host with no pool.

    A Redis failure is not "no pool": it propagates (PoolOperationFailed), because falling back to the inventory
    could unbind addresses the pool is sending from.
    """

    def addresses(host: str) -> Sequence[str] | None:
        try:
            (state,) = pool.status(host)
        except PoolConfigError:  # not registered: this host has no pool yet
            return None
        found = tuple(slot.private_ip for slot in state.slots if slot.private_ip)
        return found or None

    return addresses
