"""The rotator's side of the pool against real Redis: claim (CAS), fenced publish, abort, retire, rebuild."""

from __future__ import annotations

import re

import pytest

from ippool import Pool
from ippool.errors import PoolConfigError
from tests.support.clock import FakeClock
from tests.support.ippool_backends import register
from tests.support.ippool_slots import set_used


def exhaust(pool: Pool, host: str = "sender-1", slot: int = 0) -> None:
    """Spend a slot's whole budget and release every lease, so it is ready to rotate."""
    budget = pool.slots.slot_status(host, slot).budget
    set_used(pool, host, slot, budget - 1)
    pool.lease(host).release()
    assert pool.slots.slot_status(host, slot).state == "ready"


def test_only_one_rotator_claims_a_ready_slot(pool: Pool) -> None:
    register(pool, slots=1)
    exhaust(pool)
    [ready] = pool.slots.ready_slots("sender-1")
    first = pool.slots.mark_rotating("sender-1", ready.slot, ready.generation)
    second = pool.slots.mark_rotating("sender-1", ready.slot, ready.generation)
    assert first is not None and second is None
    assert (first.state, first.public_ip, first.used, first.used == first.budget) == (
        "rotating", "203.0.113.1", first.budget, True)


def test_claim_with_a_stale_generation_is_refused(pool: Pool) -> None:
    register(pool, slots=1)
    exhaust(pool)
    assert pool.slots.mark_rotating("sender-1", 0, generation=0) is None
    assert pool.slots.slot_status("sender-1", 0).state == "ready"


def test_publish_puts_a_fresh_address_with_used_zero_and_generation_plus_one(pool: Pool) -> None:
    register(pool, slots=1)
    exhaust(pool)
    [ready] = pool.slots.ready_slots("sender-1")
    assert pool.slots.mark_rotating("sender-1", 0, ready.generation) is not None
    placed = pool.slots.publish("sender-1", 0, ready.generation, private_ip="10.0.1.1", public_ip="198.51.100.7",
                          allocation_id="eipalloc-new")
    assert placed is not None and placed.generation == ready.generation + 1 and 8 <= placed.budget <= 15
    slot = pool.slots.slot_status("sender-1", 0)
    assert (slot.state, slot.used, slot.public_ip, slot.allocation_id, slot.generation) == (
        "active", 0, "198.51.100.7", "eipalloc-new", ready.generation + 1)
    lease = pool.lease("sender-1")
    assert (lease.public_ip, lease.generation) == ("198.51.100.7", ready.generation + 1)


def test_stale_rotator_publish_is_refused(pool: Pool) -> None:
    register(pool, slots=1)
    exhaust(pool)
    [ready] = pool.slots.ready_slots("sender-1")
    assert pool.slots.mark_rotating("sender-1", 0, ready.generation) is not None
    # the rotator stalls; reconcile re-places the slot from AWS tags meanwhile (generation + 1)
    pool.put_address("sender-1", 0, private_ip="10.0.1.1", public_ip="198.51.100.8", allocation_id="eipalloc-rc")
    refused = pool.slots.publish("sender-1", 0, ready.generation, private_ip="10.0.1.1", public_ip="198.51.100.9",
                           allocation_id="eipalloc-stale")
    assert refused is None
    assert pool.slots.slot_status("sender-1", 0).public_ip == "198.51.100.8"


def test_publish_without_a_claim_is_refused(pool: Pool) -> None:
    register(pool, slots=1)
    exhaust(pool)
    [ready] = pool.slots.ready_slots("sender-1")
    assert pool.slots.publish("sender-1", 0, ready.generation, private_ip="10.0.1.1", public_ip="198.51.100.9",
                        allocation_id="eipalloc-x") is None
    assert pool.slots.slot_status("sender-1", 0).state == "ready"


def test_rotating_slot_gets_no_lease_even_with_budget_left(pool: Pool) -> None:
    register(pool, slots=1)
    assert pool.slots.retire("sender-1", 0) == "ready"  # used 0 < budget, retired by hand
    [ready] = pool.slots.ready_slots("sender-1")
    assert pool.slots.mark_rotating("sender-1", 0, ready.generation) is not None
    lease = pool.lease("sender-1")
    assert lease.fallback and lease.source_ip == "10.0.0.10"
    assert pool.slots.slot_status("sender-1", 0).used == 0


def test_abort_rotation_makes_the_slot_ready_again(pool: Pool) -> None:
    register(pool, slots=1)
    exhaust(pool)
    [ready] = pool.slots.ready_slots("sender-1")
    assert pool.slots.mark_rotating("sender-1", 0, ready.generation) is not None
    assert pool.slots.abort_rotation("sender-1", 0, ready.generation + 5) is False
    assert pool.slots.abort_rotation("sender-1", 0, ready.generation) is True
    assert pool.slots.ready_slots("sender-1") == [ready]


def test_retire_with_live_leases_waits_for_them(pool: Pool) -> None:
    register(pool, slots=1)
    lease = pool.lease("sender-1")
    assert pool.slots.retire("sender-1", 0) == "retiring"
    assert pool.lease("sender-1").fallback
    lease.release()
    assert pool.slots.slot_status("sender-1", 0).state == "ready"
    assert pool.slots.retire("sender-1", 0) == "ready"
    assert pool.slots.retire("sender-1", 5) == "empty"


