"""Slot addresses from the IP pool: a host registered in ippool's Redis has its slots' addresses there."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ippool.errors import PoolConfigError
from provisioning.errors import ProvisionConfigError
from provisioning.plan import SlotAddress, SlotSource

if TYPE_CHECKING:  # the Redis client loads only when a command reads a pool (`sendhost --help` stays light)
    from ippool.pool import Pool


def pool_slot_source(pool: Pool) -> SlotSource:
    """A slot source reading `pool`: a registered host's slots (private and Elastic IP), None for a host with no pool.

    A Redis failure is not "no pool": it propagates (PoolOperationFailed), never a guess that could unbind
    addresses the pool is sending from.
    """

    def addresses(host: str) -> Sequence[SlotAddress] | None:
        try:
            (state,) = pool.status(host)
        except PoolConfigError:  # not registered: this host has no pool yet
            return None
        return tuple(SlotAddress(slot.private_ip, slot.public_ip or None) for slot in state.slots if slot.private_ip)

    return addresses


def no_redis_source(host: str) -> Sequence[SlotAddress] | None:
    """The slot source when no Redis is configured: every host's slot addresses are unknown, say how to fix it."""
    raise ProvisionConfigError(
        f"{host}: slot addresses come from the host's IP pool in Redis, and no Redis is configured: set "
        "SENDHOST_REDIS_URL (or sendhost_redis_url in the inventory's all.vars) to the pool's Redis, and run "
        f"`sendhost pool create {host}` if the host has no pool yet")
