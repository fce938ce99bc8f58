"""Rotating slots against moto's EC2 and a real Redis: a fresh EIP in service, the old one parked, rejected draws
parked and redrawn."""

from __future__ import annotations

from ippool.rotator import NO_FRESH_ADDRESS, ROTATED
from ippool.states import EipState
from tests.support.ippool_world import World


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
