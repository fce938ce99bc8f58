"""The simulation's EC2: the named EC2 stand-in (`simulation.reusing_ec2.ReusingEc2StandIn`, which hands released
addresses straight back the way AWS does) over moto, plus reverse DNS, which moto does not implement.

Named fake. Reverse DNS (ModifyAddressAttribute / ResetAddressAttribute) is kept in memory per allocation, and
release refuses an EIP that still has a PTR, as AWS does, so the reaper's reset-before-release order is exercised.
"""

from __future__ import annotations

from typing import Any

from ippool.aws.errors import map_aws_error
from simulation.reusing_ec2 import ReusingEc2StandIn


class SimulatedEc2(ReusingEc2StandIn):
    """Named fake: the reusing EC2 stand-in with in-memory reverse DNS (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.reverse_dns: dict[str, str] = {}  # allocation id -> PTR name

    def set_reverse_dns(self, allocation_id: str, domain_name: str) -> None:
        """Remember the EIP's PTR (moto has no ModifyAddressAttribute)."""
        self.reverse_dns[allocation_id] = domain_name

    def reset_reverse_dns(self, allocation_id: str) -> None:
        """Forget the EIP's PTR (moto has no ResetAddressAttribute)."""
        self.reverse_dns.pop(allocation_id, None)

    def release_address(self, allocation_id: str) -> bool:
        """Release through the stand-in, refusing an EIP that still has a PTR, as AWS does."""
        if allocation_id in self.reverse_dns:
            raise map_aws_error("InvalidIPAddress.InUse", "the address has reverse DNS set",
                                operation="ReleaseAddress", subject=f"EIP {allocation_id}", region=self.region,
                                attempts=1)
        return super().release_address(allocation_id)
