"""Lease semantics against real Redis (single server and 3-node cluster): selection, budgets, TTL, fallback."""

from __future__ import annotations

import logging
import random
from collections import Counter
from typing import Any

import pytest

from ippool import Pool
from ippool.keys import HostKeys
from ippool.lease import NO_SLOT, UNKNOWN_HOST, FallbackMeter
from tests.support.clock import FakeClock
from tests.support.ippool_backends import register
from tests.support.ippool_slots import set_used


def test_lease_takes_the_least_used_active_slot(pool: Pool) -> None:
    register(pool, slots=3)
    leases = [pool.lease("sender-1") for _ in range(6)]
    assert Counter(lease.slot for lease in leases) == {0: 2, 1: 2, 2: 2}
    first = leases[0]
    assert (first.source_ip, first.public_ip, first.fallback) == ("10.0.1.1", "203.0.113.1", False)


def test_used_counts_at_lease_time_and_release_does_not_give_it_back(pool: Pool) -> None:
    register(pool, slots=1)
    for _ in range(3):
        with pool.lease("sender-1") as lease:
            assert lease.slot == 0
    slot = pool.slots.slot_status("sender-1", 0)
    assert (slot.used, slot.live_leases, slot.state) == (3, 0, "active")


def test_slot_at_budget_retires_and_gets_no_new_lease(pool: Pool) -> None:
    register(pool, slots=1)
    budget = pool.slots.slot_status("sender-1", 0).budget
    leases = [pool.lease("sender-1") for _ in range(budget)]
    assert all(not lease.fallback for lease in leases)
    assert pool.slots.slot_status("sender-1", 0).state == "retiring"
    extra = pool.lease("sender-1")
    assert (extra.fallback, extra.reason, extra.source_ip, extra.public_ip) == (True, NO_SLOT, "10.0.0.10", None)
    assert pool.slots.slot_status("sender-1", 0).used == budget


def test_release_of_the_last_live_lease_of_a_retiring_slot_makes_it_ready(pool: Pool) -> None:
    register(pool, slots=1)
    budget = pool.slots.slot_status("sender-1", 0).budget
    leases = [pool.lease("sender-1") for _ in range(budget)]
    for lease in leases[:-1]:
        lease.release()
    assert pool.slots.slot_status("sender-1", 0).state == "retiring"
    assert pool.slots.ready_slots("sender-1") == []
    leases[-1].release()
    assert pool.slots.slot_status("sender-1", 0).state == "ready"
    assert [tuple(r) for r in pool.slots.ready_slots("sender-1")] == [(0, 1)]


def test_release_twice_and_release_of_a_fallback_do_nothing(pool: Pool) -> None:
    register(pool, slots=1)
    lease = pool.lease("sender-1")
    lease.release()
    lease.release()
    assert pool.slots.slot_status("sender-1", 0).live_leases == 0
    pool.lease("unknown-host").release()


def test_budgets_are_drawn_uniformly_from_the_host_range(pool: Pool) -> None:
    pool.register_host("sender-1", "10.0.0.10", budget=(8, 15))
    budgets = [pool.put_address("sender-1", 0, private_ip="10.0.1.1").budget for _ in range(400)]
    assert set(budgets) == set(range(8, 16))
    # uniform: each of the 8 values within a loose band around 50 draws
    assert all(25 <= count <= 80 for count in Counter(budgets).values()), Counter(budgets)


def test_budget_draws_come_from_the_injected_rng(backend_client: Any, clock: FakeClock) -> None:
    runs = []
    for _ in range(2):
        backend_client.delete("sendhost:{sender-1}:meta", "sendhost:{sender-1}:slot:0")
        pool = Pool(backend_client, clock=clock, rng=random.Random(99))
        pool.register_host("sender-1", "10.0.0.10")
        runs.append([pool.put_address("sender-1", 0, private_ip="10.0.1.1").budget for _ in range(20)])
    assert runs[0] == runs[1]


def test_a_custom_budget_range_is_respected(pool: Pool) -> None:
    pool.register_host("sender-1", "10.0.0.10", budget=(2, 3))
    budgets = {pool.put_address("sender-1", 0, private_ip="10.0.1.1").budget for _ in range(60)}
    assert budgets == {2, 3}


def test_expired_lease_stops_counting_after_its_ttl(pool: Pool, clock: FakeClock) -> None:
    register(pool, slots=1)
    pool.lease("sender-1", ttl_s=10)  # never released: its holder "died"
    assert pool.slots.slot_status("sender-1", 0).live_leases == 1
    clock.advance(9.9)
    assert pool.slots.slot_status("sender-1", 0).live_leases == 1
    clock.advance(0.2)
    assert pool.slots.slot_status("sender-1", 0).live_leases == 0
    assert pool.slots.reap("sender-1")[0] == 1


