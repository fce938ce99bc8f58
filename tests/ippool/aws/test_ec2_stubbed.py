"""Calls moto lacks or gets wrong, checked at the adapter boundary against the named Stubber fake (`StubbedAws`):
the exact request the adapter sends is asserted (`expected_params`), and botocore validates it against AWS's model.

moto 5 has no ModifyAddressAttribute/ResetAddressAttribute (NotImplementedError), no EC2 Service Quotas
(NoSuchResourceException), and its AssociateAddress ignores `PrivateIpAddress` (it reports the ENI's primary IP).
"""

from __future__ import annotations

from tests.support.aws import AdapterFactory, CallRecorder, StubbedAws


def test_associate_sends_the_slot_private_ip_and_allows_reassociation(make_adapter: AdapterFactory,
                                                                      stubbed_aws: StubbedAws) -> None:
    stubbed_aws.stub("ec2").add_response(
        "associate_address", {"AssociationId": "eipassoc-0new"},
        {"AllocationId": "eipalloc-0abc", "NetworkInterfaceId": "eni-01", "PrivateIpAddress": "10.0.0.12",
         "AllowReassociation": True})
    assert make_adapter(stubbed_aws).associate_address("eipalloc-0abc", "eni-01", "10.0.0.12") == "eipassoc-0new"
    stubbed_aws.assert_all_answered()


def test_set_reverse_dns_sends_the_domain_name(make_adapter: AdapterFactory, stubbed_aws: StubbedAws,
                                               aws_calls: CallRecorder) -> None:
    stubbed_aws.stub("ec2").add_response(
        "modify_address_attribute",
        {"Address": {"AllocationId": "eipalloc-0abc", "PublicIp": "198.18.0.9",
                     "PtrRecordUpdate": {"Value": "s1.mail.example.com", "Status": "PENDING"}}},
        {"AllocationId": "eipalloc-0abc", "DomainName": "s1.mail.example.com"})
    make_adapter(stubbed_aws).set_reverse_dns("eipalloc-0abc", "s1.mail.example.com")
    assert aws_calls.calls == ["ec2:ModifyAddressAttribute"]
    stubbed_aws.assert_all_answered()


def test_reset_reverse_dns_resets_the_domain_name_attribute(make_adapter: AdapterFactory,
                                                            stubbed_aws: StubbedAws) -> None:
    stubbed_aws.stub("ec2").add_response(
        "reset_address_attribute", {"Address": {"AllocationId": "eipalloc-0abc", "PublicIp": "198.18.0.9"}},
        {"AllocationId": "eipalloc-0abc", "Attribute": "domain-name"})
    make_adapter(stubbed_aws).reset_reverse_dns("eipalloc-0abc")
    stubbed_aws.assert_all_answered()
