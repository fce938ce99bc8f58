"""What to tell on-call when the region's Elastic IP quota runs out: which quota, raised to what."""

from __future__ import annotations

from ippool.aws import Ec2Adapter
from ippool.aws_models import EIP_QUOTA_CODE, EIP_QUOTA_SERVICE
from ippool.errors import IppoolError


def quota_advice(aws: Ec2Adapter, extra: int, planned: int | None = None) -> str:
    """One sentence: raise Service Quotas ec2/L-0263D0A3 in the region from its current value to at least what the
    account holds now plus `extra` (or the capacity plan's `planned` EIPs, when larger)."""
    try:
        held = aws.count_region_addresses()
    except IppoolError:
        held = None
    try:
        quota: int | None = aws.eip_quota()
    except IppoolError:  # Service Quotas unreachable or not permitted: say what we know
        quota = None
    target = max(held + extra if held is not None else extra, planned or 0)
    now = f"now {quota}" if quota is not None else "current value unknown"
    holding = f"; the account holds {held} EIPs there" if held is not None else ""
    return (f"raise Service Quotas {EIP_QUOTA_SERVICE}/{EIP_QUOTA_CODE} (EC2-VPC Elastic IPs) in {aws.region} "
            f"({now}) to at least {target}{holding} (see `sendhost pool plan`)")
