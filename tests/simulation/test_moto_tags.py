"""The simulation's indexed tag lookup answers what moto's own get_tags answers, for every kind of resource the
simulation tags, and moto's method is back after the run."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.ec2.models.core import TaggedEC2Resource

from simulation.moto_tags import indexed_tags

REGION = "us-east-1"


@pytest.fixture
def client() -> Iterator[Any]:
    with mock_aws():
        yield boto3.client("ec2", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")


def _resources() -> list[TaggedEC2Resource]:
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.ec2.models import ec2_backends

    backend = ec2_backends[DEFAULT_ACCOUNT_ID][REGION]
    return [*backend.addresses, *(i for r in backend.reservations.values() for i in r.instances),
            *backend.vpcs.values(), *(s for zone in backend.subnets.values() for s in zone.values())]


def test_every_resource_gets_the_tags_moto_itself_gives(client: Any) -> None:
    original = TaggedEC2Resource.get_tags
    vpc = client.create_vpc(CidrBlock="10.20.0.0/16")["Vpc"]["VpcId"]
    subnet = client.create_subnet(VpcId=vpc, CidrBlock="10.20.1.0/24")["Subnet"]["SubnetId"]
    client.run_instances(ImageId="ami-12345678", MinCount=1, MaxCount=1, SubnetId=subnet,
                         TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": "Name", "Value": "h1"}]}])
    ids = [client.allocate_address(Domain="vpc")["AllocationId"] for _ in range(12)]
    for number, allocation in enumerate(ids):
        # prefixes of one another's values and keys, a key set twice, and one address left untagged
        if number != 5:
            client.create_tags(Resources=[allocation], Tags=[
                {"Key": "sendhost:pool", "Value": "pool"}, {"Key": "sendhost:host", "Value": f"h{number % 3}"},
                {"Key": "sendhost:slot", "Value": str(number)}, {"Key": "sendhost:state", "Value": "incoming"}])
            client.create_tags(Resources=[allocation], Tags=[{"Key": "sendhost:state", "Value": "active"}])
    client.create_tags(Resources=[vpc, subnet], Tags=[{"Key": "Name", "Value": "net"}])
    resources = _resources()
    expected = [TaggedEC2Resource.get_tags(r) for r in resources]
    assert any(expected) and [] in expected  # tagged and untagged alike
    with indexed_tags():
        assert [r.get_tags() for r in resources] == expected
        # what a filtered describe answers goes through it, and is moto's answer
        found = client.describe_addresses(Filters=[{"Name": "tag:sendhost:host", "Values": ["h1"]}])["Addresses"]
        assert sorted(a["AllocationId"] for a in found) == sorted(ids[n] for n in range(12) if n % 3 == 1)
    assert TaggedEC2Resource.get_tags is original
