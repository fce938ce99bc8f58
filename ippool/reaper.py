"""The reaper: release parked EIPs past their deadline, and deny their addresses for 7 days.

Order matters for crashes: reset reverse DNS (AWS refuses to release an EIP with a PTR), deny the address, release,
forget the parked entry; each step is safe to repeat, so a reap killed anywhere is finished by the next one.
AWS tags are the record: the reaper reads parked EIPs from AWS, not from Redis.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ippool.aws import Ec2Adapter
from ippool.aws_models import STATE_PARKED, Address
from ippool.denylist import Denylist
from ippool.errors import IppoolError
from ippool.ledger import Ledger
from ippool.spec import DEFAULT_POOL_NAME, TAG_PTR

log = logging.getLogger("ippool.reaper")


def _no_checkpoint(name: str) -> None:
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
class Reaper:
    """Releases the due parked EIPs of a pool; `checkpoint(name)` is called after each step (fault injection)."""

    aws: Ec2Adapter
    denylist: Denylist
    ledger: Ledger
    clock: Callable[[], float]
    pool_name: str = DEFAULT_POOL_NAME
    checkpoint: Callable[[str], None] = _no_checkpoint

    def due(self, host: str) -> list[Address]:
        """Parked EIPs of `host` whose deadline has passed (an unreadable deadline counts as due)."""
        now = self.clock()
        parked = self.aws.describe_pool_addresses(self.pool_name, host=host, states=[STATE_PARKED])
        return [a for a in parked if a.parked_until is None or a.parked_until <= now]

    def reap(self, host: str, stop: Callable[[], bool] = lambda: False) -> list[ReapResult]:
        """Release every due parked EIP of `host`; one AWS refusal is reported and the rest go on."""
        results = []
        for address in self.due(host):
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
        if address.associated and not detach:
            return ReapResult(host, address.allocation_id, address.public_ip, False,
                              "still associated to a slot: left for `pool reconcile`")
        if address.tags.get(TAG_PTR):
            self.aws.reset_reverse_dns(address.allocation_id)
            self.checkpoint("reset-ptr")
        if deny:
            self.denylist.add(host, address.public_ip)
            self.checkpoint("denylist")
        if address.association_id:
            self.aws.disassociate_address(address.association_id)
        released = self.aws.release_address(address.allocation_id)
        self.checkpoint("release")
        self.ledger.unpark(host, address.allocation_id)
        log.info("%s: released %s (%s)", host, address.public_ip, address.allocation_id)
        return ReapResult(host, address.allocation_id, address.public_ip, True,
                          "" if released else "already released")

    def reap_all(self, hosts: Iterable[str], stop: Callable[[], bool] = lambda: False) -> list[ReapResult]:
        return [result for host in hosts for result in self.reap(host, stop)]
