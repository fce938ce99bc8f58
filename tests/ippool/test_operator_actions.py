"""On-call operations against moto and a real Redis: rotate now (waiting for leases, or forced), retire, quota,
PTR, destroy."""

from __future__ import annotations

import boto3
import pytest

from ippool.errors import AddressQuotaExceeded, PoolConfigError, PoolOperationFailed
from ippool.operator_actions import retire_address, rotate_now
from ippool.parking import PTR_STILL_SET
from ippool.rotator import ROTATED
from tests.support.aws import REGION
from tests.support.ippool_world import PTR_RELEASE_DELAY_S, World


def test_rotation_under_a_live_lease_waits_until_it_is_released(world: World) -> None:
    spec = world.add_host(slots=1)
    [record] = world.lifecycle().create(spec, 1)
    lease = world.pool.lease("sender-1", ttl_s=300)
    waits: list[float] = []

    def sleep(seconds: float) -> None:  # the sender finishes its send during the second wait
        waits.append(seconds)
        world.clock.advance(seconds)
        assert world.pool.slots.slot_status("sender-1", 0).public_ip == record.public_ip  # not rotated while leased
        if len(waits) == 2:
            lease.release()

    [result] = rotate_now(world.rotator(), "sender-1", [0], timeout_s=60, force=False, sleep=sleep)
    assert result.outcome == ROTATED and len(waits) == 2
    assert world.pool.slots.slot_status("sender-1", 0).public_ip == result.new_ip != record.public_ip


def test_rotation_under_a_live_lease_happens_when_the_lease_expires(world: World) -> None:
    spec = world.add_host(slots=1)
    [record] = world.lifecycle().create(spec, 1)
    world.pool.lease("sender-1", ttl_s=30)  # its sender died: the lease is never released
    with pytest.raises(PoolOperationFailed, match=r"slot 0 still has 1 live lease\(s\) after 10s .*--force"):
        rotate_now(world.rotator(), "sender-1", [0], timeout_s=10, force=False, sleep=world.clock.sleep)
    assert world.pool.slots.slot_status("sender-1", 0).public_ip == record.public_ip
    [result] = rotate_now(world.rotator(), "sender-1", [0], timeout_s=60, force=False, sleep=world.clock.sleep)
    assert result.outcome == ROTATED


def test_forced_rotation_does_not_wait_for_live_leases(world: World) -> None:
    spec = world.add_host(slots=2)
    records = world.lifecycle().create(spec, 2)
    for _ in range(4):
        world.pool.lease("sender-1", ttl_s=300)

    def never(seconds: float) -> None:
        raise AssertionError("a forced rotation must not wait")

    results = rotate_now(world.rotator(), "sender-1", None, timeout_s=60, force=True, sleep=never)
    assert [r.outcome for r in results] == [ROTATED, ROTATED]
    slots = world.pool.status("sender-1", now=world.clock())[0].slots
    assert {s.public_ip for s in slots}.isdisjoint({r.public_ip for r in records})
    assert [s.live_leases for s in slots] == [0, 0]


def test_retire_takes_an_address_out_of_service_now_and_denies_it(world: World) -> None:
    spec = world.add_host(slots=2)
    records = world.lifecycle().create(spec, 2)
    retired = retire_address(world.slots, world.denylist, world.records, records[1].public_ip, "on spamhaus")
    assert (retired.host, retired.slot, retired.state) == ("sender-1", 1, "ready")
    assert world.denylist.listed(records[1].public_ip)
    assert all(world.pool.lease("sender-1").slot == 0 for _ in range(3))
    [result] = world.rotator().rotate_ready("sender-1")
    assert (result.slot, result.outcome) == (1, ROTATED)
    with pytest.raises(PoolConfigError, match=r"address 192\.0\.2\.1 is in no slot and not parked"):
        retire_address(world.slots, world.denylist, world.records, "192.0.2.1", "typo")


def test_quota_exhausted_keeps_the_old_address_and_says_which_quota_to_raise_to_what(world: World) -> None:
    aws = world.gaps(quota=2)
    spec = world.add_host(slots=2)
    records = world.lifecycle(aws=aws).create(spec, 2)
    world.exhaust("sender-1", 0)
    [result] = world.rotator(aws=aws).rotate_ready("sender-1")
    assert result.outcome == "failed"
    assert "AddressLimitExceeded" in result.detail
    assert "raise Service Quotas ec2/L-0263D0A3 (EC2-VPC Elastic IPs) in us-east-1 (now 2) to at least 3" \
        in result.detail
    slot = world.pool.slots.slot_status("sender-1", 0)
    assert (slot.state, slot.public_ip) == ("ready", records[0].public_ip)  # falls back, keeps its address
    ours = aws.describe_pool_addresses("sendhost")
    assert len(ours) == 2 and all(a.state == "active" for a in ours)  # nothing untagged, nothing extra


