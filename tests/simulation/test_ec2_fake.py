"""The simulation's EC2 (named fake `SimulatedEc2`, over moto): reverse DNS with AWS's delays and error codes."""

from __future__ import annotations

import random

import boto3
import pytest

from ippool.aws.models import TAG_STATE, pool_tags
from ippool.errors import PtrStillSet
from ippool.states import EipState, PtrStatus
from simulation.ec2_fake import PTR_DELAY_S, PTR_RELEASE_DELAY_S, SimulatedEc2
from tests.support.aws import REGION, CallRecorder, SleepRecorder
from tests.support.clock import FakeClock

pytestmark = pytest.mark.usefixtures("moto_aws")


def test_ptr_is_pending_then_served_and_release_waits_after_its_reset(clock: FakeClock, sleeper: SleepRecorder,
                                                                       aws_calls: CallRecorder) -> None:
    ec2 = SimulatedEc2(lambda: boto3.Session(region_name=REGION), REGION, seed=1, clock=clock, sleep=sleeper,
                       rng=random.Random(0), on_call=aws_calls)
    address = ec2.allocate_address(pool_tags("pool-a", "sender-1", 0, EipState.INCOMING))
    name = "sender-1-0-198-18-0-1.mail.example.com"
    assert ec2.set_reverse_dns(address.allocation_id, name).update_status == PtrStatus.PENDING
    assert ec2.describe_reverse_dns(address.allocation_id).ptr_record is None
    served = ec2.wait_reverse_dns(address.allocation_id, name)  # polls on the clock the fake advances
    assert served.serves(name) and sum(sleeper.waits) >= PTR_DELAY_S
    with pytest.raises(PtrStillSet):
        ec2.release_address(address.allocation_id)  # a PTR is set
    ec2.reset_reverse_dns(address.allocation_id)
    clock.advance(PTR_RELEASE_DELAY_S - 1)
    with pytest.raises(PtrStillSet):
        ec2.release_address(address.allocation_id)  # AWS still holds it for minutes after the reset
    clock.advance(1)
    assert ec2.release_address(address.allocation_id) is True
    ec2.close()


def test_a_describe_asked_again_with_nothing_written_since_is_answered_without_a_request(
        clock: FakeClock, sleeper: SleepRecorder, aws_calls: CallRecorder) -> None:
    ec2 = SimulatedEc2(lambda: boto3.Session(region_name=REGION), REGION, seed=1, clock=clock, sleep=sleeper,
                       rng=random.Random(0), on_call=aws_calls)
    first = ec2.allocate_address(pool_tags("pool-a", "sender-1", 0, EipState.ACTIVE))
    described = ec2.describe_pool_addresses("pool-a")
    assert [a.allocation_id for a in described] == [first.allocation_id]
    assert ec2.describe_pool_addresses("pool-a") == described
    assert aws_calls.count("ec2:DescribeAddresses") == 1  # the second answer is the first's: nothing changed
    assert ec2.describe_pool_addresses("pool-a", host="sender-1") == described  # other filters: asked
    assert aws_calls.count("ec2:DescribeAddresses") == 2
    # every write makes the next describe ask AWS: a tag, an allocation, a release (and its tags gone)
    ec2.create_tags(first.allocation_id, {TAG_STATE: EipState.PARKED})
    assert [a.state for a in ec2.describe_pool_addresses("pool-a")] == [EipState.PARKED]
    second = ec2.allocate_address(pool_tags("pool-a", "sender-1", 1, EipState.ACTIVE))
    assert {a.allocation_id for a in ec2.describe_pool_addresses("pool-a")} == {first.allocation_id,
                                                                                 second.allocation_id}
    assert ec2.release_address(first.allocation_id) is True
    assert [a.allocation_id for a in ec2.describe_pool_addresses("pool-a")] == [second.allocation_id]
    assert aws_calls.count("ec2:DescribeAddresses") == 5
    ec2.close()


def test_a_released_address_tags_are_gone_and_an_instance_type_is_asked_once(
        clock: FakeClock, sleeper: SleepRecorder, aws_calls: CallRecorder) -> None:
    ec2 = SimulatedEc2(lambda: boto3.Session(region_name=REGION), REGION, seed=1, clock=clock, sleep=sleeper,
                       rng=random.Random(0), on_call=aws_calls)
    address = ec2.allocate_address(pool_tags("pool-a", "sender-1", 0, EipState.ACTIVE))
    ec2.create_tags(address.allocation_id, {"extra": "kept until the release"})
    assert ec2.release_address(address.allocation_id) is True
    tags = boto3.client("ec2", region_name=REGION).describe_tags(
        Filters=[{"Name": "resource-id", "Values": [address.allocation_id]}])["Tags"]
    assert tags == []  # as in AWS: a released address keeps no tags
    assert ec2.max_private_ips_per_interface("c5.large") == ec2.max_private_ips_per_interface("c5.large") > 1
    assert aws_calls.count("ec2:DescribeInstanceTypes") == 1
    ec2.close()
