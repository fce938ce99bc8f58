"""Calls moto lacks or gets wrong, checked at the adapter boundary against the named Stubber fake (`StubbedAws`):
the exact request the adapter sends is asserted (`expected_params`), and botocore validates it against AWS's model.

moto 5 has no ModifyAddressAttribute/ResetAddressAttribute (NotImplementedError), no EC2 Service Quotas
(NoSuchResourceException), and its AssociateAddress ignores `PrivateIpAddress` (it reports the ENI's primary IP).
"""

from __future__ import annotations

from ippool.aws.models import EIP_QUOTA_CODE
from tests.support.aws import AdapterFactory, StubbedAws


def test_eip_quota_reads_l_0263d0a3(make_adapter: AdapterFactory, stubbed_aws: StubbedAws) -> None:
    stubbed_aws.stub("service-quotas").add_response(
        "get_service_quota",
        {"Quota": {"ServiceCode": "ec2", "QuotaCode": EIP_QUOTA_CODE, "QuotaName": "EC2-VPC Elastic IPs",
                   "Value": 25.0, "Adjustable": True}},
        {"ServiceCode": "ec2", "QuotaCode": "L-0263D0A3"})
    assert make_adapter(stubbed_aws).eip_quota() == 25
    stubbed_aws.assert_all_answered()