def test_create_beyond_the_quota_names_the_quota_and_keeps_what_it_made(world: World) -> None:
    aws = world.gaps(quota=1)
    spec = world.add_host(slots=3)
    with pytest.raises(AddressQuotaExceeded, match=r"2 still need an address; raise Service Quotas "
                                                   r"ec2/L-0263D0A3 .* \(now 1\) to at least 3"):
        world.lifecycle(aws=aws).create(spec, 3)
    [only] = aws.describe_pool_addresses("sendhost")
    assert (only.slot, only.state, only.associated) == (0, "active", True)
    assert world.pool.slots.slot_status("sender-1", 0).allocation_id == only.allocation_id


def test_ptr_policy_sets_the_a_record_and_reverse_dns_and_the_reaper_resets_it(world: World) -> None:
    route53 = boto3.client("route53", region_name=REGION)
    zone_id = route53.create_hosted_zone(Name="mail.example.com", CallerReference="ptr")["HostedZone"]["Id"]

    def a_records() -> dict[str, list[str]]:
        sets = route53.list_resource_record_sets(HostedZoneId=zone_id)["ResourceRecordSets"]
        return {s["Name"]: [r["Value"] for r in s["ResourceRecords"]] for s in sets if s["Type"] == "A"}

    aws = world.gaps()
    spec = world.add_host(slots=1, ptr_zone="mail.example.com", park_minutes=1)
    [first] = world.lifecycle(aws=aws).create(spec, 1)
    first_name = f"sender-1-0-{first.public_ip.replace('.', '-')}.mail.example.com"
    assert aws.reverse_dns(first.allocation_id) == first_name  # the first address gets its PTR at create too
    world.exhaust("sender-1", 0)
    [result] = world.rotator(aws=aws).rotate_ready("sender-1")
    slot = world.pool.slots.slot_status("sender-1", 0)
    new_name = f"sender-1-0-{(result.new_ip or '').replace('.', '-')}.mail.example.com"
    assert aws.reverse_dns(slot.allocation_id or "") == new_name  # one name per address, never reused per slot
    assert a_records() == {first_name + ".": [first.public_ip], new_name + ".": [result.new_ip]}
    world.clock.advance(61)
    [deferred] = world.reaper(aws=aws).reap("sender-1")
    assert (deferred.public_ip, deferred.released, deferred.detail) == (first.public_ip, False, PTR_STILL_SET)
    assert a_records() == {new_name + ".": [result.new_ip]}  # the old address's forward record is gone
    world.clock.advance(PTR_RELEASE_DELAY_S)
    [reaped] = world.reaper(aws=aws).reap("sender-1")
    assert (reaped.public_ip, reaped.released) == (first.public_ip, True)
    assert aws.get_address(first.allocation_id) is None
    route53.close()


def test_destroy_returns_every_address_with_ptr_reset(world: World) -> None:
    route53 = boto3.client("route53", region_name=REGION)
    zone_id = route53.create_hosted_zone(Name="mail.example.com", CallerReference="destroy")["HostedZone"]["Id"]
    aws = world.gaps()
    spec = world.add_host(slots=2, ptr_zone="mail.example.com")
    world.lifecycle(aws=aws).create(spec, 2)
    world.exhaust("sender-1", 0)
    world.rotator(aws=aws).rotate_ready("sender-1")  # three, each with its PTR: one parked, two serving
    assert len(aws.describe_pool_addresses("sendhost")) == 3
    started = world.clock()
    returned = world.lifecycle(aws=aws).destroy(spec)  # waits out InvalidAddress.PtrSet instead of failing
    assert world.clock() - started >= PTR_RELEASE_DELAY_S
    assert len(returned) == 3
    sets = route53.list_resource_record_sets(HostedZoneId=zone_id)["ResourceRecordSets"]
    assert [s for s in sets if s["Type"] == "A"] == []  # every forward record it created is deleted
    route53.close()
    assert aws.describe_pool_addresses("sendhost") == [] and aws.count_region_addresses() == 0
    assert "sender-1" not in world.pool.hosts()
    eni = aws.describe_instance(spec.instance_id).primary_interface
    assert eni.secondary_private_ips == ()
    assert all(world.denylist.listed(a.public_ip) for a in returned)
