"""Named fakes at the AWS adapter boundary for what moto does not model, used by the rotation tests.

`MotoGaps` is the real `Ec2Adapter` over moto, overriding only:
- reverse DNS (moto has no Modify/ResetAddressAttribute): the PTR is kept as a tag `fake:reverse-dns` on the EIP
  in moto, so it survives across processes, and release refuses an EIP that still has one, as AWS does;
- the EIP quota (moto never answers AddressLimitExceeded, and has no EC2 Service Quotas): with `quota` set, an
  allocation beyond `quota` EIPs in the region fails with AWS's error code, mapped by the real error mapping;
- AllowReassociation (moto ignores `PrivateIpAddress` on associate, so it never detaches the EIP that held the
  private IP before): the fake records each association's private IP in a tag `fake:private-ip` and, like AWS,
  detaches the EIP that held that private IP when another one is associated to it, and reports that private IP
  when asked which EIPs the interface holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ippool.aws.adapter import Ec2Adapter
from ippool.aws.errors import map_aws_error
from ippool.aws.models import Address
from ippool.errors import AwsRequestFailed

PTR_TAG = "fake:reverse-dns"
PRIVATE_IP_TAG = "fake:private-ip"


class MotoGaps(Ec2Adapter):
    """Named fake: moto plus reverse DNS kept in a tag and an enforced EIP quota (see the module docstring)."""

    def __init__(self, *args: Any, quota: int | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.quota = quota

    def set_reverse_dns(self, allocation_id: str, domain_name: str) -> None:
        self._call("ec2", "CreateTags", f"EIP {allocation_id}", Resources=[allocation_id],
                   Tags=[{"Key": PTR_TAG, "Value": domain_name}])

    def reset_reverse_dns(self, allocation_id: str) -> None:
        # Emptied rather than deleted: the pool never deletes tags, so its IAM policy has no ec2:DeleteTags.
        self._call("ec2", "CreateTags", f"EIP {allocation_id}", Resources=[allocation_id],
                   Tags=[{"Key": PTR_TAG, "Value": ""}])

    def release_address(self, allocation_id: str) -> bool:
        current = self.get_address(allocation_id)
        if current is not None and current.tags.get(PTR_TAG):
            raise map_aws_error("InvalidIPAddress.InUse", "has reverse DNS", operation="ReleaseAddress",
                                subject=f"EIP {allocation_id}", region=self.region, attempts=1)
        return super().release_address(allocation_id)

    def allocate_address(self, tags: Mapping[str, str], address: str | None = None) -> Address:
        if self.quota is not None and self.count_region_addresses() >= self.quota:
            raise map_aws_error("AddressLimitExceeded", "The maximum number of addresses has been reached.",
                                operation="AllocateAddress", subject=f"host {tags.get('sendhost:host')}",
                                region=self.region, attempts=1)
        return super().allocate_address(tags, address)

    def associate_address(self, allocation_id: str, eni_id: str, private_ip: str) -> str:
        for other in self.describe_interface_addresses(eni_id):
            if other.allocation_id != allocation_id and other.tags.get(PRIVATE_IP_TAG) == private_ip \
                    and other.association_id:
                super().disassociate_address(other.association_id)
        association_id = super().associate_address(allocation_id, eni_id, private_ip)
        self._call("ec2", "CreateTags", f"EIP {allocation_id}", Resources=[allocation_id],
                   Tags=[{"Key": PRIVATE_IP_TAG, "Value": private_ip}])
        return association_id

    def describe_interface_addresses(self, eni_id: str) -> list[Address]:
        """As AWS reports them: each EIP with the private IP it was associated to (moto reports the primary)."""
        return [replace(address, private_ip=address.tags.get(PRIVATE_IP_TAG) or address.private_ip)
                for address in super().describe_interface_addresses(eni_id)]

    def eip_quota(self) -> int:
        if self.quota is None:
            raise AwsRequestFailed("the fake has no quota configured", "NoSuchResource")
        return self.quota

    def reverse_dns(self, allocation_id: str) -> str | None:
        """The PTR the fake holds for an EIP (test helper)."""
        current = self.get_address(allocation_id)
        return (current.tags.get(PTR_TAG) or None) if current is not None else None
