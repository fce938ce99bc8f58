"""Rotating slots against moto's EC2 and a real Redis: a fresh EIP in service, the old one parked, rejected draws
parked and redrawn."""

from __future__ import annotations

import boto3

from ippool.eip_placement import serving
from ippool.reconcile import DifferenceKind
from ippool.rotator import FAILED, LOST_CLAIM, NO_FRESH_ADDRESS, ROTATED
from ippool.states import EipState, PtrStatus
from tests.support.aws import REGION
from tests.support.ippool_invariants import violations
from tests.support.ippool_world import PTR_DELAY_S, World


def test_rotation_puts_a_fresh_eip_in_service_and_parks_the_old_one(world: World) -> None:
    spec = world.add_host(slots=2, park_minutes=15)
    records = world.lifecycle().create(spec, 2)
    world.exhaust("sender-1", 0)
    before = world.pool.slots.slot_status("sender-1", 0)
    [result] = world.rotator().rotate_ready("sender-1")
    assert (result.outcome, result.old_ip) == (ROTATED, records[0].public_ip)
    after = world.pool.slots.slot_status("sender-1", 0)
    assert (after.state, after.used, after.generation, after.private_ip) == (
        "active", 0, before.generation + 1, before.private_ip)
    assert after.public_ip == result.new_ip != records[0].public_ip
    new = world.aws.get_address(after.allocation_id or "")
    old = world.aws.get_address(records[0].allocation_id)
    assert new is not None and (new.state, new.associated, new.slot) == (EipState.ACTIVE, True, 0)
    assert old is not None and (old.state, old.associated) == (EipState.PARKED, False)
    assert old.parked_until == world.clock() + 15 * 60
    assert [e.public_ip for e in world.records.parked("sender-1")] == [records[0].public_ip]
    assert world.pool.slots.slot_status("sender-1", 1).public_ip == records[1].public_ip  # untouched


def test_a_denylisted_draw_is_parked_and_redrawn(world: World) -> None:
    spec = world.add_host(slots=1, park_minutes=20)
    world.lifecycle().create(spec, 1)
    world.exhaust("sender-1", 0)
    rejected: list[str] = []

    def screen(ip: str) -> str | None:  # the first draw is "listed"; the rotator must park it and draw again
        if not rejected:
            rejected.append(ip)
            return "dnsbl:test.example"
        return None

    [result] = world.rotator(screen=screen).rotate_ready("sender-1")
    assert (result.outcome, result.redraws) == (ROTATED, ("dnsbl:test.example",))
    assert result.new_ip != rejected[0]
    parked = {a.public_ip: a for a in world.aws.describe_pool_addresses("sendhost", states=[EipState.PARKED])}
    assert rejected[0] in parked and not parked[rejected[0]].associated
    assert world.records.stats("sender-1")["redraws:dnsbl"] == 1
    # Parked for the host's park_minutes, like a retired address (a listed address must not come straight back),
    # in its AWS tag (the record) and in Redis's index; the reaper leaves it alone until then.
    deadline = world.clock() + 20 * 60
    assert parked[rejected[0]].parked_until == deadline
    assert [(e.public_ip, e.parked_until) for e in world.records.parked("sender-1")
            if e.public_ip == rejected[0]] == [(rejected[0], deadline)]
    world.clock.advance(20 * 60 - 1)
    assert rejected[0] not in [r.public_ip for r in world.reaper().reap("sender-1")]
    world.clock.advance(1)
    assert rejected[0] in [r.public_ip for r in world.reaper().reap("sender-1") if r.released]


def test_bounded_redraws_leave_the_slot_falling_back_until_the_next_cycle(world: World) -> None:
    spec = world.add_host(slots=1)
    [record] = world.lifecycle().create(spec, 1)
    world.exhaust("sender-1", 0)
    [result] = world.rotator(screen=lambda ip: "dnsbl:all", max_draws=3).rotate_ready("sender-1")
    assert (result.outcome, len(result.redraws)) == (NO_FRESH_ADDRESS, 3)
    slot = world.pool.slots.slot_status("sender-1", 0)
    assert (slot.state, slot.public_ip) == ("ready", record.public_ip)
    assert world.pool.lease("sender-1").fallback
    assert len(world.aws.describe_pool_addresses("sendhost", states=[EipState.PARKED])) == 3
    [again] = world.rotator().rotate_ready("sender-1")
    assert again.outcome == ROTATED


def test_a_draw_matching_a_parked_or_denied_address_is_rejected_with_its_reason(world: World) -> None:
    world.add_host(slots=1)
    world.pool.register_host("sender-1", "10.20.1.250")
    world.records.park("sender-1", "eipalloc-0abc", "198.51.100.1", 0, world.clock() + 60)
    world.denylist.add("sender-1", "198.51.100.2")
    rotator = world.rotator(screen=lambda ip: "dnsbl:zone" if ip == "198.51.100.3" else None)
    assert [rotator._rejection(f"198.51.100.{n}") for n in (1, 2, 3, 4)] == ["parked", "denylist", "dnsbl:zone", None]


