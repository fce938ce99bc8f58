"""Named fakes at the AWS adapter boundary for what moto does not model, used by the rotation tests.

`MotoGaps` is the real `Ec2Adapter` over moto, overriding only:
- reverse DNS (moto has no Modify/ResetAddressAttribute/DescribeAddressesAttribute): the PTR is kept as a tag
  `fake:reverse-dns` on the EIP in moto, so it survives across processes. As AWS: an update is PENDING for
  `ptr_delay_s`, and release answers InvalidAddress.PtrSet while a PTR is set and for `ptr_release_delay_s` after
  its reset (both measured on the adapter's clock; 0 by default, for the fixed-clock child processes);
- deleting a forward record that is not there (moto answers InvalidInput; Route 53's "not found" means done);
- the EIP quota (moto never answers AddressLimitExceeded, and has no EC2 Service Quotas): with `quota` set, an
  allocation beyond `quota` EIPs in the region fails with AWS's error code, mapped by the real error mapping;
- private IPs on associate (moto ignores `PrivateIpAddress`): the fake records each association's private IP in a
  tag `fake:private-ip`, refuses (Resource.AlreadyAssociated, as AWS with AllowReassociation=False) to associate a
  private IP another EIP holds, and reports that private IP when asked which EIPs the interface holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ippool.aws.adapter import Ec2Adapter
from ippool.aws.errors import map_aws_error
from ippool.aws.models import Address, ReverseDns
from ippool.errors import AwsRequestFailed
from ippool.states import PtrStatus

PTR_TAG = "fake:reverse-dns"
PRIVATE_IP_TAG = "fake:private-ip"
PTR_READY_TAG = "fake:reverse-dns-ready-at"  # epoch seconds when a pending PTR update completes
PTR_RESET_TAG = "fake:reverse-dns-reset-until"  # epoch seconds until which release answers InvalidAddress.PtrSet


class MotoGaps(Ec2Adapter):
    """Named fake: moto plus reverse DNS kept in a tag and an enforced EIP quota (see the module docstring)."""

    def __init__(self, *args: Any, quota: int | None = None, ptr_delay_s: float = 0.0,
                 ptr_release_delay_s: float = 0.0, ptr_failure: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.ptr_failure = ptr_failure  # when set, every PTR update ends FAILED with this reason
        self.quota = quota
        self.ptr_delay_s = ptr_delay_s
        self.ptr_release_delay_s = ptr_release_delay_s

    def _tag(self, allocation_id: str, key: str, value: str) -> None:
        self._call("ec2", "CreateTags", f"EIP {allocation_id}", Resources=[allocation_id],
                   Tags=[{"Key": key, "Value": value}])

    def set_reverse_dns(self, allocation_id: str, domain_name: str) -> ReverseDns:
        """As AWS: the update is PENDING for `ptr_delay_s` (on the adapter's clock), then served."""
        self._tag(allocation_id, PTR_TAG, domain_name)
        self._tag(allocation_id, PTR_READY_TAG, repr(self._clock() + self.ptr_delay_s))
        return ReverseDns(allocation_id, update_value=domain_name, update_status=PtrStatus.PENDING)

    def describe_reverse_dns(self, allocation_id: str) -> ReverseDns:
        current = self.get_address(allocation_id)
        name = (current.tags.get(PTR_TAG) or None) if current is not None else None
        if current is None or name is None:
            return ReverseDns(allocation_id)
        if self._clock() < float(current.tags.get(PTR_READY_TAG) or 0):
            return ReverseDns(allocation_id, update_value=name, update_status=PtrStatus.PENDING)
        if self.ptr_failure is not None:
            return ReverseDns(allocation_id, update_value=name, update_status=PtrStatus.FAILED, reason=self.ptr_failure)
        return ReverseDns(allocation_id, ptr_record=name, update_value=name, update_status=PtrStatus.SUCCESSFUL)

    def reset_reverse_dns(self, allocation_id: str) -> None:
        """As AWS: the PTR goes, but release answers InvalidAddress.PtrSet for `ptr_release_delay_s` more."""
        # Emptied rather than deleted: the pool never deletes tags, so its IAM policy has no ec2:DeleteTags.
        self._tag(allocation_id, PTR_TAG, "")
        self._tag(allocation_id, PTR_RESET_TAG, repr(self._clock() + self.ptr_release_delay_s))

    def release_address(self, allocation_id: str) -> bool:
        current = self.get_address(allocation_id)
        if current is not None and (current.tags.get(PTR_TAG)
                                    or self._clock() < float(current.tags.get(PTR_RESET_TAG) or 0)):
            raise map_aws_error("InvalidAddress.PtrSet", "The address has a PTR record set", operation="ReleaseAddress",
                                subject=f"EIP {allocation_id}", region=self.region, attempts=1)
        return super().release_address(allocation_id)

    def allocate_address(self, tags: Mapping[str, str], address: str | None = None) -> Address:
        if self.quota is not None and self.count_region_addresses() >= self.quota:
            raise map_aws_error("AddressLimitExceeded", "The maximum number of addresses has been reached.",
                                operation="AllocateAddress", subject=f"host {tags.get('sendhost:host')}",
                                region=self.region, attempts=1)
        return super().allocate_address(tags, address)

    def associate_address(self, allocation_id: str, eni_id: str, private_ip: str) -> str:
        """As AWS with AllowReassociation=False: refused while another EIP holds that private IP."""
        for other in self.describe_interface_addresses(eni_id):
            if other.allocation_id != allocation_id and other.private_ip == private_ip and other.association_id:
                raise map_aws_error("Resource.AlreadyAssociated", "resource is already associated",
                                    operation="AssociateAddress", subject=f"EIP {allocation_id}",
                                    region=self.region, attempts=1)
        association_id = super().associate_address(allocation_id, eni_id, private_ip)
        self._tag(allocation_id, PRIVATE_IP_TAG, private_ip)
        return association_id

    def delete_a_record(self, zone_name: str, record_name: str, ip: str, ttl: int = 300) -> bool:
        """As Route 53: deleting a record that is not there is "already done" (moto answers InvalidInput there,
        Route 53 InvalidChangeBatch "not found", which the adapter already reads as done)."""
        try:
            return super().delete_a_record(zone_name, record_name, ip, ttl)
        except AwsRequestFailed as exc:
            if exc.code == "InvalidInput" and "but found none" in str(exc):
                return False
            raise

    def take_over(self, allocation_id: str, eni_id: str, private_ip: str) -> str:
        """Test helper: another tool associating with AllowReassociation=True, detaching whatever held the IP."""
        for other in self.describe_interface_addresses(eni_id):
            if other.allocation_id != allocation_id and other.private_ip == private_ip and other.association_id:
                super().disassociate_address(other.association_id)
        return self.associate_address(allocation_id, eni_id, private_ip)

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
