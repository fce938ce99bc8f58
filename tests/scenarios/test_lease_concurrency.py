"""Many real sender processes leasing at once against real Redis (single server and 3-node cluster)."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

from ippool import Pool
from tests.scenarios import workers
from tests.support.ippool_backends import Backend, register
from tests.support.ippool_slots import set_used

SENDERS = 16
CTX = multiprocessing.get_context("fork")  # children open their own Redis clients after the fork


def run_senders(backend: Backend, tmp_path: Path, iterations: int, hold_s: float, tag: str) -> list[dict[str, Any]]:
    """Start SENDERS lease loops at once; return each one's report after checking it finished cleanly."""
    outs = [tmp_path / f"{tag}-{i}.json" for i in range(SENDERS)]
    procs = [CTX.Process(target=workers.lease_loop, args=(backend, "sender-1", iterations, str(out), hold_s, i))
             for i, out in enumerate(outs)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=60)
    assert [proc.exitcode for proc in procs] == [0] * SENDERS, "a sender hung or crashed"
    reports = [json.loads(out.read_text()) for out in outs]
    assert [r["errors"] for r in reports] == [[]] * SENDERS
    assert [len(r["records"]) for r in reports] == [iterations] * SENDERS
    return reports


def leases_by_address(reports: list[dict[str, Any]]) -> Counter[str]:
    return Counter(rec[3] for r in reports for rec in r["records"] if not rec[0])


def test_concurrent_senders_and_racing_rotators_never_exceed_a_budget(backend: Backend, tmp_path: Path,
                                                                      backend_client: Any) -> None:
    pool = Pool(backend_client)
    register(pool, slots=4)
    budgets = {s.public_ip: s.budget for s in pool.status("sender-1")[0].slots}
    stop = CTX.Event()
    rotator_outs = [tmp_path / f"rotator-{i}.json" for i in range(2)]
    rotators = [CTX.Process(target=workers.rotator_loop, args=(backend, "sender-1", i, str(out), stop))
                for i, out in enumerate(rotator_outs)]
    for proc in rotators:
        proc.start()
    try:
        reports = run_senders(backend, tmp_path, iterations=40, hold_s=0.002, tag="rot")
    finally:
        stop.set()
        for proc in rotators:
            proc.join(timeout=30)
    assert [proc.exitcode for proc in rotators] == [0, 0]
    rotations = [json.loads(out.read_text()) for out in rotator_outs]
    claimed = [c for r in rotations for c in r["claimed"]]
    published = [p for r in rotations for p in r["published"]]
    assert len(claimed) >= 3, "the run was too short to rotate: the test proved nothing about rotation"
    # the generation CAS: no slot generation was claimed twice, and every claim's publish was accepted
    assert len({(slot, gen) for slot, gen, *_ in claimed}) == len(claimed)
    assert all(gen is not None for _ip, gen, _budget in published)
    budgets.update({ip: budget for ip, _gen, budget in published})
    assert all(8 <= budget <= 15 for budget in budgets.values())

    leased = leases_by_address(reports)
    assert set(leased) <= set(budgets)
    # a rotated-out address: claimed at used == budget, and exactly that many leases ever named it, so no lease
    # came after it retired or while it was rotating
    for _slot, _gen, public_ip, used, budget in claimed:
        assert used == budget == budgets[public_ip]
        assert leased[public_ip] == used, public_ip
    for slot in pool.status("sender-1")[0].slots:  # addresses still in place
        assert leased[slot.public_ip or ""] == slot.used <= slot.budget
    assert all(count <= budgets[ip] for ip, count in leased.items())


def test_when_every_slot_is_exhausted_every_lease_falls_back(backend: Backend, tmp_path: Path,
                                                             backend_client: Any) -> None:
    pool = Pool(backend_client)
    register(pool, slots=4)
    budgets = {s.public_ip: s.budget for s in pool.status("sender-1")[0].slots}
    reports = run_senders(backend, tmp_path, iterations=25, hold_s=0.0, tag="drain")
    assert leases_by_address(reports) == budgets  # each address exactly its budget, never more
    fallbacks = [rec for r in reports for rec in r["records"] if rec[0]]
    assert len(fallbacks) == SENDERS * 25 - sum(budgets.values())
    assert all(rec[4] == "10.0.0.10" and rec[3] is None for rec in fallbacks)
    assert {s.state for s in pool.status("sender-1")[0].slots} == {"ready"}

    after = run_senders(backend, tmp_path, iterations=10, hold_s=0.0, tag="after")
    records = [rec for r in after for rec in r["records"]]
    assert len(records) == SENDERS * 10
    assert all(rec[0] and rec[4] == "10.0.0.10" for rec in records)


def test_lease_of_a_sigkilled_holder_stops_counting_after_its_ttl(backend: Backend, backend_client: Any) -> None:
    pool = Pool(backend_client)
    register(pool, slots=1)
    budget = pool.slots.slot_status("sender-1", 0).budget
    set_used(pool, "sender-1", 0, budget - 1)  # the holder's lease will be the address's last
    parent_end, child_end = CTX.Pipe()
    holder = CTX.Process(target=workers.hold_until_killed, args=(backend, "sender-1", 20.0, child_end))
    holder.start()
    try:
        assert parent_end.poll(30), "the holder never leased"
        slot, _member, fallback = parent_end.recv()
        assert (slot, fallback) == (0, False)
    finally:
        os.kill(holder.pid or 0, signal.SIGKILL)
        holder.join(timeout=10)
        parent_end.close()
        child_end.close()
    assert holder.exitcode == -signal.SIGKILL
    now = time.time()  # the Redis server runs on this machine: its TIME is this clock
    assert pool.slots.slot_status("sender-1", 0, now=now).live_leases == 1
    assert pool.slots.ready_slots("sender-1", now=now) == []
    after_ttl = now + 20.5
    assert pool.slots.slot_status("sender-1", 0, now=after_ttl).live_leases == 0
    assert [r.slot for r in pool.slots.ready_slots("sender-1", now=after_ttl)] == [0]
    assert pool.slots.slot_status("sender-1", 0, now=after_ttl).state == "ready"
