"""The rotator: give every ready slot a fresh Elastic IP, park the old one, publish under the generation fence.

One slot's rotation, with a named checkpoint after each AWS step so fault-injection tests can
kill the process there:

    claim (mark_rotating, CAS)
    allocate, tagged incoming (redraw while the address is denylisted, parked or DNSBL-listed) -> "allocate"
    tag the intent: the EIP it replaces, the owner, the PTR name                                -> "tag"
    forward A record (waited INSYNC) + reverse DNS (waited until AWS serves it), when asked     -> "ptr"
    detach the old EIP from the slot's private IP, associate (AllowReassociation=False)         -> "associate"
    tag the old EIP parked until now + park_minutes, the new one active                         -> "park-tag"
    publish into Redis under the fence                                                          -> "publish"

Several rotators may run at once: `mark_rotating` lets one win each slot, and a rotator re-checks its claim before
associating. A crash anywhere leaves tags from which `pool reconcile` finishes or rolls back the rotation.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ippool import eip_placement, ownership
from ippool.aws.adapter import Ec2Adapter
from ippool.aws.models import Address, NetworkInterface, format_parked_until
from ippool.aws.quotas import quota_advice
from ippool.denylist import Denylist
from ippool.errors import AddressQuotaExceeded, IppoolError
from ippool.parking import Parker, no_checkpoint
from ippool.records import PoolRecords
from ippool.screen import Screen, no_screen
from ippool.slot_store import ReadySlot, SlotStore
from ippool.spec import DEFAULT_POOL_NAME, TAG_OWNER, TAG_SINCE
from ippool.states import RotationOutcome, SlotState
from ippool.status import SlotStatus
from sendhost.model import SenderHost

log = logging.getLogger("ippool.rotator")

DEFAULT_MAX_DRAWS = 4
Checkpoint = Callable[[str], None]

ROTATED, LOST_CLAIM = RotationOutcome.ROTATED, RotationOutcome.LOST_CLAIM
NO_FRESH_ADDRESS, FAILED = RotationOutcome.NO_FRESH_ADDRESS, RotationOutcome.FAILED


@dataclass(frozen=True)
class RotationResult:
    """What happened to one slot."""

    host: str
    slot: int
    outcome: RotationOutcome
    old_ip: str | None = None
    new_ip: str | None = None
    redraws: tuple[str, ...] = ()  # the reason of each rejected draw
    detail: str = ""

    def to_json(self) -> dict[str, object]:
        return {"host": self.host, "slot": self.slot, "outcome": self.outcome, "old_ip": self.old_ip,
                "new_ip": self.new_ip, "redraws": list(self.redraws), "detail": self.detail}


@dataclass
class Rotator:
    """Rotates the ready slots of the hosts in `specs`, one slot at a time.

    `owner` names this rotator in claims and tags; `clock` gives epoch seconds; `screen` rejects listed addresses;
    `checkpoint(name)` is called after each step (fault injection); `heartbeat_s` is how long the owner's heartbeat
    lives after each step.
    """

    slots: SlotStore
    aws: Ec2Adapter
    specs: Mapping[str, SenderHost]
    denylist: Denylist
    records: PoolRecords
    clock: Callable[[], float]
    owner: str
    pool_name: str = DEFAULT_POOL_NAME
    screen: Screen = no_screen
    max_draws: int = DEFAULT_MAX_DRAWS
    checkpoint: Checkpoint = no_checkpoint
    heartbeat_s: float = 30.0
    _interfaces: dict[str, NetworkInterface] = field(default_factory=dict)

    @property
    def parker(self) -> Parker:
        return Parker(self.aws, self.records, self.pool_name)

    def eni(self, spec: SenderHost) -> str:
        """The host's primary ENI, looked up once."""
        return self._interface(spec).eni_id

    def _interface(self, spec: SenderHost, fresh: bool = False) -> NetworkInterface:
        """The host's primary ENI with its private IPs, as AWS reports it (looked up once, again when `fresh`)."""
        if fresh or spec.name not in self._interfaces:
            self._interfaces[spec.name] = self.aws.describe_instance(spec.instance_id).primary_interface
        return self._interfaces[spec.name]

    def _verified(self, spec: SenderHost, slot: int, claimed: SlotStatus) -> tuple[str, Address | None]:
        """The slot's private IP and old EIP as Redis names them, each checked against AWS before anything is
        changed (`ippool.ownership`): AddressNotOurs when either is not this pool's host's slot's."""
        interface = self._interface(spec)
        if ownership.private_ip_problem(interface, claimed.private_ip) is not None:
            interface = self._interface(spec, fresh=True)  # `pool create` may have assigned it since we looked
        private_ip = ownership.require_slot_private_ip(interface, claimed.private_ip, spec.name, slot)
        old = None
        if claimed.allocation_id:
            old = ownership.owned_address(self.aws, claimed.allocation_id, self.pool_name, spec.name, slot,
                                          interface.eni_id)
        return private_ip, old

    def rotate_ready(self, host: str, stop: Callable[[], bool] = lambda: False) -> list[RotationResult]:
        """Rotate every slot of `host` that is ready now; a slot AWS refuses is reported FAILED and the rest go on.

        `stop()` is asked between slots (a worker's SIGTERM: finish the slot in hand, start no other)."""
        results = []
        for ready in self.slots.ready_slots(host, now=self.clock()):
            if stop():
                break
            try:
                results.append(self.rotate_slot(host, ready))
            except IppoolError as exc:
                log.warning("rotation of %s slot %d failed: %s", host, ready.slot, exc)
                results.append(RotationResult(host, ready.slot, FAILED, detail=str(exc)))
        return results

    def rotate_slot(self, host: str, ready: ReadySlot) -> RotationResult:
        """Rotate one slot claimed at `ready.generation`. Raises AddressQuotaExceeded (naming the quota to raise)
        after giving the slot back; the slot then falls back until a later cycle succeeds."""
        spec = self.specs[host]
        claimed = self.slots.mark_rotating(host, ready.slot, ready.generation)
        if claimed is None:
            return RotationResult(host, ready.slot, LOST_CLAIM)
        self._beat()
        self.records.claim(host, ready.slot, self.owner)
        old_ip = claimed.public_ip
        try:
            private_ip, old = self._verified(spec, ready.slot, claimed)
        except Exception:  # refused (not ours) or AWS unreadable: nothing changed in AWS; the slot is given back
            self._give_back(host, ready)
            raise
        try:
            new, redraws = self._draw(spec, ready.slot)
        except AddressQuotaExceeded as exc:
            self._give_back(host, ready)
            raise AddressQuotaExceeded(f"{exc}; {quota_advice(self.aws, extra=1)}") from exc
        except Exception:
            try:
                self._give_back(host, ready)
            except Exception as exc:
                log.warning("%s slot %d: could not give the slot back: %s", host, ready.slot, exc)
            raise
        if new is None:
            self._give_back(host, ready)
            return RotationResult(host, ready.slot, NO_FRESH_ADDRESS, old_ip=old_ip, redraws=redraws,
                                  detail=f"{len(redraws)} draws rejected; the slot falls back until the next cycle")
        try:
            outcome = self._put_in_service(spec, ready, private_ip, new, old)
        except Exception:  # AWS refused, or Redis failed: hand the EIP to the reaper if we still can, then report
            self._abandon(spec, ready, new)
            raise
        return RotationResult(host, ready.slot, outcome, old_ip=old_ip, new_ip=new.public_ip, redraws=redraws)

    # -- the steps -------------------------------------------------------------------------------------------

    def _draw(self, spec: SenderHost, slot: int) -> tuple[Address | None, tuple[str, ...]]:
        """Allocate until an address passes the checks (at most `max_draws`); park each rejected one."""
        rejected: list[str] = []
        for _ in range(self.max_draws):
            address = eip_placement.allocate_incoming(
                self.aws, self.pool_name, spec.name, slot,
                {TAG_OWNER: self.owner, TAG_SINCE: format_parked_until(self.clock())})
            self.checkpoint("allocate")
            reason = self._rejection(address.public_ip)
            if reason is None:
                return address, tuple(rejected)
            rejected.append(reason)
            self.records.count(spec.name, f"redraws:{reason.split(':')[0]}")
            log.info("%s slot %d: drew %s, %s: parked, redrawing", spec.name, slot, address.public_ip, reason)
            self.parker.park(spec.name, slot, address, self.clock() + spec.pool.park_minutes * 60)
        return None, tuple(rejected)

    def _rejection(self, public_ip: str) -> str | None:
        if self.denylist.listed(public_ip):
            return "denylist"
        if self.records.is_parked_ip(public_ip):
            return "parked"
        return self.screen(public_ip)

    def _put_in_service(self, spec: SenderHost, ready: ReadySlot, private_ip: str, new: Address,
                        old: Address | None) -> RotationOutcome:
        """`private_ip` and `old` were checked against AWS (`_verified`); `old` is None when AWS no longer has it."""
        host, slot = spec.name, ready.slot
        old_ip = old.public_ip if old is not None else None
        old_allocation = old.allocation_id if old is not None else None
        # The same steps as `pool create` (tags, A record, PTR waited until AWS serves it): the slot is published
        # leasable only after its PTR resolves; a FAILED PTR raises, and the EIP goes to the reaper.
        eip_placement.prepare(self.aws, spec, slot, new, private_ip, old_allocation, step=self._step)
        if not self._still_claimed(host, ready):
            # Fenced out before touching the slot: this attempt is stale; its EIP goes straight to the reaper.
            self.parker.park(host, slot, new, self.clock())
            return LOST_CLAIM
        eip_placement.associate(self.aws, new, self.eni(spec), private_ip, replaces=old_allocation)
        self._step("associate")
        if old is not None:
            self.parker.park(host, slot, old, self.clock() + spec.pool.park_minutes * 60, let_go=True)
        eip_placement.activate(self.aws, new)
        self._step("park-tag")
        placed = self.slots.publish(host, slot, ready.generation, private_ip=private_ip, public_ip=new.public_ip,
                                   allocation_id=new.allocation_id)
        self._step("publish")
        self.records.unclaim(host, slot)
        if placed is None:
            # The fence moved while we associated (a reconcile rebuilt the slot): AWS holds our EIP on the slot,
            # and the next reconcile adopts whatever AWS associates there.
            log.warning("%s slot %d: fenced out after associating %s; reconcile adopts it", host, slot,
                        new.public_ip)
            return LOST_CLAIM
        self.records.rotated(host)
        log.info("%s slot %d: %s -> %s (budget %d)", host, slot, old_ip, new.public_ip, placed.budget)
        return ROTATED

    def _still_claimed(self, host: str, ready: ReadySlot) -> bool:
        slot = self.slots.slot_status(host, ready.slot, now=self.clock())
        return slot.state == SlotState.ROTATING and slot.generation == ready.generation

    def _give_back(self, host: str, ready: ReadySlot) -> None:
        self.slots.abort_rotation(host, ready.slot, ready.generation)
        self.records.unclaim(host, ready.slot)

    def _abandon(self, spec: SenderHost, ready: ReadySlot, new: Address) -> None:
        """After a failed step: the new EIP goes to the reaper (due now), unless AWS already serves it on the slot,
        and the slot is given back so a later cycle retries. Best effort: whatever fails here, reconcile finds the
        incoming EIP by its tags."""
        try:
            current = self.aws.get_address(new.allocation_id)
            if current is not None and not current.associated:
                self.parker.park(spec.name, ready.slot, new, self.clock())
            self._give_back(spec.name, ready)
        except Exception as exc:
            log.warning("%s slot %d: could not clean up %s after a failed rotation: %s", spec.name, ready.slot,
                        new.allocation_id, exc)

    def _step(self, name: str) -> None:
        self.checkpoint(name)
        self._beat()

    def _beat(self) -> None:
        self.records.heartbeat(self.owner, self.heartbeat_s)
