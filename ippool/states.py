"""Every state a slot or an Elastic IP of ours can be in, in one place.

A slot's state lives in its Redis hash; an EIP's in its `sendhost:state` tag in AWS (the durable record). Both are
`StrEnum`s, so they compare equal to the stored strings and render as them in JSON and tables.
"""

from __future__ import annotations

from enum import StrEnum


class SlotState(StrEnum):
    """A slot's state in Redis. A slot without an address has no hash and reads as EMPTY."""

    ACTIVE = "active"  # leasable while used < budget
    RETIRING = "retiring"  # budget spent (or retired by hand); live leases remain, no new ones
    READY = "ready"  # retiring and no live lease left: ready to rotate (stored when a rotator reaps; read as such)
    ROTATING = "rotating"  # claimed by a rotator (mark_rotating); publish puts a new address in
    EMPTY = "empty"


class EipState(StrEnum):
    """An Elastic IP's state, as its `sendhost:state` tag says."""

    INCOMING = "incoming"  # allocated for a slot, not yet serving it (a rotation or a create in progress)
    ACTIVE = "active"  # serving its slot
    PARKED = "parked"  # out of service until its `sendhost:parked_until`, then the reaper releases it


class RotationOutcome(StrEnum):
    """What happened to one slot a rotator tried to rotate."""

    ROTATED = "rotated"
    LOST_CLAIM = "lost_claim"  # another rotator claimed the slot first, or the fence moved on
    NO_FRESH_ADDRESS = "no_fresh_address"  # every draw was rejected: the slot falls back until the next cycle
    FAILED = "failed"  # AWS refused a step: the slot was given back (ready) and the new EIP parked


class PtrStatus(StrEnum):
    """The status AWS reports for an EIP's reverse DNS update (`PtrRecordUpdate.Status`)."""

    PENDING = "PENDING"  # AWS is still checking the forward record and publishing the PTR
    SUCCESSFUL = "SUCCESSFUL"
    FAILED = "FAILED"  # e.g. the forward A record did not resolve to the address
