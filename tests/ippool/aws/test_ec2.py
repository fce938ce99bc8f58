"""The adapter against moto's in-process EC2 and Route 53: the calls moto implements, end to end."""

from __future__ import annotations

import boto3
import pytest

from ippool import errors
from ippool.aws.models import (
    TAG_PARKED_UNTIL,
    format_parked_until,
    pool_tags,
)
from ippool.states import EipState
from tests.support.aws import REGION, AdapterFactory, CallRecorder, create_host
from tests.support.clock import FakeClock

pytestmark = pytest.mark.usefixtures("moto_aws")


def test_describe_instance_returns_type_and_primary_interface(make_adapter: AdapterFactory) -> None:
    instance_id, eni_id = create_host("c5.large")
    instance = make_adapter().describe_instance(instance_id)
    assert instance.instance_id == instance_id
    assert instance.instance_type == "c5.large"
    assert instance.primary_interface.eni_id == eni_id
    assert instance.primary_interface.primary_private_ip.startswith("10.20.1.")
    assert instance.primary_interface.secondary_private_ips == ()


def test_unknown_instance_is_a_config_error_naming_it(make_adapter: AdapterFactory) -> None:
    with pytest.raises(errors.UnknownInstance) as caught:
        make_adapter().describe_instance("i-0123456789abcdef0")
    assert "i-0123456789abcdef0" in str(caught.value)
    assert caught.value.exit_code == 2


def test_max_private_ips_per_interface_reads_the_instance_type(make_adapter: AdapterFactory) -> None:
    adapter = make_adapter()
    ec2 = boto3.client("ec2", region_name=REGION)
    expected = ec2.describe_instance_types(InstanceTypes=["t3.micro"])["InstanceTypes"][0]
    ec2.close()
    assert adapter.max_private_ips_per_interface("t3.micro") == expected["NetworkInfo"]["Ipv4AddressesPerInterface"]
    assert adapter.max_private_ips_per_interface("c5.large") > adapter.max_private_ips_per_interface("t3.micro")


def test_assign_then_unassign_secondary_private_ips(make_adapter: AdapterFactory) -> None:
    instance_id, eni_id = create_host()
    adapter = make_adapter()
    interface = adapter.assign_secondary_private_ips(eni_id, 3)
    assert len(interface.secondary_private_ips) == 3
    assert interface.primary_private_ip not in interface.secondary_private_ips
    adapter.unassign_secondary_private_ips(eni_id, interface.secondary_private_ips[:1])
    after = adapter.describe_instance(instance_id).primary_interface
    assert after.secondary_private_ips == interface.secondary_private_ips[1:]


def test_allocate_tags_in_the_same_call_and_describe_filters_by_tag(make_adapter: AdapterFactory) -> None:
    adapter = make_adapter()
    first = adapter.allocate_address(pool_tags("pool-a", "sender-1", 0, EipState.INCOMING))
    second = adapter.allocate_address(pool_tags("pool-a", "sender-1", 1, EipState.ACTIVE))
    adapter.allocate_address(pool_tags("pool-b", "sender-2", 0, EipState.ACTIVE))

    found = adapter.describe_pool_addresses("pool-a")
    assert {a.allocation_id for a in found} == {first.allocation_id, second.allocation_id}
    assert adapter.describe_pool_addresses("pool-a", slot=1) == [second]
    assert adapter.describe_pool_addresses("pool-a", states=[EipState.INCOMING]) == [first]
    (only,) = adapter.describe_pool_addresses("pool-a", host="sender-1", slot=0)
    assert (only.pool, only.host, only.slot, only.state) == ("pool-a", "sender-1", 0, EipState.INCOMING)
    assert adapter.count_region_addresses() == 3


def test_allocate_refuses_an_untagged_address(make_adapter: AdapterFactory, aws_calls: CallRecorder) -> None:
    with pytest.raises(ValueError, match="sendhost:pool"):
        make_adapter().allocate_address({"Name": "stray"})
    assert aws_calls.calls == []


def test_allocate_with_an_explicit_address_gets_that_address(make_adapter: AdapterFactory) -> None:
    # moto honours AllocateAddress's Address parameter: the EC2 stand-in relies on it.
    address = make_adapter().allocate_address(pool_tags("p", "h", 0, EipState.INCOMING), address="198.18.7.7")
    assert address.public_ip == "198.18.7.7"


