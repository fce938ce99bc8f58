"""Creating a host's pool (`pool create`) against moto's EC2 and a real Redis."""

from __future__ import annotations

import boto3
import pytest

from ippool.errors import SlotLimitExceeded, UnknownInstance
from ippool.spec import HostSpec
from ippool.states import EipState
from tests.support.aws import REGION
from tests.support.ippool_world import World


def test_create_gives_each_slot_a_tagged_associated_eip_and_registers_it(world: World) -> None:
    spec = world.add_host(slots=3)
    records = world.lifecycle().create(spec, 3)
    assert [r.action for r in records] == ["created"] * 3
    ours = world.aws.describe_pool_addresses("sendhost", host="sender-1")
    assert sorted((a.slot, a.state, a.associated) for a in ours) == [(n, EipState.ACTIVE, True) for n in range(3)]
    slots = world.pool.status("sender-1")[0].slots
    assert [(s.state, s.public_ip) for s in slots] == [("active", r.public_ip) for r in records]
    assert len({s.private_ip for s in slots}) == 3


def test_create_twice_changes_nothing(world: World, aws_calls) -> None:
    spec = world.add_host(slots=2)
    first = world.lifecycle().create(spec, 2)
    before = world.pool.status("sender-1")[0]
    calls_before = len(aws_calls.calls)
    second = world.lifecycle().create(spec, 2)
    mutating = [c for c in aws_calls.calls[calls_before:] if not c.startswith(("ec2:Describe", "route53:List"))]
    assert mutating == []
    assert [r.action for r in second] == ["kept", "kept"]
    assert [(r.public_ip, r.private_ip) for r in second] == [(r.public_ip, r.private_ip) for r in first]
    assert world.pool.status("sender-1")[0] == before
    assert len(world.aws.describe_pool_addresses("sendhost", host="sender-1")) == 2


def test_create_refuses_more_slots_than_the_instance_type_allows(world: World) -> None:
    spec = world.add_host(slots=30, instance_type="t3.micro")  # 2 private IPs per interface: 1 secondary
    with pytest.raises(SlotLimitExceeded, match=r"--slots 30 is more than instance type t3.micro allows \(1 "):
        world.lifecycle().create(spec, 30)
    assert world.aws.describe_pool_addresses("sendhost") == []


def test_create_on_an_unknown_instance_is_a_config_error(world: World) -> None:
    spec = HostSpec(name="ghost", instance_id="i-0123456789abcdef0", primary_ip="10.0.0.1", slots=1)
    with pytest.raises(UnknownInstance, match="i-0123456789abcdef0 does not exist"):
        world.lifecycle().create(spec, 1)


def test_create_never_takes_a_secondary_ip_holding_someone_elses_eip(world: World) -> None:
    aws = world.gaps()  # reports the private IP each EIP is associated to, as AWS does
    spec = world.add_host(slots=1)
    eni = aws.describe_instance(spec.instance_id).primary_interface.eni_id
    [occupied] = aws.assign_secondary_private_ips(eni, 1).secondary_private_ips
    ec2 = boto3.client("ec2", region_name=REGION)
    stranger = ec2.allocate_address(Domain="vpc")["AllocationId"]  # not tagged as this pool's
    ec2.close()
    aws.associate_address(stranger, eni, occupied)
    [record] = world.lifecycle(aws=aws).create(spec, 1)
    assert record.private_ip != occupied
    held = aws.get_address(stranger)
    assert held is not None and held.associated and held.pool is None