def test_retiring_slot_whose_last_holder_died_becomes_ready_after_ttl(pool: Pool, clock: FakeClock) -> None:
    register(pool, slots=1)
    budget = pool.slots.slot_status("sender-1", 0).budget
    set_used(pool, "sender-1", 0, budget - 1)
    dead = pool.lease("sender-1", ttl_s=5)
    assert dead.slot == 0
    assert pool.slots.ready_slots("sender-1") == []
    clock.advance(5.001)
    assert [r.slot for r in pool.slots.ready_slots("sender-1")] == [0]


def test_renew_extends_a_live_lease_and_not_an_expired_one(pool: Pool, clock: FakeClock) -> None:
    register(pool, slots=1)
    lease = pool.lease("sender-1", ttl_s=10)
    clock.advance(8)
    assert lease.renew() is True
    clock.advance(8)  # 16 s after the lease, 8 s after the renewal
    assert pool.slots.slot_status("sender-1", 0).live_leases == 1
    clock.advance(3)
    assert lease.renew() is False
    assert pool.slots.slot_status("sender-1", 0).live_leases == 0


def test_unknown_host_falls_back_on_the_given_primary_ip(pool: Pool) -> None:
    lease = pool.lease("nobody", primary_ip="10.9.9.9")
    assert (lease.fallback, lease.reason, lease.source_ip, lease.slot) == (True, UNKNOWN_HOST, "10.9.9.9", None)
    assert pool.lease("bad{name}").reason == UNKNOWN_HOST
    assert pool.fallbacks.totals[UNKNOWN_HOST] == 2


def test_a_fallback_is_counted_in_its_own_key_and_never_writes_the_meta_hash(pool: Pool) -> None:
    """The sender's ACL user may not write the meta hash (primary IP, budgets): lease.lua counts with INCR."""
    register(pool, slots=1, budget=(1, 1))
    keys = HostKeys("sender-1")
    assert not pool.lease("sender-1").fallback
    meta = pool.client.hgetall(keys.meta)
    assert [pool.lease("sender-1").reason for _ in range(2)] == [NO_SLOT, NO_SLOT]
    assert pool.client.hgetall(keys.meta) == meta
    assert int(pool.client.get(keys.fallbacks)) == 2
    pool.slots.forget_host("sender-1")  # `pool destroy` leaves no counter behind
    assert not pool.client.exists(keys.fallbacks)


def test_a_lease_counts_in_the_used_key_and_never_writes_the_slot_hash(pool: Pool) -> None:
    """The sender's ACL user may not write the slot hash (address, budget, state): lease.lua counts a send with INCR
    on the slot's used key. A spent slot is derived (not leasable, shown retiring); the rotator's reap stores it."""
    register(pool, slots=1, budget=(3, 3))
    keys = HostKeys("sender-1")
    slot_hash = pool.client.hgetall(keys.slot(0))
    leases = [pool.lease("sender-1") for _ in range(3)]
    assert [lease.fallback for lease in leases] == [False, False, False]
    assert pool.client.hgetall(keys.slot(0)) == slot_hash
    assert pool.client.get(keys.used(0)) == "3"
    assert pool.lease("sender-1").reason == NO_SLOT
    assert pool.slots.slot_status("sender-1", 0).state == "retiring"
    assert pool.slots.ready_slots("sender-1") == []
    assert pool.client.hget(keys.slot(0), "state") == "retiring"  # stored by the rotator's reap, an admin
    for lease in leases:
        lease.release()
    assert [ready.slot for ready in pool.slots.ready_slots("sender-1")] == [0]
    pool.slots.forget_host("sender-1")  # `pool destroy` leaves no count behind
    assert not pool.client.exists(keys.used(0))


def test_placing_an_address_resets_its_used_key_and_keeps_the_old_count_in_the_totals(pool: Pool) -> None:
    register(pool, slots=1, budget=(5, 5))
    keys = HostKeys("sender-1")
    for _ in range(2):
        pool.lease("sender-1").release()
    generation = pool.slots.slot_status("sender-1", 0).generation
    placed = pool.slots.put_address("sender-1", 0, private_ip="10.0.1.1", public_ip="203.0.113.77")
    assert placed.generation == generation + 1
    assert pool.client.get(keys.used(0)) == "0"
    assert pool.client.hget(keys.meta, "leases_retired") == "2"
    pool.slots.put_address("sender-1", 0, private_ip="10.0.1.1", public_ip="203.0.113.78", spent=True)
    assert pool.client.get(keys.used(0)) == "5"
    assert pool.lease("sender-1").reason == NO_SLOT


def test_a_count_an_older_version_left_in_the_slot_hash_never_gets_a_fresh_budget(pool: Pool) -> None:
    """Upgrade: the old lease.lua counted in the slot hash's `used` field. Until an admin step carries it into the
    used key (the rotator's reap, idempotent), the slot is not leasable; after it, only the rest of its budget is."""
    register(pool, slots=1, budget=(5, 5))
    keys = HostKeys("sender-1")
    pool.client.delete(keys.used(0))
    pool.client.hset(keys.slot(0), "used", 3)  # as the old lease.lua left it
    assert pool.lease("sender-1").reason == NO_SLOT
    assert pool.slots.slot_status("sender-1", 0).used == 3
    pool.slots.reap("sender-1")
    pool.slots.reap("sender-1")  # a second carry changes nothing
    assert (pool.client.get(keys.used(0)), pool.client.hexists(keys.slot(0), "used")) == ("3", False)
    assert [pool.lease("sender-1").fallback for _ in range(3)] == [False, False, True]
    assert pool.client.get(keys.used(0)) == "5"


