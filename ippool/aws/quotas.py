"""The region's Elastic IP quota: reading it, and what to tell on-call when it runs out (which quota, raised to what).

The quota's code is written once, in `ippool.aws.models`."""

from __future__ import annotations

from typing import Protocol

from ippool.aws.client import AwsClient
from ippool.aws.models import EIP_QUOTA_CODE, EIP_QUOTA_NAME, EIP_QUOTA_SERVICE
from ippool.errors import IppoolError


class QuotaCalls(AwsClient):
    """The Service Quotas part of the adapter."""

    def eip_quota(self) -> int:
        """The region's applied Elastic IP quota (Service Quotas ec2/L-0263D0A3; AWS's default is 5)."""
        response = self._call("service-quotas", "GetServiceQuota", f"quota {EIP_QUOTA_SERVICE}/{EIP_QUOTA_CODE}",
                              ServiceCode=EIP_QUOTA_SERVICE, QuotaCode=EIP_QUOTA_CODE)
        return int(response["Quota"]["Value"])


class QuotaReader(Protocol):
    """What reading the quota needs: the adapter fits."""

    region: str

    def count_region_addresses(self) -> int: ...
    def eip_quota(self) -> int: ...


def quota_advice(aws: QuotaReader, extra: int, planned: int | None = None) -> str:
    """One sentence: raise Service Quotas ec2/L-0263D0A3 in the region from its current value to at least what the
    account holds now plus `extra` (or the capacity plan's `planned` EIPs, when larger)."""
    try:
        held: int | None = aws.count_region_addresses()
    except IppoolError:
        held = None
    try:
        quota: int | None = aws.eip_quota()
    except IppoolError:  # Service Quotas unreachable or not permitted: say what we know
        quota = None
    target = max(held + extra if held is not None else extra, planned or 0)
    now = f"now {quota}" if quota is not None else "current value unknown"
    holding = f"; the account holds {held} EIPs there" if held is not None else ""
    return f"raise {EIP_QUOTA_NAME} in {aws.region} ({now}) to at least {target}{holding} (see `sendhost pool plan`)"
