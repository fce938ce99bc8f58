"""Creating a pool and rotating its slots against moto's EC2 and a real Redis."""

from __future__ import annotations

import pytest

from ippool.errors import SlotLimitExceeded, UnknownInstance
from ippool.rotator import NO_FRESH_ADDRESS, ROTATED
from ippool.spec import HostSpec
from ippool.states import EipState
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
    assert [e.public_ip for e in world.ledger.parked("sender-1")] == [records[0].public_ip]
    assert world.pool.slots.slot_status("sender-1", 1).public_ip == records[1].public_ip  # untouched


def test_reaper_releases_only_past_the_deadline_and_denies_the_address(world: World) -> None:
    spec = world.add_host(slots=1, park_minutes=15)
    [record] = world.lifecycle().create(spec, 1)
    world.exhaust("sender-1", 0)
    world.rotator().rotate_ready("sender-1")
    world.clock.advance(14 * 60)
    assert world.reaper().reap("sender-1") == []
    world.clock.advance(61)
    [reaped] = world.reaper().reap("sender-1")
    assert (reaped.public_ip, reaped.released) == (record.public_ip, True)
    assert world.aws.get_address(record.allocation_id) is None
    assert world.denylist.listed(record.public_ip) and world.denylist.size("sender-1") == 1
    assert world.ledger.parked("sender-1") == []
    world.clock.advance(7 * 86_400 + 1)
    assert not world.denylist.listed(record.public_ip)


def test_a_denylisted_draw_is_parked_and_redrawn(world: World) -> None:
    spec = world.add_host(slots=1)
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
    assert world.ledger.stats("sender-1")["redraws:dnsbl"] == 1


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
    world.ledger.park("sender-1", "eipalloc-0abc", "198.51.100.1", 0, world.clock() + 60)
    world.denylist.add("sender-1", "198.51.100.2")
    rotator = world.rotator(screen=lambda ip: "dnsbl:zone" if ip == "198.51.100.3" else None)
    assert [rotator._rejection(f"198.51.100.{n}") for n in (1, 2, 3, 4)] == ["parked", "denylist", "dnsbl:zone", None]


def test_reconcile_parks_an_active_eip_that_serves_no_slot(world: World) -> None:
    from ippool.aws.models import pool_tags

    spec = world.add_host(slots=1)
    world.lifecycle().create(spec, 1)
    stray = world.aws.allocate_address(pool_tags("sendhost", "sender-1", 0, EipState.ACTIVE))
    reconciler = world.reconciler()
    [difference] = reconciler.run()
    assert (difference.kind, difference.fixed) == ("leaked", False)
    assert stray.allocation_id in difference.subject
    reconciler.run(fix=True)
    parked = world.aws.get_address(stray.allocation_id)
    assert parked is not None and parked.state == EipState.PARKED
    assert reconciler.run() == []
