"""Creating a host's pool (`pool create`) against moto's EC2 and a real Redis."""

from __future__ import annotations

import dataclasses

import boto3
import pytest

from ippool.errors import PoolConfigError, SlotLimitExceeded, UnknownInstance
from ippool.states import EipState
from sendhost.model import PoolPolicy, SenderHost
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
    spec = SenderHost(name="ghost", instance_id="i-0123456789abcdef0", region=REGION, primary_ip="10.0.0.1",
                      pool=PoolPolicy(slots=1))
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


# --- the inventory's private_ips: slot n gets exactly private_ips[n], or nothing is assigned or allocated -----------

def _untouched(world: World, spec: SenderHost) -> None:
    """Nothing allocated, no private IP assigned, nothing registered in Redis."""
    assert world.aws.describe_pool_addresses("sendhost") == []
    assert world.aws.describe_instance(spec.instance_id).primary_interface.secondary_private_ips == ()
    assert spec.name not in world.pool.slots.hosts()


def test_create_assigns_exactly_the_inventorys_private_ips_slot_by_slot(world: World) -> None:
    spec = world.add_host(slots=2, private_ips=("10.20.1.77", "10.20.1.41"))  # not sorted: slot order is kept
    records = world.lifecycle().create(spec, 2)
    assert [(r.slot, r.private_ip) for r in records] == [(0, "10.20.1.77"), (1, "10.20.1.41")]
    eni = world.aws.describe_instance(spec.instance_id).primary_interface
    assert sorted(eni.secondary_private_ips) == ["10.20.1.41", "10.20.1.77"]
    assert [(s.slot, s.private_ip) for s in world.pool.status("sender-1")[0].slots] == [
        (0, "10.20.1.77"), (1, "10.20.1.41")]
    again = world.lifecycle().create(spec, 2)
    assert [(r.private_ip, r.action) for r in again] == [("10.20.1.77", "kept"), ("10.20.1.41", "kept")]


def test_create_takes_an_inventory_ip_already_on_the_interface_without_assigning_it_again(world: World,
                                                                                        aws_calls) -> None:
    spec = world.add_host(slots=2, private_ips=("10.20.1.40", "10.20.1.41"))
    eni = world.aws.describe_instance(spec.instance_id).primary_interface.eni_id
    world.aws.assign_private_ips(eni, ["10.20.1.40"])
    start = len(aws_calls.calls)
    world.lifecycle().create(spec, 2)
    assert aws_calls.calls[start:].count("ec2:AssignPrivateIpAddresses") == 1
    assert sorted(world.aws.describe_network_interface(eni).secondary_private_ips) == ["10.20.1.40", "10.20.1.41"]


@pytest.mark.parametrize(("private_ips", "message"), [
    (("10.20.1.40", "10.9.0.5"),
     r"^sender-1\.sendhost_pool\.private_ips: 10\.9\.0\.5 is outside subnet 10\.20\.1\.0/24 of sender-1's interface "
     r"eni-\w+: list addresses inside 10\.20\.1\.0/24$"),
    (("10.20.1.2", "10.20.1.40"),
     r"^sender-1\.sendhost_pool\.private_ips: 10\.20\.1\.2 is reserved by AWS in subnet 10\.20\.1\.0/24"),
    (("10.20.1.40",), r"^sender-1\.sendhost_pool\.private_ips: lists 1 addresses for 2 slots: add the missing slot "
                      r"addresses to sender-1\.sendhost_pool\.private_ips or create fewer slots \(--slots 1\)$"),
])
def test_create_refuses_inventory_ips_it_cannot_use_before_changing_anything(
        world: World, private_ips: tuple[str, ...], message: str) -> None:
    spec = world.add_host(slots=2, private_ips=private_ips)
    with pytest.raises(PoolConfigError, match=message):
        world.lifecycle().create(spec, 2)
    _untouched(world, spec)


def test_create_refuses_the_primary_ip_as_a_slot_address(world: World) -> None:
    spec = world.add_host(slots=1)
    primary = world.aws.describe_instance(spec.instance_id).primary_interface.primary_private_ip
    spec = dataclasses.replace(spec, pool=dataclasses.replace(spec.pool, private_ips=(primary,)))
    with pytest.raises(PoolConfigError, match=rf"private_ips: {primary} is sender-1's primary private IP: list "):
        world.lifecycle().create(spec, 1)
    _untouched(world, spec)


def test_create_refuses_an_inventory_ip_another_interface_holds(world: World) -> None:
    spec = world.add_host(slots=2, private_ips=("10.20.1.40", "10.20.1.50"))
    subnet = world.aws.describe_instance(spec.instance_id).primary_interface.subnet_id
    ec2 = boto3.client("ec2", region_name=REGION)
    other = ec2.create_network_interface(SubnetId=subnet, PrivateIpAddress="10.20.1.50")
    ec2.close()
    holder = other["NetworkInterface"]["NetworkInterfaceId"]
    with pytest.raises(PoolConfigError, match=rf"^sender-1\.sendhost_pool\.private_ips: 10\.20\.1\.50 is already "
                                              rf"assigned to network interface {holder}: list a free address$"):
        world.lifecycle().create(spec, 2)
    _untouched(world, spec)


def test_create_refuses_an_inventory_ip_holding_someone_elses_eip(world: World) -> None:
    aws = world.gaps()  # reports the private IP each EIP is associated to, as AWS does
    spec = world.add_host(slots=1, private_ips=("10.20.1.40",))
    eni = aws.describe_instance(spec.instance_id).primary_interface.eni_id
    aws.assign_private_ips(eni, ["10.20.1.40"])
    ec2 = boto3.client("ec2", region_name=REGION)
    stranger = ec2.allocate_address(Domain="vpc")
    ec2.close()
    aws.associate_address(stranger["AllocationId"], eni, "10.20.1.40")
    with pytest.raises(PoolConfigError, match=rf"private_ips: 10\.20\.1\.40 already holds Elastic IP "
                                              rf"{stranger['PublicIp']} \({stranger['AllocationId']}\), which is "
                                              "not this pool's: list a free address, or release that Elastic IP"):
        world.lifecycle(aws=aws).create(spec, 1)
    assert aws.describe_pool_addresses("sendhost") == []
    assert spec.name not in world.pool.slots.hosts()


def test_create_refuses_inventory_ips_that_contradict_a_slot_already_in_service(world: World) -> None:
    spec = world.add_host(slots=1)
    [record] = world.lifecycle().create(spec, 1)  # AWS picked the address: no private_ips then
    moved = dataclasses.replace(spec, pool=dataclasses.replace(spec.pool, private_ips=("10.20.1.99",)))
    with pytest.raises(PoolConfigError, match=rf"private_ips: slot 0 already serves from {record.private_ip}, not "
                                              rf"10\.20\.1\.99: list {record.private_ip} as slot 0's address, or run "
                                              "`sendhost pool destroy sender-1` first"):
        world.lifecycle().create(moved, 1)
    eni = world.aws.describe_instance(spec.instance_id).primary_interface
    assert eni.secondary_private_ips == (record.private_ip,)