def _ptr_zone() -> None:
    route53 = boto3.client("route53", region_name=REGION)
    route53.create_hosted_zone(Name="mail.example.com", CallerReference="rotator")
    route53.close()


def test_a_slot_is_published_only_once_aws_serves_its_ptr(world: World) -> None:
    # AWS answers the PTR update PENDING; the slot must not be leasable under the new address before it resolves.
    _ptr_zone()
    aws = world.gaps(ptr_delay_s=PTR_DELAY_S)
    spec = world.add_host(slots=1, ptr_zone="mail.example.com")
    world.lifecycle(aws=aws).create(spec, 1)
    world.exhaust("sender-1", 0)
    seen: list[tuple[str, str | None]] = []

    def checkpoint(step: str) -> None:
        if step == "ptr":
            slot = world.slots.slot_status("sender-1", 0, now=world.clock())
            incoming = aws.describe_pool_addresses("sendhost", states=[EipState.INCOMING])
            seen.append((slot.state, aws.describe_reverse_dns(incoming[0].allocation_id).update_status))

    started = world.clock()
    [result] = world.rotator(aws=aws, checkpoint=checkpoint).rotate_ready("sender-1")
    assert result.outcome == ROTATED and world.clock() - started >= PTR_DELAY_S
    assert seen == [("rotating", PtrStatus.SUCCESSFUL)]  # still not leasable when the PTR became served


def test_a_failed_ptr_keeps_the_new_address_out_of_service_and_reports_why(world: World) -> None:
    _ptr_zone()
    good = world.gaps()
    spec = world.add_host(slots=1, ptr_zone="mail.example.com")
    [record] = world.lifecycle(aws=good).create(spec, 1)
    world.exhaust("sender-1", 0)
    failing = world.gaps(ptr_failure="the forward record does not resolve to the address")
    [result] = world.rotator(aws=failing).rotate_ready("sender-1")
    assert result.outcome == FAILED and "does not resolve to the address" in result.detail
    slot = world.slots.slot_status("sender-1", 0, now=world.clock())
    assert (slot.public_ip, slot.state) == (record.public_ip, "ready")  # the old address, given back
    [parked] = good.describe_pool_addresses("sendhost", states=[EipState.PARKED])
    assert parked.public_ip != record.public_ip and not parked.associated  # the new one goes to the reaper


def test_an_eip_on_the_slot_ip_that_is_not_the_replaced_one_is_never_taken_over(world: World) -> None:
    aws = world.gaps()
    spec = world.add_host(slots=1)
    [record] = world.lifecycle(aws=aws).create(spec, 1)
    ec2 = boto3.client("ec2", region_name=REGION)
    stranger = ec2.allocate_address(Domain="vpc")["AllocationId"]
    ec2.close()
    eni = aws.describe_instance(spec.instance_id).primary_interface.eni_id
    aws.take_over(stranger, eni, record.private_ip)  # another tool took the slot's private IP
    world.exhaust("sender-1", 0)
    [result] = world.rotator(aws=aws).rotate_ready("sender-1")
    assert result.outcome == FAILED and stranger in result.detail and "not taken over" in result.detail
    held = aws.get_address(stranger)
    assert held is not None and held.associated  # still the stranger's


def test_a_rotator_whose_slot_a_reconcile_replaced_mid_rotation_never_associates(world: World) -> None:
    """Redis loses its data while a rotation is between its tags and its association, and the worker's reconcile
    rebuilds the slot from AWS (as spent, at a new generation). The rotator's re-check of its claim must see that
    and leave the slot alone: associating now would put an address in service that Redis does not hold."""
    spec = world.add_host(slots=1)
    [record] = world.lifecycle().create(spec, 1)
    world.exhaust("sender-1", 0)
    rebuilt: list[object] = []

    def redis_lost_and_reconciled(step: str) -> None:
        if step == "tag" and not rebuilt:
            world.client.flushdb()
            rebuilt.extend(world.reconciler().run(fix=True))

    [result] = world.rotator(checkpoint=redis_lost_and_reconciled).rotate_ready("sender-1")
    assert [d.kind for d in rebuilt] == [DifferenceKind.SLOT_MISSING]  # the reconcile really re-placed the slot
    assert result.outcome == LOST_CLAIM
    held = world.slots.slot_status("sender-1", 0)
    assert held.allocation_id == record.allocation_id
    served = serving(world.aws.describe_pool_addresses("sendhost", host="sender-1"), 0)
    assert served is not None and served.allocation_id == record.allocation_id  # AWS serves what Redis holds
    drawn = [a for a in world.aws.describe_pool_addresses("sendhost", host="sender-1")
             if a.allocation_id != record.allocation_id]
    assert [(a.state, a.associated) for a in drawn] == [(EipState.PARKED, False)]  # straight to the reaper
    assert violations(world.pool, world.aws, "sender-1", world.clock()) == []
