"""Parking and reaping: a parked EIP is released only past its deadline, and its address denied for 7 days."""

from __future__ import annotations

from tests.support.ippool_world import World


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
    assert world.records.parked("sender-1") == []
    world.clock.advance(7 * 86_400 + 1)
    assert not world.denylist.listed(record.public_ip)