def test_placing_an_address_keeps_a_count_an_older_version_left_in_the_slot_hash(pool: Pool) -> None:
    register(pool, slots=1, budget=(5, 5))
    keys = HostKeys("sender-1")
    pool.client.delete(keys.used(0))
    pool.client.hset(keys.slot(0), "used", 4)  # as the old lease.lua left it
    pool.slots.put_address("sender-1", 0, private_ip="10.0.1.1", public_ip="203.0.113.77")
    assert pool.client.hget(keys.meta, "leases_retired") == "4"
    assert (pool.client.get(keys.used(0)), pool.client.hexists(keys.slot(0), "used")) == ("0", False)


def test_host_with_more_slots_than_the_first_guess_is_leased_over_all_of_them(pool: Pool) -> None:
    register(pool, slots=10)
    for slot in range(9):
        set_used(pool, "sender-1", slot, 5)
    lease = pool.lease("sender-1")
    assert (lease.slot, lease.source_ip) == (9, "10.0.1.10")


def test_lease_without_with_block(pool: Pool) -> None:
    register(pool, slots=2)
    lease = pool.lease("sender-1", ttl_s=60)
    assert pool.slots.slot_status("sender-1", lease.slot or 0).live_leases == 1
    lease.release()
    assert pool.slots.slot_status("sender-1", lease.slot or 0).live_leases == 0


def test_fallbacks_are_logged_once_per_interval(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock(now_s=0.0)
    meter = FallbackMeter(interval_s=60, monotonic=clock)
    with caplog.at_level(logging.WARNING, logger="ippool"):
        for _ in range(100):
            meter.record(NO_SLOT)
        clock.advance(59)
        meter.record(NO_SLOT)
        assert len(caplog.records) == 1
        clock.advance(2)
        meter.record(UNKNOWN_HOST)
    assert len(caplog.records) == 2
    # the first fallback is reported at once; the next line sums everything since, by reason
    assert "1 fallback lease(s) on the primary IP (no_slot=1)" in caplog.records[0].getMessage()
    assert "101 fallback lease(s) on the primary IP (no_slot=100, unknown_host=1)" in caplog.records[1].getMessage()
    assert meter.totals == {NO_SLOT: 101, UNKNOWN_HOST: 1}


def test_a_blamed_address_is_spent_at_once_and_leased_no_more(pool: Pool) -> None:
    """retire_blamed (a receiving server blamed the lease's address): its slot's budget is used up in one call, so
    no new lease lands there (it rotates as any spent slot); the other slots keep leasing."""
    register(pool, slots=2)
    blamed = pool.lease("sender-1")
    assert blamed.slot is not None
    assert pool.retire_blamed(blamed) is True
    blamed.release()
    slot = pool.slots.slot_status("sender-1", blamed.slot)
    assert (slot.used, slot.state) == (slot.budget, "ready")
    assert {pool.lease("sender-1").slot for _ in range(5)} == {1 - blamed.slot}
    assert pool.retire_blamed(blamed) is True  # spent already (another worker's blame): out of service all the same
    assert pool.slots.slot_status("sender-1", blamed.slot).used == slot.budget


def test_a_blamed_address_that_was_rotated_out_meanwhile_spares_the_new_one(pool: Pool) -> None:
    """The slot got a new address between the lease and the blame: the new one is innocent and keeps its budget."""
    register(pool, slots=1)
    lease = pool.lease("sender-1")
    lease.release()
    pool.put_address("sender-1", 0, private_ip="10.0.1.1", public_ip="203.0.113.99")  # generation + 1
    assert pool.retire_blamed(lease) is True  # the blamed address is out of service already
    slot = pool.slots.slot_status("sender-1", 0)
    assert (slot.public_ip, slot.used, slot.state) == ("203.0.113.99", 0, "active")


def test_a_blamed_fallback_lease_retires_nothing(pool: Pool) -> None:
    pool.register_host("sender-1", "10.0.0.10")
    lease = pool.lease("sender-1")
    assert lease.fallback and pool.retire_blamed(lease) is False


def test_from_url_with_cluster_yes_leases_on_the_cluster(cluster_service: Any) -> None:
    """`?cluster=yes` (sendhost.redis_conn.connect) gives the pool a cluster client, as `Guard.from_url`."""
    from redis.cluster import RedisCluster

    cluster_service.flush()
    pool = Pool.from_url(f"redis://127.0.0.1:{cluster_service.ports[0]}/0?cluster=yes")
    try:
        assert isinstance(pool.client, RedisCluster)
        register(pool, slots=1)
        with pool.lease("sender-1") as lease:
            assert (lease.fallback, lease.public_ip) == (False, "203.0.113.1")
    finally:
        pool.close()
