"""`pool doctor`'s checks against moto's EC2: the subnet's 0.0.0.0/0 and the primary IP's public address, and a
check that could not look (IAM enforced by moto, or an error the Stubber fake answers) never reporting fine."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto.core import set_initial_no_auth_action_count

from ippool.aws.models import InterfaceNetwork, Route, RouteTable
from ippool.network_check import (
    PUBLIC_ADDRESS_CHECK,
    ROUTE_CHECK,
    CheckStatus,
    NetworkCheck,
    check_host_network,
    route_check,
)
from tests.support.aws import REGION, AdapterFactory, CallRecorder, StubbedAws, client_error
from tests.support.vpc import Egress, SenderNetwork, build_sender_network
from toolkit.iam_policy import render_policy

NAT_FIX_TAIL = "to an internet gateway (igw-…); behind a NAT every send leaves from the NAT's address"


@pytest.fixture
def ec2(moto_aws: None) -> Iterator[Any]:
    client = boto3.client("ec2", region_name=REGION)
    yield client
    client.close()


def _by_name(checks: tuple[NetworkCheck, ...]) -> dict[str, NetworkCheck]:
    assert [c.name for c in checks] == [ROUTE_CHECK, PUBLIC_ADDRESS_CHECK]
    return {c.name: c for c in checks}


def test_public_subnet_with_a_public_primary_ip_passes(ec2: Any, make_adapter: AdapterFactory,
                                                       aws_calls: CallRecorder) -> None:
    net = build_sender_network(ec2)
    checks = _by_name(check_host_network(make_adapter(), "sender-1", net.instance_id))

    assert checks[ROUTE_CHECK] == NetworkCheck(
        "sender-1", ROUTE_CHECK, CheckStatus.OK,
        f"{net.route_table_id} (subnet {net.subnet_id}) routes 0.0.0.0/0 to {net.target}")
    assert net.public_ip is not None
    assert checks[PUBLIC_ADDRESS_CHECK] == NetworkCheck(
        "sender-1", PUBLIC_ADDRESS_CHECK, CheckStatus.OK,
        f"primary private IP {net.primary_private_ip} of {net.eni_id} has {net.public_ip} "
        f"(auto-assigned: it changes when the instance stops)")
    assert aws_calls.calls == ["ec2:DescribeInstances", "ec2:DescribeNetworkInterfaces", "ec2:DescribeRouteTables"]


def test_subnet_without_its_own_table_is_judged_by_the_vpc_main_table(ec2: Any,
                                                                      make_adapter: AdapterFactory) -> None:
    net = build_sender_network(ec2, own_table=False)
    route = _by_name(check_host_network(make_adapter(), "sender-1", net.instance_id))[ROUTE_CHECK]
    assert route.status == CheckStatus.OK
    assert route.detail == f"{net.route_table_id} (main table of {net.vpc_id}) routes 0.0.0.0/0 to {net.target}"


def test_subnet_behind_a_nat_gateway_fails_naming_the_fix(ec2: Any, make_adapter: AdapterFactory) -> None:
    net = build_sender_network(ec2, Egress.NAT_GATEWAY)
    assert net.target is not None and net.target.startswith("nat-")

    route = _by_name(check_host_network(make_adapter(), "sender-1", net.instance_id))[ROUTE_CHECK]

    assert route.status == CheckStatus.FAILED
    assert route.detail == (f"{net.route_table_id} (subnet {net.subnet_id}) routes 0.0.0.0/0 to NAT gateway "
                            f"{net.target}: every send leaves from the NAT's address, never from a slot's Elastic IP")
    assert route.fix == f"route 0.0.0.0/0 of {net.route_table_id} {NAT_FIX_TAIL}"


def test_subnet_with_no_default_route_fails(ec2: Any, make_adapter: AdapterFactory) -> None:
    net = build_sender_network(ec2, Egress.NOWHERE)
    route = _by_name(check_host_network(make_adapter(), "sender-1", net.instance_id))[ROUTE_CHECK]
    assert route.status == CheckStatus.FAILED
    assert route.detail == (f"{net.route_table_id} (subnet {net.subnet_id}) has no 0.0.0.0/0 route: the host cannot "
                            f"reach the internet")
    assert route.fix.startswith(f"route 0.0.0.0/0 of {net.route_table_id} to an internet gateway")


def test_primary_ip_without_a_public_address_fails_naming_the_fix(ec2: Any, make_adapter: AdapterFactory) -> None:
    net = build_sender_network(ec2, public_ip=False)
    assert net.public_ip is None

    checks = _by_name(check_host_network(make_adapter(), "sender-1", net.instance_id))

    assert checks[ROUTE_CHECK].status == CheckStatus.OK
    public = checks[PUBLIC_ADDRESS_CHECK]
    assert public.status == CheckStatus.FAILED
    assert public.detail == (f"primary private IP {net.primary_private_ip} of {net.eni_id} has no public address: a "
                             f"send that finds no leasable slot falls back to it and cannot reach the internet")
    assert public.fix.startswith(f"associate an Elastic IP with {net.primary_private_ip} on {net.eni_id}")


def test_an_elastic_ip_on_the_primary_ip_passes_and_is_named(ec2: Any, make_adapter: AdapterFactory) -> None:
    net = build_sender_network(ec2, public_ip=False)
    eip = ec2.allocate_address(Domain="vpc")
    ec2.associate_address(AllocationId=eip["AllocationId"], NetworkInterfaceId=net.eni_id,
                          PrivateIpAddress=net.primary_private_ip)

    public = _by_name(check_host_network(make_adapter(), "sender-1", net.instance_id))[PUBLIC_ADDRESS_CHECK]

    assert public.status == CheckStatus.OK
    assert public.detail.endswith(f"has {eip['PublicIp']} (Elastic IP {eip['AllocationId']})")


def _credentials_without(ec2: Any, action: str | None) -> boto3.Session:
    """An IAM user holding the shipped policy, less `action`; a session with its keys (moto enforces IAM)."""
    iam = boto3.client("iam", region_name=REGION)
    try:
        policy = render_policy("sendhost", [REGION])
        for statement in policy["Statement"]:
            if isinstance(statement["Action"], list) and action in statement["Action"]:
                statement["Action"].remove(action)
        iam.create_user(UserName="doctor")
        arn = iam.create_policy(PolicyName="doctor", PolicyDocument=json.dumps(policy))["Policy"]["Arn"]
        iam.attach_user_policy(UserName="doctor", PolicyArn=arn)
        key = iam.create_access_key(UserName="doctor")["AccessKey"]
    finally:
        iam.close()
    return boto3.Session(aws_access_key_id=key["AccessKeyId"], aws_secret_access_key=key["SecretAccessKey"],
                         region_name=REGION)


def _check_with_iam_enforced(ec2: Any, make_adapter: AdapterFactory, net: SenderNetwork,
                             denied: str | None) -> tuple[NetworkCheck, ...]:
    # The four IAM calls that make the user run unauthenticated; every request after them is checked by moto's IAM.
    @set_initial_no_auth_action_count(4)
    def run() -> tuple[NetworkCheck, ...]:
        session = _credentials_without(ec2, denied)
        return check_host_network(make_adapter(session), "sender-1", net.instance_id)

    return run()


def test_the_shipped_policy_lets_every_check_look(ec2: Any, make_adapter: AdapterFactory) -> None:
    net = build_sender_network(ec2)
    checks = _check_with_iam_enforced(ec2, make_adapter, net, denied=None)
    assert [c.status for c in checks] == [CheckStatus.OK, CheckStatus.OK]


def test_a_denied_route_table_read_is_couldnt_check_naming_the_permission(ec2: Any,
                                                                          make_adapter: AdapterFactory) -> None:
    net = build_sender_network(ec2, Egress.NAT_GATEWAY)  # would fail, were it seen: it must not read as ok either

    checks = _by_name(_check_with_iam_enforced(ec2, make_adapter, net, denied="ec2:DescribeRouteTables"))

    route = checks[ROUTE_CHECK]
    assert route.status == CheckStatus.COULDNT_CHECK
    assert route.detail.startswith("could not read ec2:DescribeRouteTables: AWS refused DescribeRouteTables on "
                                   f"subnet {net.subnet_id} (AccessDenied)")
    assert route.fix.startswith("allow ec2:DescribeRouteTables to these credentials (`sendhost iam policy`")
    assert checks[PUBLIC_ADDRESS_CHECK].status == CheckStatus.OK  # what could be read is still judged


def test_a_denied_instance_read_leaves_every_check_unchecked(make_adapter: AdapterFactory,
                                                             stubbed_aws: StubbedAws) -> None:
    stubbed_aws.stub("ec2").add_client_error("describe_instances", **client_error("UnauthorizedOperation"))

    checks = check_host_network(make_adapter(stubbed_aws), "sender-1", "i-0123456789abcdef0")

    assert [(c.name, c.status) for c in checks] == [(ROUTE_CHECK, CheckStatus.COULDNT_CHECK),
                                                    (PUBLIC_ADDRESS_CHECK, CheckStatus.COULDNT_CHECK)]
    assert all("ec2:DescribeInstances" in c.fix for c in checks)
    stubbed_aws.assert_all_answered()


def test_an_aws_outage_is_couldnt_check_not_a_finding(make_adapter: AdapterFactory, stubbed_aws: StubbedAws) -> None:
    ec2 = stubbed_aws.stub("ec2")
    ec2.add_response("describe_instances", {"Reservations": [{"Instances": [{
        "InstanceId": "i-0123456789abcdef0", "NetworkInterfaces": [{
            "NetworkInterfaceId": "eni-01", "SubnetId": "subnet-01", "PrivateIpAddress": "10.0.0.5",
            "Attachment": {"DeviceIndex": 0}}]}]}]})
    ec2.add_response("describe_network_interfaces", {"NetworkInterfaces": [{
        "NetworkInterfaceId": "eni-01", "SubnetId": "subnet-01", "VpcId": "vpc-01", "PrivateIpAddress": "10.0.0.5",
        "PrivateIpAddresses": [{"PrivateIpAddress": "10.0.0.5", "Primary": True,
                                "Association": {"PublicIp": "198.51.100.5", "AllocationId": "eipalloc-01"}}]}]})
    ec2.add_client_error("describe_route_tables", **client_error("InternalError", status=500))

    route, public = check_host_network(make_adapter(stubbed_aws), "sender-1", "i-0123456789abcdef0")

    assert route.status == CheckStatus.COULDNT_CHECK
    assert "(InternalError)" in route.detail
    assert route.fix == "run `sendhost pool doctor` again once AWS answers ec2:DescribeRouteTables"
    assert (public.status, public.detail) == (
        CheckStatus.OK, "primary private IP 10.0.0.5 of eni-01 has 198.51.100.5 (Elastic IP eipalloc-01)")


def test_a_slot_elastic_ip_is_not_credited_to_the_primary_ip(make_adapter: AdapterFactory,
                                                            stubbed_aws: StubbedAws) -> None:
    # AWS lists each private IP's association; a slot's EIP on a secondary IP leaves the primary without one.
    stubbed_aws.stub("ec2").add_response("describe_network_interfaces", {"NetworkInterfaces": [{
        "NetworkInterfaceId": "eni-01", "SubnetId": "subnet-01", "VpcId": "vpc-01", "PrivateIpAddress": "10.0.0.5",
        "PrivateIpAddresses": [
            {"PrivateIpAddress": "10.0.0.5", "Primary": True},
            {"PrivateIpAddress": "10.0.0.6", "Primary": False,
             "Association": {"PublicIp": "198.51.100.6", "AllocationId": "eipalloc-06"}}]}]})

    network = make_adapter(stubbed_aws).describe_interface_network("eni-01")

    assert (network.primary_private_ip, network.public_ip, network.allocation_id) == ("10.0.0.5", None, None)


@pytest.mark.parametrize(("route", "expected"), [
    (Route("0.0.0.0/0", "igw-01", "blackhole"),
     "rtb-01 (subnet subnet-01) routes 0.0.0.0/0 to igw-01 that no longer exists (blackhole): nothing leaves the "
     "subnet"),
    (Route("0.0.0.0/0", "tgw-01", "active"),
     "rtb-01 (subnet subnet-01) routes 0.0.0.0/0 to tgw-01, not an internet gateway: sends leave through it, not "
     "from the slots' Elastic IPs"),
])
def test_other_default_routes_fail(route: Route, expected: str) -> None:
    interface = InterfaceNetwork("eni-01", "subnet-01", "vpc-01", "10.0.0.5")
    check = route_check("sender-1", interface, RouteTable("rtb-01", main=False, routes=(route,)))
    assert (check.status, check.detail) == (CheckStatus.FAILED, expected)
    assert check.fix == f"route 0.0.0.0/0 of rtb-01 {NAT_FIX_TAIL}"