def test_retire_does_not_wait_for_a_lease_whose_holder_died(pool: Pool, clock: FakeClock) -> None:
    # The lease set still holds the dead sender's entry (nothing reaped it yet): past its expiry it holds nothing.
    register(pool, slots=1)
    pool.lease("sender-1", ttl_s=5)  # never released
    clock.advance(5.001)
    assert pool.slots.retire("sender-1", 0) == "ready"


def test_ready_by_host_answers_for_every_host_what_ready_slots_answers_for_each(pool: Pool, clock: FakeClock) -> None:
    for host in ("sender-1", "sender-2", "sender-3"):
        register(pool, host, slots=2)
    set_used(pool, "sender-1", 1, pool.slots.slot_status("sender-1", 1).budget)  # spent, no lease: ready
    pool.lease("sender-2", ttl_s=5)  # a lease whose holder dies on slot 0 of sender-2...
    assert pool.slots.retire("sender-2", 0) == "retiring"  # ...which therefore waits for it
    asked = pool.slots.ready_by_host(["sender-1", "sender-2", "sender-3"])
    assert {host: [r.slot for r in ready] for host, ready in asked.items()} == {
        "sender-1": [1], "sender-2": [], "sender-3": []}
    clock.advance(5.001)  # the dead holder's lease expires: reaping it makes the slot ready
    later = pool.slots.ready_by_host(["sender-1", "sender-2", "sender-3"])
    assert later == {host: pool.slots.ready_slots(host) for host in ("sender-1", "sender-2", "sender-3")}
    assert [r.slot for r in later["sender-2"]] == [0] and pool.slots.slot_status("sender-2", 0).state == "ready"
    assert pool.slots.ready_by_host([]) == {}


def test_set_used_never_lowers_and_retires_at_budget(pool: Pool) -> None:
    register(pool, slots=1)
    assert set_used(pool, "sender-1", 0, 3) == (3, "active")
    assert set_used(pool, "sender-1", 0, 1) == (3, "active")
    budget = pool.slots.slot_status("sender-1", 0).budget
    assert set_used(pool, "sender-1", 0, budget + 4) == (budget + 4, "ready")
    assert pool.lease("sender-1").fallback


def test_status_reads_every_field(pool: Pool) -> None:
    register(pool, slots=2)
    lease = pool.lease("sender-1")
    [host] = pool.status()
    data = host.to_json()
    assert (data["host"], data["primary_ip"]) == ("sender-1", "10.0.0.10")
    first = data["slots"][0]
    assert {k: first[k] for k in ("slot", "private_ip", "public_ip", "allocation_id", "state", "used",
                                  "live_leases")} == {
        "slot": 0, "private_ip": "10.0.1.1", "public_ip": "203.0.113.1", "allocation_id": "eipalloc-0001",
        "state": "active", "used": 1, "live_leases": 1}
    assert 8 <= first["budget"] <= 15
    lease.release()



def test_status_of_several_hosts_is_each_host_status_in_order_in_two_round_trips(pool: Pool,
                                                                                    clock: FakeClock) -> None:
    for host, slots in (("sender-1", 2), ("sender-2", 3), ("sender-3", 1)):
        register(pool, host, slots=slots)
    held = pool.lease("sender-2", ttl_s=60)  # a live lease, and one expired by the time of reading
    pool.lease("sender-3", ttl_s=5)
    set_used(pool, "sender-1", 1, pool.slots.slot_status("sender-1", 1).budget)  # spent: ready
    clock.advance(10)
    names = ["sender-3", "sender-1", "sender-2"]
    commands: list[object] = []
    client = pool.slots._client
    original = client.pipeline
    client.pipeline = lambda *a, **k: (commands.append("pipeline"), original(*a, **k))[1]  # type: ignore[method-assign]
    try:
        together = pool.status_of(names)
    finally:
        client.pipeline = original  # type: ignore[method-assign]
    assert commands == ["pipeline", "pipeline"]
    assert together == [pool.status(name)[0] for name in names]
    assert [h.host for h in together] == names
    assert [s.live_leases for s in together[2].slots] == [1, 0, 0] and together[0].slots[0].live_leases == 0
    assert together[1].slots[1].state == "ready"
    assert pool.status_of([]) == []
    with pytest.raises(PoolConfigError, match=re.escape("host 'ghost' is not registered in Redis")):
        pool.status_of(["sender-1", "ghost"])
    held.release()


@pytest.mark.parametrize(("call", "message"), [
    (lambda p: p.register_host("h", "not-an-ip"), "primary_ip 'not-an-ip' is not an IP address"),
    (lambda p: p.register_host("h", "10.0.0.1", budget=(9, 3)), "need 1 <= low <= high"),
    (lambda p: p.register_host("a{b}", "10.0.0.1"), "bad host name 'a{b}'"),
    (lambda p: p.put_address("ghost", 0, private_ip="10.0.0.2"), "host is not registered"),
    (lambda p: p.put_address("sender-1", -1, private_ip="10.0.0.2"), "slot -1 must be an integer >= 0"),
    (lambda p: p.status("ghost"), "host 'ghost' is not registered in Redis (registered: sender-1)"),
])
def test_bad_admin_input_is_a_config_error_naming_it(pool: Pool, call, message) -> None:  # type: ignore[no-untyped-def]
    register(pool, slots=1)
    with pytest.raises(PoolConfigError, match=re.escape(message)):
        call(pool)
