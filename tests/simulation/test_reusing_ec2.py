"""The EC2 stand-in (named fake) that hands released addresses straight back, running over moto's real EC2."""

from __future__ import annotations

import ipaddress
import random
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest

from ippool.aws.models import pool_tags
from ippool.states import EipState
from simulation.reusing_ec2 import ReusingEc2StandIn
from tests.support.aws import REGION, CallRecorder, SleepRecorder
from tests.support.clock import FakeClock

pytestmark = pytest.mark.usefixtures("moto_aws")

StandInFactory = Callable[..., ReusingEc2StandIn]
TAGS = pool_tags("pool-a", "sender-1", 0, EipState.INCOMING)


@pytest.fixture
def make_standin(clock: FakeClock, sleeper: SleepRecorder, aws_calls: CallRecorder) -> Iterator[StandInFactory]:
    made: list[ReusingEc2StandIn] = []

    def build(seed: int = 1, **kwargs: Any) -> ReusingEc2StandIn:
        standin = ReusingEc2StandIn(lambda: boto3.Session(region_name=REGION), REGION, seed=seed, clock=clock,
                                    sleep=sleeper, rng=random.Random(0), on_call=aws_calls, **kwargs)
        made.append(standin)
        return standin

    yield build
    for standin in made:
        standin.close()


def _redraw(standin: ReusingEc2StandIn, times: int) -> list[str]:
    """Allocate and release at once, `times` times (a rotator without parking); return the addresses got."""
    got = []
    for _ in range(times):
        address = standin.allocate_address(TAGS)
        got.append(address.public_ip)
        standin.release_address(address.allocation_id)
    return got


def test_released_address_is_handed_straight_back(make_standin: StandInFactory) -> None:
    standin = make_standin()
    first = standin.allocate_address(TAGS)
    standin.release_address(first.allocation_id)
    again = standin.allocate_address(TAGS)
    assert again.public_ip == first.public_ip  # seed 1 draws a reuse here; probability 0.99
    assert again.allocation_id != first.allocation_id


def test_redraws_without_parking_see_few_distinct_addresses(make_standin: StandInFactory) -> None:
    # The staging observation the model reproduces: 498 redraws, a handful of distinct IPs.
    standin = make_standin()
    got = _redraw(standin, 498)
    assert len(set(got)) <= 12
    assert standin.handed_back / 498 > 0.95


def test_an_allocated_address_is_never_handed_out_again(make_standin: StandInFactory) -> None:
    standin = make_standin()
    first = standin.allocate_address(TAGS)
    standin.release_address(first.allocation_id)
    held = [standin.allocate_address(TAGS) for _ in range(20)]  # all kept (active or parked): none released
    ips = [a.public_ip for a in held]
    assert len(set(ips)) == 20
    assert ips.count(first.public_ip) == 1


def test_holding_the_recently_released_addresses_forces_fresh_ones(make_standin: StandInFactory) -> None:
    # What parking exploits: once every recently released address is allocated again (parked by the rotator),
    # AWS has nothing recent to hand back and every further allocation is a never-seen address.
    standin = make_standin(recent=4)
    retired = [standin.allocate_address(TAGS) for _ in range(4)]
    for address in retired:
        standin.release_address(address.allocation_id)
    came_back = [standin.allocate_address(TAGS) for _ in range(4)]  # parked again, not released
    assert {a.public_ip for a in came_back} == {a.public_ip for a in retired}
    seen = set(standin.ever_allocated)
    later = [standin.allocate_address(TAGS).public_ip for _ in range(10)]
    assert not seen & set(later)
    assert len(set(later)) == 10


def test_same_seed_same_addresses_other_seed_other_addresses(make_standin: StandInFactory) -> None:
    first = _redraw(make_standin(seed=5), 30)
    # A second stand-in in the same moto account: its allocations are not the first one's.
    second = _redraw(make_standin(seed=5), 30)
    third = _redraw(make_standin(seed=6), 30)
    assert first == second
    assert first != third


def test_fresh_addresses_come_from_the_benchmarking_range(make_standin: StandInFactory) -> None:
    standin = make_standin(reuse_probability=0.0)
    got = _redraw(standin, 50)
    assert len(set(got)) == 50
    assert all(ipaddress.ip_address(ip) in ipaddress.ip_network("198.18.0.0/15") for ip in got)


def test_standin_addresses_are_real_moto_eips_with_tags(make_standin: StandInFactory) -> None:
    standin = make_standin()
    active = standin.allocate_address(pool_tags("pool-a", "sender-1", 0, EipState.ACTIVE))
    parked = standin.allocate_address(pool_tags("pool-a", "sender-1", 1, EipState.PARKED, parked_until=0))
    described = standin.describe_pool_addresses("pool-a", host="sender-1")
    assert {(a.public_ip, a.slot, a.state) for a in described} == {
        (active.public_ip, 0, EipState.ACTIVE), (parked.public_ip, 1, EipState.PARKED)}


def test_releasing_an_already_released_address_changes_nothing(make_standin: StandInFactory) -> None:
    standin = make_standin()
    address = standin.allocate_address(TAGS)
    assert standin.release_address(address.allocation_id) is True
    before = standin.recently_released
    assert standin.release_address(address.allocation_id) is False
    assert standin.recently_released == before


def test_model_parameters_are_checked() -> None:
    with pytest.raises(ValueError):
        ReusingEc2StandIn(lambda: boto3.Session(region_name=REGION), REGION, seed=1, reuse_probability=1.5)


def test_a_released_address_takes_its_tags_with_it(make_standin: StandInFactory) -> None:
    """As in AWS; moto keeps them, and its DescribeAddresses reads every tag it ever held for each address."""
    standin = make_standin()
    kept = standin.allocate_address(TAGS)
    gone = standin.allocate_address(TAGS)
    standin.create_tags(gone.allocation_id, {"sendhost:ptr": "mail1.example.com"})
    standin.release_address(gone.allocation_id)
    ec2 = boto3.client("ec2", region_name=REGION)
    tagged = {t["ResourceId"] for t in ec2.describe_tags()["Tags"] if t["ResourceId"].startswith("eipalloc-")}
    assert tagged == {kept.allocation_id}
