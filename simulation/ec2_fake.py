"""The simulation's EC2: the named EC2 stand-in (`simulation.reusing_ec2.ReusingEc2StandIn`, which hands released
addresses straight back the way AWS does) over moto, plus reverse DNS, which moto does not implement.

Named fake. A DescribeAddresses is answered again from the last identical one as long as no call that may change
anything was made since (anything but a read: AWS's answer could not have changed), so the pool worker's reads
of its parked addresses and the simulation's own read-back between two cycles cost one request, not one each; an
instance type's limits (DescribeInstanceTypes), which AWS never changes, are asked once per type. The tags of a
released address go the way they go in AWS, by AWS's own doing: dropped from moto's store (in this process, see
simulation.sandbox) without a request of the tool's.

Reverse DNS (ModifyAddressAttribute / DescribeAddressesAttribute / ResetAddressAttribute) is kept in
memory per allocation and behaves as AWS does, on the simulated clock: an update answers PENDING and is served only
`ptr_delay_s` later; release answers InvalidAddress.PtrSet while a PTR is set and for `ptr_release_delay_s` after
its reset, so the reaper's reset-before-release order and its "not yet" retry are exercised.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from ippool.aws.client import is_read
from ippool.aws.errors import map_aws_error
from ippool.aws.models import ReverseDns
from ippool.states import PtrStatus
from simulation.reusing_ec2 import ReusingEc2StandIn

# AWS's observed delays: a PTR update takes tens of seconds; release is refused for minutes after a reset.
PTR_DELAY_S = 30.0
PTR_RELEASE_DELAY_S = 300.0


class SimulatedEc2(ReusingEc2StandIn):
    """Named fake: the reusing EC2 stand-in with in-memory reverse DNS (see the module docstring)."""

    def __init__(self, *args: Any, ptr_delay_s: float = PTR_DELAY_S, ptr_release_delay_s: float = PTR_RELEASE_DELAY_S,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.ptr_delay_s = ptr_delay_s
        self.ptr_release_delay_s = ptr_release_delay_s
        self.reverse_dns: dict[str, str] = {}  # allocation id -> PTR name
        self._ptr_ready_at: dict[str, float] = {}  # allocation id -> when its pending update is served
        self._ptr_reset_until: dict[str, float] = {}  # allocation id -> until when release answers PtrSet
        self._described: dict[str, dict[str, Any]] = {}  # DescribeAddresses' parameters -> AWS's answer, until a write
        self._instance_types: dict[str, dict[str, Any]] = {}  # DescribeInstanceTypes' parameters -> AWS's answer

    def _call(self, service: str, operation: str, subject: str, **params: Any) -> dict[str, Any]:
        """The adapter's call; a DescribeAddresses asked again with nothing written since gets AWS's last answer."""
        if service == "ec2" and operation == "DescribeInstanceTypes":
            asked = json.dumps(params, sort_keys=True)
            if asked not in self._instance_types:
                self._instance_types[asked] = super()._call(service, operation, subject, **params)
            return copy.deepcopy(self._instance_types[asked])
        if service != "ec2" or operation != "DescribeAddresses":
            if not is_read(operation):
                self._described.clear()
            return super()._call(service, operation, subject, **params)
        asked = json.dumps(params, sort_keys=True)
        answer = self._described.get(asked)
        if answer is None:
            answer = self._described[asked] = super()._call(service, operation, subject, **params)
        return copy.deepcopy(answer)  # the caller's own, as a fresh answer would be

    def set_reverse_dns(self, allocation_id: str, domain_name: str) -> ReverseDns:
        """Remember the EIP's PTR, served `ptr_delay_s` from now (moto has no ModifyAddressAttribute)."""
        self.reverse_dns[allocation_id] = domain_name
        self._ptr_ready_at[allocation_id] = self._clock() + self.ptr_delay_s
        return ReverseDns(allocation_id, update_value=domain_name, update_status=PtrStatus.PENDING)

    def describe_reverse_dns(self, allocation_id: str) -> ReverseDns:
        """PENDING until the update's delay has passed, then the PTR served (moto has no DescribeAddressesAttribute)."""
        name = self.reverse_dns.get(allocation_id)
        if name is None:
            return ReverseDns(allocation_id)
        if self._clock() < self._ptr_ready_at.get(allocation_id, 0.0):
            return ReverseDns(allocation_id, update_value=name, update_status=PtrStatus.PENDING)
        return ReverseDns(allocation_id, ptr_record=name, update_value=name, update_status=PtrStatus.SUCCESSFUL)

    def reset_reverse_dns(self, allocation_id: str) -> None:
        """Forget the EIP's PTR; release stays refused for `ptr_release_delay_s` (moto has no ResetAddressAttribute)."""
        self.reverse_dns.pop(allocation_id, None)
        self._ptr_reset_until[allocation_id] = self._clock() + self.ptr_release_delay_s

    def _drop_tags(self, allocation_id: str, keys: list[str]) -> None:
        """The released address's tags, dropped from moto's own store as its DeleteTags of them would (no request)."""
        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.ec2.models import ec2_backends

        ec2_backends[DEFAULT_ACCOUNT_ID][self.region].delete_tag_keys([allocation_id], keys)

    def release_address(self, allocation_id: str) -> bool:
        """Release through the stand-in, answering InvalidAddress.PtrSet while AWS would still hold a PTR."""
        if allocation_id in self.reverse_dns or self._clock() < self._ptr_reset_until.get(allocation_id, 0.0):
            raise map_aws_error("InvalidAddress.PtrSet", "the address has a PTR record set",
                                operation="ReleaseAddress", subject=f"EIP {allocation_id}", region=self.region,
                                attempts=1)
        self._ptr_reset_until.pop(allocation_id, None)
        released = super().release_address(allocation_id)
        self._described.clear()  # the stand-in dropped the address's tags past `_call` (AWS's own doing)
        return released
