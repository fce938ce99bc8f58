"""Reconcile: compare AWS (tags, associations: the durable record) with Redis, report every difference, and with
`fix` finish or roll back half-done steps and rebuild Redis after it lost its data.

Differences (`Difference.kind`):
  leaked            an EIP tagged ours, active but serving no slot, not parked: parked (the reaper releases it)
  incoming          a half-done rotation's EIP (its rotator is gone): associated -> finished (old parked, new active,
                    in Redis); not associated -> rolled back (released: it never served)
  parked_overdue    parked past its deadline: reaped now (PTR reset, denied, released)
  parked_unindexed  parked in AWS but missing from Redis's parked index (Redis lost it): indexed
  slot_missing      AWS serves a slot that Redis does not hold (Redis lost it): rebuilt
  slot_mismatch     Redis holds another EIP in a slot than the one AWS serves there: rebuilt from AWS
  slot_eip_gone     Redis holds an EIP in a slot that AWS no longer has, and nothing serves it: slot retired so the
                    rotator gives it an address
  stale_claim       a slot left "rotating" by a rotator that died before allocating: given back (ready)
  untagged_on_slot  an EIP that is not ours is associated to a slot's private IP: reported (not ours to touch)
  slot_not_ours     Redis holds in a slot an EIP that AWS tags for another pool, host or slot, or a private IP that
                    is not a secondary IP of the host's interface (`ippool.ownership`): AWS is not touched; the
                    slot is rebuilt from AWS when AWS serves it, else reported for `pool create` to refill

A rebuilt slot starts with its whole budget counted as used, so it takes no new lease and rotates first: an address
whose sends Redis forgot gets none more, and never goes past 15 (the budget's ceiling).
A rotation is left alone for `grace_s` after it started, and while its owner's heartbeat lives, up to `stale_s`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import partial

from ippool import ownership
from ippool.aws.adapter import Ec2Adapter
from ippool.aws.models import Address, NetworkInterface, parse_parked_until
from ippool.eip_placement import activate, serving
from ippool.errors import AddressAlreadyAssociated, AddressInUse, AwsCredentialsError, PtrStillSet
from ippool.parking import PTR_STILL_SET, Parker, Reaper, ReapResult
from ippool.records import PoolRecords
from ippool.slot_store import SlotStore
from ippool.spec import DEFAULT_POOL_NAME, TAG_OWNER, TAG_PRIVATE_IP, TAG_REPLACES, TAG_SINCE
from ippool.states import EipState, SlotState
from ippool.status import SlotStatus
from sendhost.model import SenderHost

log = logging.getLogger("ippool.reconcile")


class DifferenceKind(StrEnum):
    """The ten kinds of difference between AWS and Redis (see the module docstring)."""

    LEAKED = "leaked"
    INCOMING = "incoming"
    PARKED_OVERDUE = "parked_overdue"
    PARKED_UNINDEXED = "parked_unindexed"
    SLOT_MISSING = "slot_missing"
    SLOT_MISMATCH = "slot_mismatch"
    SLOT_EIP_GONE = "slot_eip_gone"
    STALE_CLAIM = "stale_claim"
    UNTAGGED_ON_SLOT = "untagged_on_slot"
    SLOT_NOT_OURS = "slot_not_ours"


KINDS = tuple(DifferenceKind)


@dataclass
class Difference:
    host: str
    kind: DifferenceKind
    subject: str  # the EIP (allocation id and address) or the slot
    detail: str
    fixed: bool = False

    def to_json(self) -> dict[str, object]:
        return {"host": self.host, "kind": self.kind, "subject": self.subject, "detail": self.detail,
                "fixed": self.fixed}


@dataclass
class Reconciler:
    slots: SlotStore
    aws: Ec2Adapter
    specs: Mapping[str, SenderHost]
    records: PoolRecords
    reaper: Reaper
    clock: Callable[[], float]
    pool_name: str = DEFAULT_POOL_NAME
    grace_s: float = 120.0
    stale_s: float = 600.0  # a rotation this old is abandoned even if its worker still answers (it hit an error)
    _fix: bool = field(default=False, init=False)

    def run(self, hosts: list[str] | None = None, fix: bool = False) -> list[Difference]:
        """Every difference on `hosts` (default: every host of `specs`), fixed when `fix`."""
        self._fix = fix
        found: list[Difference] = []
        for host in hosts if hosts is not None else list(self.specs):
            found += self.host(self.specs[host])
        for difference in found:
            self.records.count(difference.host, f"reconcile:{difference.kind}")
        return found

    # -- one host --------------------------------------------------------------------------------------------

    def host(self, spec: SenderHost) -> list[Difference]:
        diffs: list[Difference] = []
        instance = self.aws.describe_instance(spec.instance_id)
        eni = instance.primary_interface
        ours = self.aws.describe_pool_addresses(self.pool_name, host=spec.name)
        registered = spec.name in self.slots.hosts()
        if not registered and self._fix and ours:
            self.slots.register_host(spec.name, spec.primary_ip or eni.primary_private_ip, budget=spec.pool.budget)
            registered = True
        slots = self._slots(spec) if registered else {}
        parked_index = {e.allocation_id for e in self.records.parked(spec.name)} if registered else set()

        for address in ours:
            if address.state == EipState.INCOMING:
                diffs += self._incoming(spec, address, ours, slots)
            elif address.state == EipState.PARKED:
                diffs += self._parked(spec, address, parked_index)
            elif address.state == EipState.ACTIVE and not address.associated:
                diffs.append(self._diff(spec, DifferenceKind.LEAKED, address, "tagged active but serves no slot",
                                        partial(self._park, spec, address, spec.pool.park_minutes * 60)))
        ours = self.aws.describe_pool_addresses(self.pool_name, host=spec.name) if self._fix and diffs else ours
        slots = self._slots(spec) if self._fix and diffs and spec.name in self.slots.hosts() else slots
        diffs += self._slots_against_aws(spec, eni, ours, slots)
        diffs += self._strangers(spec, eni.eni_id, eni.primary_private_ip, slots, ours)
        return diffs

    def _slots(self, spec: SenderHost) -> dict[int, SlotStatus]:
        state = self.slots.status(spec.name, now=self.clock())[0]
        return {slot.slot: slot for slot in state.slots}

    def _abandoned(self, address: Address) -> bool:
        since = parse_parked_until(address.tags.get(TAG_SINCE, ""))
        age = self.clock() - since if since is not None else float("inf")
        if self.records.alive(address.tags.get(TAG_OWNER)):
            return age >= self.stale_s
        return age >= self.grace_s

    def _incoming(self, spec: SenderHost, new: Address, ours: list[Address],
                  slots: dict[int, SlotStatus]) -> list[Difference]:
        if not self._abandoned(new) or new.slot is None:
            return []
        slot = new.slot
        if not new.associated:
            def roll_back() -> None:  # never in service: released at once (PTR reset first), not denied
                result = self.reaper.release(spec.name, new, deny=False)
                self._give_back(spec, slot, slots)
                _released_or_raise(result)
            return [self._diff(spec, DifferenceKind.INCOMING, new,
                               f"slot {slot}: allocated, never associated: rolled back", roll_back)]

        def finish() -> None:
            replaced = next((a for a in ours if a.allocation_id == new.tags.get(TAG_REPLACES)), None)
            if replaced is not None and replaced.state != EipState.PARKED:
                Parker(self.aws, self.records, self.pool_name).park(
                    spec.name, slot, replaced, self.clock() + spec.pool.park_minutes * 60, let_go=True)
            activate(self.aws, new)
            held = slots.get(slot)
            private_ip = new.tags.get(TAG_PRIVATE_IP) or (held.private_ip if held else None)
            if private_ip and held is not None and held.state == SlotState.ROTATING:
                self._finish_rotation(spec, slot, held, private_ip, new)
            elif private_ip:  # Redis lost the slot: nobody can count the new address's sends
                self._put_spent(spec, slot, private_ip, new)
            self.records.unclaim(spec.name, slot)
        return [self._diff(spec, DifferenceKind.INCOMING, new, f"slot {slot}: associated, not published: finished",
                           finish)]

    def _parked(self, spec: SenderHost, address: Address, indexed: set[str]) -> list[Difference]:
        until = address.parked_until
        if until is None or until <= self.clock():
            return [self._diff(spec, DifferenceKind.PARKED_OVERDUE, address, "parked past its deadline: reaped",
                               lambda: self._reap(spec, address))]
        if address.allocation_id not in indexed:
            return [self._diff(spec, DifferenceKind.PARKED_UNINDEXED, address, "parked in AWS, not in Redis: indexed",
                               lambda: self.records.park(spec.name, address.allocation_id, address.public_ip,
                                                        address.slot or 0, until))]
        return []

    def _slots_against_aws(self, spec: SenderHost, eni: NetworkInterface, ours: list[Address],
                           slots: dict[int, SlotStatus]) -> list[Difference]:
        diffs = []
        slot_numbers = sorted(set(slots) | {a.slot for a in ours if a.slot is not None and a.state == EipState.ACTIVE})
        for slot in slot_numbers:
            held = slots.get(slot)
            live = serving(ours, slot)
            foreign = self._not_ours(spec, eni, slot, held, ours)
            if foreign is not None:
                diffs.append(self._foreign_slot(spec, slot, held, live, foreign))
                continue
            if held is not None and held.state == SlotState.ROTATING:
                diffs += self._rotating(spec, slot, held, ours)
                continue
            if live is not None and (held is None or held.state == SlotState.EMPTY):
                diffs.append(self._slot_diff(spec, DifferenceKind.SLOT_MISSING, slot,
                                             f"AWS serves {live.public_ip}, Redis has no address: rebuilt, "
                                             f"no new sends until it rotates",
                                             partial(self._adopt, spec, slot, live, held)))
            elif live is not None and held is not None and held.allocation_id != live.allocation_id:
                diffs.append(self._slot_diff(spec, DifferenceKind.SLOT_MISMATCH, slot,
                                             f"Redis has {held.public_ip}, AWS serves {live.public_ip}: "
                                             f"rebuilt from AWS",
                                             partial(self._adopt, spec, slot, live, held)))
            elif live is None and held is not None and held.state != SlotState.EMPTY and held.allocation_id and \
                    not any(a.allocation_id == held.allocation_id for a in ours):
                diffs.append(self._slot_diff(spec, DifferenceKind.SLOT_EIP_GONE, slot, f"{held.public_ip} "
                                             f"({held.allocation_id}) is gone from AWS: slot retired to rotate",
                                             partial(self._retire, spec, slot)))
        return diffs

    def _not_ours(self, spec: SenderHost, eni: NetworkInterface, slot: int, held: SlotStatus | None,
                  ours: list[Address]) -> str | None:
        """Why what Redis holds in the slot is not this pool's (as AWS says), or None."""
        if held is None or held.state == SlotState.EMPTY:
            return None
        if held.private_ip:
            problem = ownership.private_ip_problem(eni, held.private_ip)
            if problem is not None:
                return f"Redis's private IP {problem}"
        if not held.allocation_id:
            return None
        address = next((a for a in ours if a.allocation_id == held.allocation_id), None)
        if address is None:
            address = self.aws.get_address(held.allocation_id)  # gone (None) is slot_eip_gone's case
        if address is None:
            return None
        wrong = ownership.mismatches(address, self.pool_name, spec.name, slot)
        if not wrong:
            return None
        return f"Redis holds {address.public_ip} ({address.allocation_id}), AWS says {', '.join(wrong)}"

    def _foreign_slot(self, spec: SenderHost, slot: int, held: SlotStatus | None, live: Address | None,
                      why: str) -> Difference:
        """Never touch the foreign address: rebuild the slot (Redis only) from what AWS serves there, if anything."""
        if live is not None:
            return self._slot_diff(spec, DifferenceKind.SLOT_NOT_OURS, slot,
                                   f"{why}: AWS not touched; rebuilt from AWS ({live.public_ip})",
                                   partial(self._adopt, spec, slot, live, None))
        return Difference(spec.name, DifferenceKind.SLOT_NOT_OURS, f"slot {slot}",
                          f"{why}: AWS not touched; nothing of ours serves the slot: run `sendhost pool create "
                          f"{spec.name}` to give it a fresh address")

    def _rotating(self, spec: SenderHost, slot: int, held: SlotStatus, ours: list[Address]) -> list[Difference]:
        """A slot left rotating: fine while its rotator lives or an incoming EIP of it is being handled."""
        owner = self.records.claim_owner(spec.name, slot)
        if self.records.alive(owner):
            return []
        if any(a.slot == slot and a.state == EipState.INCOMING for a in ours):
            return []  # the incoming EIP's difference covers it
        live = serving(ours, slot)
        if live is not None and live.allocation_id != held.allocation_id and held.private_ip:
            def publish() -> None:  # tagged and associated, killed before publishing: no lease went out on it
                self._finish_rotation(spec, slot, held, held.private_ip or "", live)
                self.records.unclaim(spec.name, slot)
            return [self._slot_diff(spec, DifferenceKind.INCOMING, slot,
                                    f"rotated to {live.public_ip} in AWS, not published (its rotator is gone): "
                                    f"published", publish)]
        return [self._slot_diff(spec, DifferenceKind.STALE_CLAIM, slot,
                                f"rotating, its rotator ({owner or 'unknown'}) is gone: given back to rotate again",
                                lambda: self._give_back(spec, slot, {slot: held}))]

    def _strangers(self, spec: SenderHost, eni_id: str, primary_ip: str, slots: dict[int, SlotStatus],
                   ours: list[Address]) -> list[Difference]:
        slot_ips = {s.private_ip: n for n, s in slots.items() if s.private_ip}
        slot_ips.update({a.tags[TAG_PRIVATE_IP]: a.slot for a in ours
                         if a.tags.get(TAG_PRIVATE_IP) and a.slot is not None})
        diffs = []
        for address in self.aws.describe_interface_addresses(eni_id):
            if address.pool is None and address.private_ip in slot_ips and address.private_ip != primary_ip:
                diffs.append(Difference(spec.name, DifferenceKind.UNTAGGED_ON_SLOT,
                                        f"{address.allocation_id} {address.public_ip}",
                                        f"not ours, associated to slot {slot_ips[address.private_ip]}'s private IP "
                                        f"{address.private_ip}: disassociate it by hand (reconcile does not touch "
                                        f"EIPs it did not tag)"))
        return diffs

    # -- fixes -----------------------------------------------------------------------------------------------

    def _diff(self, spec: SenderHost, kind: DifferenceKind, address: Address, detail: str, fix: Callable[[], object],
              ) -> Difference:
        slot = f" slot {address.slot}" if address.slot is not None else ""
        return self._apply(Difference(spec.name, kind, f"{address.allocation_id} {address.public_ip}{slot}", detail),
                           fix)

    def _slot_diff(self, spec: SenderHost, kind: DifferenceKind, slot: int, detail: str,
                   fix: Callable[[], object]) -> Difference:
        return self._apply(Difference(spec.name, kind, f"slot {slot}", detail), fix)

    def _apply(self, difference: Difference, fix: Callable[[], object]) -> Difference:
        if self._fix:
            try:
                fix()
            except (AwsCredentialsError, AddressInUse, AddressAlreadyAssociated, PtrStillSet) as exc:
                # Refused for this address only (AuthFailure/UnauthorizedOperation: a policy that does not cover
                # it; or AWS not ready yet): listed unfixed, and the other differences and hosts go on.
                difference.detail = f"{difference.detail}; not fixed: {exc}"
                log.warning("reconcile could not fix %s %s on %s: %s", difference.kind, difference.subject,
                            difference.host, exc)
                return difference
            difference.fixed = True
            log.info("reconcile fixed %s %s on %s: %s", difference.kind, difference.subject, difference.host,
                     difference.detail)
        return difference

    def _park(self, spec: SenderHost, address: Address, for_s: float) -> None:
        slot = address.slot if address.slot is not None else 0
        Parker(self.aws, self.records, self.pool_name).park(spec.name, slot, address, self.clock() + for_s)

    def _reap(self, spec: SenderHost, address: Address) -> None:
        _released_or_raise(self.reaper.release(spec.name, address))

    def _give_back(self, spec: SenderHost, slot: int, slots: dict[int, SlotStatus]) -> None:
        held = slots.get(slot)
        if held is not None and held.state == SlotState.ROTATING:
            self.slots.abort_rotation(spec.name, slot, held.generation)
        self.records.unclaim(spec.name, slot)

    def _adopt(self, spec: SenderHost, slot: int, live: Address, held: SlotStatus | None) -> None:
        private_ip = live.tags.get(TAG_PRIVATE_IP) or (held.private_ip if held else None)
        if private_ip is None:
            log.warning("%s slot %d: no private IP known for %s; run `pool create` again", spec.name, slot,
                        live.public_ip)
            return
        self._put_spent(spec, slot, private_ip, live)

    def _put_spent(self, spec: SenderHost, slot: int, private_ip: str, address: Address) -> None:
        """Place an address whose sends nobody can count with its whole budget spent, in the placing call itself:
        it takes no send until it rotates (a separate call after placing would leave senders a window on it)."""
        self.slots.put_address(spec.name, slot, private_ip=private_ip, public_ip=address.public_ip,
                              allocation_id=address.allocation_id, spent=True)

    def _finish_rotation(self, spec: SenderHost, slot: int, held: SlotStatus, private_ip: str,
                         address: Address) -> None:
        """Publish the new address of a rotation whose rotator looks gone: no lease went out on it, so used 0 is
        exact. Fenced like the rotator's own publish, at the generation this reconcile saw: a rotator that was
        only slow and has published since (senders may already be using the address) is left as it is, where an
        unfenced placement would reset the address's used count and let it exceed its budget."""
        self.slots.publish(spec.name, slot, held.generation, private_ip=private_ip, public_ip=address.public_ip,
                          allocation_id=address.allocation_id)

    def _retire(self, spec: SenderHost, slot: int) -> None:
        self.slots.retire(spec.name, slot)


def _released_or_raise(result: ReapResult) -> None:
    """A release AWS deferred (InvalidAddress.PtrSet after the PTR reset) is not a fix yet: listed unfixed, and the
    next reconcile or reap releases it."""
    if result.detail == PTR_STILL_SET:
        raise PtrStillSet(f"{result.public_ip} ({result.allocation_id}): {PTR_STILL_SET}")