def test_associate_attaches_to_the_interface(make_adapter: AdapterFactory) -> None:
    _, eni_id = create_host()
    adapter = make_adapter()
    interface = adapter.assign_secondary_private_ips(eni_id, 1)
    address = adapter.allocate_address(pool_tags("p", "h", 0, EipState.INCOMING))
    association_id = adapter.associate_address(address.allocation_id, eni_id, interface.secondary_private_ips[0])
    seen = adapter.get_address(address.allocation_id)
    assert seen is not None
    assert seen.association_id == association_id
    assert seen.network_interface_id == eni_id
    assert seen.associated


def test_associate_never_moves_an_address_that_is_associated_elsewhere(make_adapter: AdapterFactory) -> None:
    # AllowReassociation=False: an EIP already serving somewhere is refused, never silently taken away from there.
    _, eni_a = create_host()
    _, eni_b = create_host()
    adapter = make_adapter()
    ip_a = adapter.assign_secondary_private_ips(eni_a, 1).secondary_private_ips[0]
    ip_b = adapter.assign_secondary_private_ips(eni_b, 1).secondary_private_ips[0]
    address = adapter.allocate_address(pool_tags("p", "h", 0, EipState.ACTIVE))
    adapter.associate_address(address.allocation_id, eni_a, ip_a)
    with pytest.raises(errors.AddressAlreadyAssociated, match=r"Resource\.AlreadyAssociated"):
        adapter.associate_address(address.allocation_id, eni_b, ip_b)
    seen = adapter.get_address(address.allocation_id)
    assert seen is not None and seen.network_interface_id == eni_a


def test_park_tags_round_trip(make_adapter: AdapterFactory, clock: FakeClock) -> None:
    adapter = make_adapter()
    address = adapter.allocate_address(pool_tags("p", "h", 2, EipState.ACTIVE))
    parked_until = clock() + 900
    adapter.create_tags(address.allocation_id, pool_tags("p", "h", 2, EipState.PARKED, parked_until=parked_until))
    (parked,) = adapter.describe_pool_addresses("p", states=[EipState.PARKED])
    assert parked.parked_until == float(int(parked_until))
    assert parked.state == EipState.PARKED and parked.tags[TAG_PARKED_UNTIL] == format_parked_until(parked_until)


def test_release_is_done_once_and_then_reports_already_gone(make_adapter: AdapterFactory) -> None:
    # InvalidAllocationID.NotFound from a real (moto) release: the second release is "already done".
    adapter = make_adapter()
    address = adapter.allocate_address(pool_tags("p", "h", 0, EipState.PARKED))
    assert adapter.release_address(address.allocation_id) is True
    assert adapter.release_address(address.allocation_id) is False
    assert adapter.get_address(address.allocation_id) is None


def test_associating_a_released_address_raises_address_gone(make_adapter: AdapterFactory) -> None:
    _, eni_id = create_host()
    adapter = make_adapter()
    private_ip = adapter.assign_secondary_private_ips(eni_id, 1).secondary_private_ips[0]
    address = adapter.allocate_address(pool_tags("p", "h", 0, EipState.INCOMING))
    adapter.release_address(address.allocation_id)
    with pytest.raises(errors.AddressGone, match=r"InvalidAllocationID\.NotFound"):
        adapter.associate_address(address.allocation_id, eni_id, private_ip)


def test_disassociate_twice_reports_already_gone(make_adapter: AdapterFactory) -> None:
    # InvalidAssociationID.NotFound (the branch cloud-custodian once misspelled and never ran).
    _, eni_id = create_host()
    adapter = make_adapter()
    private_ip = adapter.assign_secondary_private_ips(eni_id, 1).secondary_private_ips[0]
    address = adapter.allocate_address(pool_tags("p", "h", 0, EipState.ACTIVE))
    association_id = adapter.associate_address(address.allocation_id, eni_id, private_ip)
    assert adapter.disassociate_address(association_id) is True
    assert adapter.disassociate_address(association_id) is False
    seen = adapter.get_address(address.allocation_id)
    assert seen is not None and not seen.associated
