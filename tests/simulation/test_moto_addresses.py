"""The simulation's DescribeAddresses rendering gives moto's own body, byte for byte, through a run of allocations,
tags, associations and releases; it reuses an address's XML only while the address is unchanged; moto's method is
back after the run."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import boto3
import moto.core.responses as responses
import pytest
from moto import mock_aws
from moto.ec2.responses.elastic_ip_addresses import ElasticIPAddresses

from simulation import moto_addresses
from simulation.moto_addresses import cached_address_rendering

REGION = "us-east-1"


@pytest.fixture
def client() -> Iterator[Any]:
    with mock_aws():
        yield boto3.client("ec2", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")


def _bodies(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every DescribeAddresses body moto sends back, in order (recorded where the request is answered)."""
    bodies: list[str] = []
    serialized = responses.BaseResponse.serialized

    def recording(self: Any, action_result: Any) -> Any:
        answer = serialized(self, action_result)
        if self._get_action() == "DescribeAddresses":
            bodies.append(str(answer[2]))
        return answer

    monkeypatch.setattr(responses.BaseResponse, "serialized", recording)
    return bodies


def _world(client: Any) -> tuple[str, list[str]]:
    vpc = client.create_vpc(CidrBlock="10.30.0.0/16")["Vpc"]["VpcId"]
    subnet = client.create_subnet(VpcId=vpc, CidrBlock="10.30.1.0/24")["Subnet"]["SubnetId"]
    instance = client.run_instances(ImageId="ami-12345678", MinCount=1, MaxCount=1, SubnetId=subnet,
                                    PrivateIpAddress="10.30.1.10")["Instances"][0]
    eni = instance["NetworkInterfaces"][0]["NetworkInterfaceId"]
    client.assign_private_ip_addresses(NetworkInterfaceId=eni, PrivateIpAddresses=["10.30.1.11", "10.30.1.12"])
    return eni, [instance["InstanceId"]]


def _describes(client: Any) -> None:
    """The reads the pool and the simulation make: the whole pool, one host, one state, one address, all."""
    client.describe_addresses(Filters=[{"Name": "tag:sendhost:pool", "Values": ["p"]}])
    client.describe_addresses(Filters=[{"Name": "tag:sendhost:pool", "Values": ["p"]},
                                       {"Name": "tag:sendhost:host", "Values": ["h1"]}])
    client.describe_addresses(Filters=[{"Name": "tag:sendhost:state", "Values": ["parked"]}])
    client.describe_addresses()


def _scenario(client: Any) -> None:
    """Addresses through their life, each change followed by the reads, twice over (the second time from cache)."""
    eni, (instance,) = _world(client)
    _describes(client)  # no address at all
    ids = []
    for number in range(5):
        tags = [{"Key": "sendhost:pool", "Value": "p"}, {"Key": "sendhost:host", "Value": f"h{number % 2}"},
                {"Key": "sendhost:slot", "Value": str(number)}, {"Key": "sendhost:state", "Value": "incoming"}]
        if number == 3:
            tags.append({"Key": "note", "Value": "<&>\"' quoted"})  # text the XML must escape
        ids.append(client.allocate_address(Domain="vpc", TagSpecifications=[
            {"ResourceType": "elastic-ip", "Tags": tags}])["AllocationId"])
        _describes(client)
        _describes(client)
    untagged = client.allocate_address(Domain="vpc")["AllocationId"]
    association = client.associate_address(AllocationId=ids[0], NetworkInterfaceId=eni,
                                           PrivateIpAddress="10.30.1.11")["AssociationId"]
    _describes(client)
    client.associate_address(AllocationId=ids[1], InstanceId=instance)
    client.create_tags(Resources=[ids[0]], Tags=[{"Key": "sendhost:state", "Value": "active"}])
    _describes(client)
    client.create_tags(Resources=[ids[2]], Tags=[{"Key": "sendhost:state", "Value": "parked"},
                                                 {"Key": "sendhost:parked-until", "Value": "1700000000"}])
    _describes(client)
    client.delete_tags(Resources=[ids[2]], Tags=[{"Key": "sendhost:parked-until"}])
    client.disassociate_address(AssociationId=association)
    _describes(client)
    client.release_address(AllocationId=ids[4])
    client.release_address(AllocationId=untagged)
    _describes(client)
    _describes(client)
    client.describe_addresses(AllocationIds=[ids[3]])


def test_bodies_are_moto_own_through_a_run(monkeypatch: pytest.MonkeyPatch) -> None:
    bodies = _bodies(monkeypatch)
    with mock_aws():
        _scenario(boto3.client("ec2", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x"))
    expected = list(bodies)
    bodies.clear()
    with mock_aws(), cached_address_rendering():
        _scenario(boto3.client("ec2", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x"))
    got = list(bodies)
    assert len(got) == len(expected) > 30
    # moto's ids are random per world: compare with each world's ids replaced by their order of appearance
    assert _numbered(got) == _numbered(expected)
    assert any("&lt;&amp;&gt;" in body for body in got) and any("<associationId>" in body for body in got)


def _numbered(bodies: list[str]) -> list[str]:
    seen: dict[str, str] = {}
    pattern = re.compile(r"\b(eipalloc|eipassoc|eni|i|vpc|subnet)-[0-9a-f]{8,}\b|\b\d+\.\d+\.\d+\.\d+\b")
    return [pattern.sub(lambda m: seen.setdefault(m.group(0), f"id-{len(seen)}"), body) for body in bodies]


def test_an_unchanged_address_is_rendered_once(client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    rendered: list[int] = []
    execute = responses.ActionResult.execute_result

    def counting(self: Any, context: Any) -> Any:
        if isinstance(self.result, dict) and "Addresses" in self.result:
            rendered.append(len(self.result["Addresses"]))
        return execute(self, context)

    monkeypatch.setattr(responses.ActionResult, "execute_result", counting)
    with cached_address_rendering():
        ids = [client.allocate_address(Domain="vpc")["AllocationId"] for _ in range(3)]
        rendered.clear()
        for _ in range(4):
            assert len(client.describe_addresses()["Addresses"]) == 3
        assert rendered == [1, 1, 1]  # each address once, by moto, as an answer of its own
        rendered.clear()
        client.create_tags(Resources=[ids[1]], Tags=[{"Key": "k", "Value": "v"}])
        found = {a["AllocationId"]: a for a in client.describe_addresses()["Addresses"]}
        assert found[ids[1]]["Tags"] == [{"Key": "k", "Value": "v"}] and not found[ids[0]].get("Tags")
        assert rendered == [1]  # the retagged address alone
        rendered.clear()
        assert client.describe_addresses(Filters=[{"Name": "tag:k", "Values": ["none"]}])["Addresses"] == []
        assert rendered == [0]  # an empty answer: moto's own


def test_an_address_holding_what_it_does_not_know_is_rendered_by_moto() -> None:
    class Other:
        pass

    class Address:
        def __init__(self) -> None:
            self.ec2_backend = type("Backend", (), {"tags": {}})()
            self.id = "eipalloc-1"
            self.extra = Other()

    assert moto_addresses._state_of(Address()) is None


def test_moto_method_is_back_after() -> None:
    original = ElasticIPAddresses.describe_addresses
    with cached_address_rendering():
        assert ElasticIPAddresses.describe_addresses is not original
    assert ElasticIPAddresses.describe_addresses is original
