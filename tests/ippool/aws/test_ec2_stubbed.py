"""Calls moto lacks or gets wrong, checked at the adapter boundary against the named Stubber fake (`StubbedAws`):
the exact request the adapter sends is asserted (`expected_params`), and botocore validates it against AWS's model.

moto 5 has no ModifyAddressAttribute/ResetAddressAttribute/DescribeAddressesAttribute (NotImplementedError), never
answers PENDING, InvalidAddress.PtrSet or a private zone of the same name, no EC2 Service Quotas
(NoSuchResourceException), and its AssociateAddress ignores `PrivateIpAddress` (it reports the ENI's primary IP).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from ippool import errors
from ippool.aws.ec2 import PTR_POLL_S
from ippool.aws.route53 import CHANGE_POLL_S
from ippool.states import PtrStatus
from tests.support.aws import AdapterFactory, CallRecorder, SleepRecorder, StubbedAws, client_error


def test_associate_sends_the_slot_private_ip_and_refuses_reassociation(make_adapter: AdapterFactory,
                                                                      stubbed_aws: StubbedAws) -> None:
    stubbed_aws.stub("ec2").add_response(
        "associate_address", {"AssociationId": "eipassoc-0new"},
        {"AllocationId": "eipalloc-0abc", "NetworkInterfaceId": "eni-01", "PrivateIpAddress": "10.0.0.12",
         "AllowReassociation": False})
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


def _ptr_answer(*, ptr: str | None = None, status: str | None = None, reason: str = "") -> dict[str, Any]:
    address: dict[str, Any] = {"AllocationId": "eipalloc-0abc", "PublicIp": "198.18.0.9"}
    if ptr is not None:
        address["PtrRecord"] = ptr
    if status is not None:
        address["PtrRecordUpdate"] = {"Value": "s1.mail.example.com", "Status": status, "Reason": reason}
    return {"Addresses": [address]}


PTR_QUERY = {"AllocationIds": ["eipalloc-0abc"], "Attribute": "domain-name"}


def test_reverse_dns_pending_is_polled_until_aws_serves_it(make_adapter: AdapterFactory, stubbed_aws: StubbedAws,
                                                          sleeper: SleepRecorder, aws_calls: CallRecorder) -> None:
    # AWS answers ModifyAddressAttribute with the update PENDING; the PTR is there only once DescribeAddressesAttribute
    # reports it (tens of seconds later).
    ec2 = stubbed_aws.stub("ec2")
    ec2.add_response("modify_address_attribute", {"Address": {
        "AllocationId": "eipalloc-0abc", "PtrRecordUpdate": {"Value": "s1.mail.example.com", "Status": "PENDING"}}},
        {"AllocationId": "eipalloc-0abc", "DomainName": "s1.mail.example.com"})
    ec2.add_response("describe_addresses_attribute", _ptr_answer(status="PENDING"), PTR_QUERY)
    ec2.add_response("describe_addresses_attribute", _ptr_answer(status="PENDING"), PTR_QUERY)
    ec2.add_response("describe_addresses_attribute", _ptr_answer(ptr="s1.mail.example.com.", status="SUCCESSFUL"),
                     PTR_QUERY)
    adapter = make_adapter(stubbed_aws)
    asked = adapter.set_reverse_dns("eipalloc-0abc", "s1.mail.example.com")
    assert (asked.update_status, asked.ptr_record) == (PtrStatus.PENDING, None)
    served = adapter.wait_reverse_dns("eipalloc-0abc", "s1.mail.example.com")
    assert served.serves("s1.mail.example.com") and served.update_status == PtrStatus.SUCCESSFUL
    assert sleeper.waits == [PTR_POLL_S, PTR_POLL_S]
    assert aws_calls.count("ec2:DescribeAddressesAttribute") == 3
    stubbed_aws.assert_all_answered()


def test_reverse_dns_failed_is_reported_with_aws_reason(make_adapter: AdapterFactory,
                                                        stubbed_aws: StubbedAws) -> None:
    ec2 = stubbed_aws.stub("ec2")
    ec2.add_response("describe_addresses_attribute", _ptr_answer(status="PENDING"), PTR_QUERY)
    ec2.add_response("describe_addresses_attribute",
                     _ptr_answer(status="FAILED", reason="forward record does not match"), PTR_QUERY)
    with pytest.raises(errors.ReverseDnsFailed, match="forward record does not match"):
        make_adapter(stubbed_aws).wait_reverse_dns("eipalloc-0abc", "s1.mail.example.com")
    stubbed_aws.assert_all_answered()


def test_reverse_dns_still_pending_past_the_wait_is_a_failure(make_adapter: AdapterFactory,
                                                              stubbed_aws: StubbedAws) -> None:
    ec2 = stubbed_aws.stub("ec2")
    for _ in range(3):
        ec2.add_response("describe_addresses_attribute", _ptr_answer(status="PENDING"), PTR_QUERY)
    with pytest.raises(errors.ReverseDnsFailed, match="still not set after 20s"):
        make_adapter(stubbed_aws).wait_reverse_dns("eipalloc-0abc", "s1.mail.example.com", timeout_s=20,
                                                   interval_s=10)
    stubbed_aws.assert_all_answered()


def test_release_after_a_ptr_reset_answers_ptr_set_until_aws_drops_it(make_adapter: AdapterFactory,
                                                                      stubbed_aws: StubbedAws) -> None:
    # After ResetAddressAttribute, AWS refuses ReleaseAddress with InvalidAddress.PtrSet for minutes: "not yet".
    ec2 = stubbed_aws.stub("ec2")
    ec2.add_response("reset_address_attribute", {"Address": {"AllocationId": "eipalloc-0abc"}},
                     {"AllocationId": "eipalloc-0abc", "Attribute": "domain-name"})
    ec2.add_client_error("release_address", **client_error("InvalidAddress.PtrSet", "The address has a PTR set"))
    ec2.add_response("release_address", {}, {"AllocationId": "eipalloc-0abc"})
    adapter = make_adapter(stubbed_aws)
    adapter.reset_reverse_dns("eipalloc-0abc")
    with pytest.raises(errors.PtrStillSet, match=r"InvalidAddress\.PtrSet") as caught:
        adapter.release_address("eipalloc-0abc")
    assert caught.value.exit_code == 1
    assert adapter.release_address("eipalloc-0abc") is True
    stubbed_aws.assert_all_answered()


def test_forward_record_change_is_waited_insync(make_adapter: AdapterFactory, stubbed_aws: StubbedAws,
                                                sleeper: SleepRecorder) -> None:
    route53 = stubbed_aws.stub("route53")
    route53.add_response("get_change", {"ChangeInfo": {"Id": "/change/C1", "Status": "PENDING",
                                                       "SubmittedAt": datetime(2026, 11, 30, tzinfo=UTC)}},
                         {"Id": "C1"})
    route53.add_response("get_change", {"ChangeInfo": {"Id": "/change/C1", "Status": "INSYNC",
                                                       "SubmittedAt": datetime(2026, 11, 30, tzinfo=UTC)}},
                         {"Id": "C1"})
    make_adapter(stubbed_aws).wait_for_change("C1")
    assert sleeper.waits == [CHANGE_POLL_S]
    stubbed_aws.assert_all_answered()


def _zone(zone_id: str, private: bool) -> dict[str, Any]:
    return {"Id": f"/hostedzone/{zone_id}", "Name": "mail.example.com.", "CallerReference": zone_id,
            "Config": {"PrivateZone": private}}


def test_a_private_zone_of_the_same_name_is_ignored(make_adapter: AdapterFactory, stubbed_aws: StubbedAws) -> None:
    # A private zone answers only inside its VPCs: the forward record must go to the public one.
    route53 = stubbed_aws.stub("route53")
    route53.add_response("list_hosted_zones_by_name", {
        "HostedZones": [_zone("ZPRIVATE", True), _zone("ZPUBLIC", False)], "IsTruncated": False, "MaxItems": "100"},
        {"DNSName": "mail.example.com.", "MaxItems": "100"})
    change = {"Action": "UPSERT", "ResourceRecordSet": {"Name": "s1.mail.example.com", "Type": "A", "TTL": 300,
                                                        "ResourceRecords": [{"Value": "198.18.0.9"}]}}
    route53.add_response("change_resource_record_sets", {"ChangeInfo": {
        "Id": "/change/C9", "Status": "PENDING", "SubmittedAt": datetime(2026, 11, 30, tzinfo=UTC)}},
        {"HostedZoneId": "ZPUBLIC", "ChangeBatch": {"Changes": [change]}})
    assert make_adapter(stubbed_aws).upsert_a_record("mail.example.com", "s1.mail.example.com", "198.18.0.9") == "C9"
    stubbed_aws.assert_all_answered()


def test_only_a_private_zone_of_that_name_is_a_config_error(make_adapter: AdapterFactory,
                                                            stubbed_aws: StubbedAws) -> None:
    stubbed_aws.stub("route53").add_response("list_hosted_zones_by_name", {
        "HostedZones": [_zone("ZPRIVATE", True)], "IsTruncated": False, "MaxItems": "100"},
        {"DNSName": "mail.example.com.", "MaxItems": "100"})
    with pytest.raises(errors.HostedZoneNotFound, match="only a private zone has that name") as caught:
        make_adapter(stubbed_aws).upsert_a_record("mail.example.com", "s1.mail.example.com", "198.18.0.9")
    assert caught.value.exit_code == 2
