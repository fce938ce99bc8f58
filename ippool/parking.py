"""Parking and reaping Elastic IPs: the parker takes an EIP out of service until a deadline, the reaper releases
parked EIPs past their deadline and denies their addresses for 7 days.

Order matters for crashes: reset reverse DNS (AWS refuses to release an EIP with a PTR) and delete the address's
forward A record, deny the address, release, forget the parked entry; each step is safe to repeat, so a reap killed
anywhere is finished by the next one. After a reset AWS answers release with InvalidAddress.PtrSet for minutes: that
is "not yet", reported as not released, and the next cycle releases it.
AWS tags are the record: the reaper reads parked EIPs from AWS, not from Redis.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ippool import ownership
from ippool.aws.adapter import Ec2Adapter
from ippool.aws.models import Address, pool_tags
from ippool.denylist import Denylist
from ippool.errors import AddressGone, IppoolError, PtrStillSet
from ippool.records import PoolRecords
from ippool.spec import DEFAULT_POOL_NAME, TAG_PTR, TAG_PTR_ZONE
from ippool.states import EipState

log = logging.getLogger("ippool.reaper")

# The detail of a reap that AWS deferred (InvalidAddress.PtrSet after a PTR reset): retried on the next cycle.
PTR_STILL_SET = "reverse DNS still being removed by AWS (InvalidAddress.PtrSet): released on a later cycle"


def no_checkpoint(name: str) -> None:
    """The checkpoint of a run without fault injection: does nothing."""
    return None


@dataclass(frozen=True)
class ReapResult:
    host: str
    allocation_id: str
    public_ip: str
    released: bool
    detail: str = ""

    def to_json(self) -> dict[str, object]:
        return {"host": self.host, "allocation_id": self.allocation_id, "public_ip": self.public_ip,
                "released": self.released, "detail": self.detail}


@dataclass
class Parker:
    """Parks EIPs: tags them `parked` with a deadline in AWS (the durable record), then indexes them in Redis."""

    aws: Ec2Adapter
    records: PoolRecords
    pool_name: str = DEFAULT_POOL_NAME

    def park(self, host: str, slot: int, address: Address, until: float, *, let_go: bool = False) -> bool:
        """Park `address` until epoch `until`; False when AWS no longer has it (nothing to park).

        `let_go`: the address was just replaced on its slot. The placement detached it from the slot's private IP
        first; if it still shows an association (moto ignores private IPs, so it never saw it there), detach it
        now, so a parked EIP never holds a slot."""
        try:
            if let_go:
                current = self.aws.get_address(address.allocation_id)
                if current is None:
                    raise AddressGone(f"EIP {address.allocation_id} is gone")
                ownership.require_owned(current, self.pool_name, host, slot)  # before detaching it from anything
                if current.association_id:
                    self.aws.disassociate_address(current.association_id)
            self.aws.create_tags(address.allocation_id,
                                 pool_tags(self.pool_name, host, slot, EipState.PARKED, parked_until=until))
        except AddressGone:
            self.records.unpark(host, address.allocation_id)
            return False
        self.records.park(host, address.allocation_id, address.public_ip, slot, until)
        return True


@dataclass
class Reaper:
    """Releases the due parked EIPs of a pool; `checkpoint(name)` is called after each step (fault injection)."""

    aws: Ec2Adapter
    denylist: Denylist
    records: PoolRecords
    clock: Callable[[], float]
    pool_name: str = DEFAULT_POOL_NAME
    checkpoint: Callable[[str], None] = no_checkpoint

    def due(self, host: str) -> list[Address]:
        """Parked EIPs of `host` whose deadline has passed (an unreadable deadline counts as due)."""
        return self.due_by_host([host]).get(host, [])

    def due_by_host(self, hosts: Iterable[str]) -> dict[str, list[Address]]:
        """The due parked EIPs of each of `hosts` that has any, from one DescribeAddresses of the pool's parked EIPs:
        a worker serving many hosts reads AWS once a cycle, not once per host (parked EIPs are few; hosts many)."""
        wanted = set(hosts)
        now = self.clock()
        found: dict[str, list[Address]] = {}
        for address in self.aws.describe_pool_addresses(self.pool_name, states=[EipState.PARKED]):
            if address.host in wanted and (address.parked_until is None or address.parked_until <= now):
                found.setdefault(address.host, []).append(address)
        return found

    def reap(self, host: str, stop: Callable[[], bool] = lambda: False,
             due: list[Address] | None = None) -> list[ReapResult]:
        """Release every due parked EIP of `host` (`due`: as `due_by_host` read them this cycle; None: read them
        now); one AWS refusal is reported and the rest go on."""
        results = []
        for address in self.due(host) if due is None else due:
            if stop():
                break
            try:
                results.append(self.release(host, address))
            except IppoolError as exc:
                log.warning("reaping %s (%s) failed: %s", address.public_ip, address.allocation_id, exc)
                results.append(ReapResult(host, address.allocation_id, address.public_ip, False, str(exc)))
        return results

    def release(self, host: str, address: Address, *, deny: bool = True, detach: bool = False) -> ReapResult:
        """Reset PTR, deny, release one EIP of ours. An associated one is left alone (it still serves a slot:
        reconcile decides) unless `detach` (destroy) says to disassociate it first."""
        ownership.require_owned(address, self.pool_name, host)  # never release another pool's or host's EIP
        if address.associated and not detach:
            return ReapResult(host, address.allocation_id, address.public_ip, False,
                              "still associated to a slot: left for `pool reconcile`")
        ptr_name = address.tags.get(TAG_PTR)
        if ptr_name:
            self.aws.reset_reverse_dns(address.allocation_id)
            self.checkpoint("reset-ptr")
            zone = address.tags.get(TAG_PTR_ZONE)
            if zone:  # the forward record we created for this address (unique to it), so nothing else uses it
                self.aws.delete_a_record(zone, ptr_name, address.public_ip)
            # Emptied (the pool never deletes tags): the next attempt goes straight to release, not reset again.
            self.aws.create_tags(address.allocation_id, {TAG_PTR: ""})
        if deny:
            self.denylist.add(host, address.public_ip)
            self.checkpoint("denylist")
        if address.association_id:
            self.aws.disassociate_address(address.association_id)
        try:
            released = self.aws.release_address(address.allocation_id)
        except PtrStillSet:
            # AWS refuses release for minutes after a PTR reset: not a failure, the next cycle releases it.
            log.info("%s: %s (%s) waits for AWS to drop its reverse DNS", host, address.public_ip,
                     address.allocation_id)
            return ReapResult(host, address.allocation_id, address.public_ip, False, PTR_STILL_SET)
        self.checkpoint("release")
        self.records.unpark(host, address.allocation_id)
        log.info("%s: released %s (%s)", host, address.public_ip, address.allocation_id)
        return ReapResult(host, address.allocation_id, address.public_ip, True,
                          "" if released else "already released")
