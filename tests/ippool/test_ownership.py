"""Redis is not an authority over AWS: two deployments (pools `alpha` and `beta`) in one moto account, each with
its own Redis database. Whatever a sender host writes into alpha's slot hashes, alpha's rotator, reaper and
reconcile never touch beta's addresses, nor point an EIP at a host's primary private IP."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

import pytest
import redis

from ippool.assembly import PoolMachinery, build_machinery
from ippool.aws.adapter import Ec2Adapter
from ippool.aws.models import pool_tags
from ippool.errors import AddressNotOurs
from ippool.keys import HostKeys
from ippool.operator_actions import rotate_now
from ippool.reconcile import DifferenceKind
from ippool.states import EipState, SlotState
from sendhost.model import PoolPolicy, SenderHost
from tests.support.aws import REGION, AdapterFactory, create_host
from tests.support.clock import FakeClock
from tests.support.ippool_world import World


@dataclass
class Deployment:
    machinery: PoolMachinery
    spec: SenderHost
    client: redis.Redis

    @property
    def host(self) -> str:
        return self.spec.name

    def slot_hash(self, slot: int) -> str:
        return HostKeys(self.host).slot(slot)


def deploy(aws: Ec2Adapter, redis_url: str, db: int, pool_name: str, host: str, clock: FakeClock) -> Deployment:
    client = redis.Redis.from_url(urlsplit(redis_url)._replace(path=f"/{db}").geturl(), decode_responses=True)
    instance_id, _eni = create_host()
    spec = SenderHost(name=host, instance_id=instance_id, region=REGION, primary_ip="10.20.1.250",
                      pool=PoolPolicy(slots=1, park_minutes=0))
    machinery = build_machinery(client, aws, {host: spec}, clock, pool_name, store_clock=clock,
                                rng=random.Random(7))
    machinery.lifecycle().create(spec, 1)
    return Deployment(machinery, spec, client)


@pytest.fixture
def alpha_beta(moto_aws: None, redis_url: str, clock: FakeClock,
               make_adapter: AdapterFactory) -> Iterator[tuple[Deployment, Deployment]]:
    aws = make_adapter()
    alpha = deploy(aws, redis_url, 0, "alpha", "sender-a", clock)
    beta = deploy(aws, redis_url, 1, "beta", "sender-b", clock)
    yield alpha, beta
    alpha.client.close()
    beta.client.close()


def serving_address(deployment: Deployment) -> tuple[str, str]:
    held = deployment.machinery.slots.slot_status(deployment.host, 0)
    assert held.allocation_id and held.public_ip
    return held.allocation_id, held.public_ip


def assert_untouched(aws: Ec2Adapter, beta: Deployment, allocation_id: str) -> None:
    address = aws.get_address(allocation_id)
    assert address is not None, "beta's EIP was released"
    assert address.associated, "beta's EIP was detached from beta's instance"
    assert (address.pool, address.host, address.state) == ("beta", beta.host, EipState.ACTIVE)


def test_rotate_refuses_another_pool_s_eip_that_redis_names(alpha_beta: tuple[Deployment, Deployment]) -> None:
    alpha, beta = alpha_beta
    aws = alpha.machinery.aws
    beta_allocation, beta_ip = serving_address(beta)
    alpha.client.hset(alpha.slot_hash(0), mapping={"allocation_id": beta_allocation, "public_ip": beta_ip})
    held_before = aws.count_region_addresses()

    with pytest.raises(AddressNotOurs, match=r"sendhost:pool=beta \(want alpha\)"):
        rotate_now(alpha.machinery.rotator("alpha-rotator"), alpha.host, [0], timeout_s=0, force=True,
                   sleep=lambda _s: None)

    assert_untouched(aws, beta, beta_allocation)
    assert aws.count_region_addresses() == held_before  # nothing allocated either
    assert alpha.machinery.slots.slot_status(alpha.host, 0).state == SlotState.READY  # given back, not rotating


def test_the_reaper_never_releases_another_pool_s_eip(alpha_beta: tuple[Deployment, Deployment],
                                                      clock: FakeClock) -> None:
    """The reproduction end to end: plant beta's EIP in alpha's slot, let alpha's worker parts run (rotation,
    reaping with park_minutes 0, reconcile --fix): beta's EIP stays allocated, associated and beta's."""
    alpha, beta = alpha_beta
    aws = alpha.machinery.aws
    beta_allocation, beta_ip = serving_address(beta)
    alpha.client.hset(alpha.slot_hash(0), mapping={"allocation_id": beta_allocation, "public_ip": beta_ip})
    alpha.machinery.slots.retire(alpha.host, 0)

    results = alpha.machinery.rotator("alpha-rotator").rotate_ready(alpha.host)
    clock.advance(60)
    alpha.machinery.reaper().reap(alpha.host)
    assert_untouched(aws, beta, beta_allocation)

    assert [(r.outcome, "sendhost:pool=beta" in r.detail) for r in results] == [("failed", True)]
    differences = alpha.machinery.reconciler(grace_s=0).run(fix=True)
    assert_untouched(aws, beta, beta_allocation)
    assert [d.kind for d in differences] == [DifferenceKind.SLOT_NOT_OURS]
    assert differences[0].fixed  # rebuilt from what AWS serves on alpha's slot, beta's EIP not touched
    assert alpha.machinery.slots.slot_status(alpha.host, 0).allocation_id != beta_allocation


def test_a_reaper_refuses_an_address_tagged_for_another_pool(alpha_beta: tuple[Deployment, Deployment]) -> None:
    alpha, beta = alpha_beta
    aws = alpha.machinery.aws
    beta_allocation, _ip = serving_address(beta)
    address = aws.get_address(beta_allocation)
    assert address is not None
    with pytest.raises(AddressNotOurs, match="nothing was changed"):
        alpha.machinery.reaper().release(alpha.host, address, detach=True)
    assert_untouched(aws, beta, beta_allocation)


def test_a_slot_private_ip_that_is_the_primary_is_refused(alpha_beta: tuple[Deployment, Deployment]) -> None:
    alpha, _beta = alpha_beta
    aws = alpha.machinery.aws
    primary = aws.describe_instance(alpha.spec.instance_id).primary_interface.primary_private_ip
    alpha_allocation, _ip = serving_address(alpha)
    alpha.client.hset(alpha.slot_hash(0), "private_ip", primary)
    held_before = aws.count_region_addresses()

    with pytest.raises(AddressNotOurs, match=f"{primary} is the primary private IP"):
        rotate_now(alpha.machinery.rotator("alpha-rotator"), alpha.host, [0], timeout_s=0, force=True,
                   sleep=lambda _s: None)

    assert aws.count_region_addresses() == held_before
    still = aws.get_address(alpha_allocation)
    assert still is not None and still.associated and still.state == EipState.ACTIVE
    [difference] = alpha.machinery.reconciler(grace_s=0).run()
    assert difference.kind == DifferenceKind.SLOT_NOT_OURS and "primary private IP" in difference.detail


def test_another_host_s_eip_of_the_same_pool_is_refused(moto_aws: None, redis_url: str, clock: FakeClock,
                                                        make_adapter: AdapterFactory) -> None:
    """One deployment, two hosts: a sender writing its neighbour's allocation id into its own slot is refused by the
    host tag, though the pool tag matches."""
    aws = make_adapter()
    first = deploy(aws, redis_url, 0, "alpha", "sender-a", clock)
    second = deploy(aws, redis_url, 2, "alpha", "sender-c", clock)
    try:
        theirs, their_ip = serving_address(second)
        first.client.hset(first.slot_hash(0), mapping={"allocation_id": theirs, "public_ip": their_ip})
        with pytest.raises(AddressNotOurs, match=r"sendhost:host=sender-c \(want sender-a\)"):
            rotate_now(first.machinery.rotator("alpha-rotator"), first.host, [0], timeout_s=0, force=True,
                       sleep=lambda _s: None)
        address = aws.get_address(theirs)
        assert address is not None and address.associated and address.host == "sender-c"
        assert address.state == EipState.ACTIVE
    finally:
        first.client.close()
        second.client.close()


def test_destroy_never_unassigns_a_private_ip_that_carries_another_pool_s_eip(world: World) -> None:
    """Redis names the private IPs destroy unassigns: one planted there that holds beta's EIP stays assigned."""
    aws = world.gaps()  # reports the private IP each EIP is associated to, as AWS does
    spec = world.add_host("sender-a", slots=1)
    world.lifecycle(aws=aws).create(spec, 1)
    eni = aws.assign_secondary_private_ips(aws.describe_instance(spec.instance_id).primary_interface.eni_id, 1)
    slot_ip = world.slots.slot_status("sender-a", 0).private_ip
    beta_ip = next(ip for ip in eni.secondary_private_ips if ip != slot_ip)
    beta = aws.allocate_address(pool_tags("beta", "sender-b", 0, EipState.ACTIVE))
    aws.associate_address(beta.allocation_id, eni.eni_id, beta_ip)
    world.slots.put_address("sender-a", 1, private_ip=beta_ip)  # planted: no address, just the IP

    world.lifecycle(aws=aws).destroy(spec)

    after = aws.describe_network_interface(eni.eni_id)
    assert beta_ip in after.secondary_private_ips and slot_ip not in after.secondary_private_ips
    address = aws.get_address(beta.allocation_id)
    assert address is not None and address.associated and address.pool == "beta"
