"""Crash at every step: a rotation, and a reap, SIGKILLed (a real process) right after each AWS call in turn; then
`reconcile --fix`, and the promises hold. AWS is the moto server, Redis is real, time is a fake clock."""

from __future__ import annotations

import json
import multiprocessing
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import pytest
import redis

from ippool import Pool
from ippool.assembly import PoolMachinery, build_machinery
from ippool.denylist import Denylist
from ippool.parking import Reaper
from ippool.reconcile import Reconciler
from ippool.records import PoolRecords
from ippool.rotator import ROTATED, Rotator
from ippool.states import EipState
from sendhost.model import PoolPolicy, SenderHost
from tests.conftest import REPO_ROOT
from tests.scenarios import workers
from tests.support.aws import FAKE_CREDENTIALS, REGION
from tests.support.clock import FakeClock
from tests.support.ippool_cli import CLI_AWS_ENV, server_instance, unique_host
from tests.support.ippool_fakes import MotoGaps
from tests.support.ippool_invariants import violations
from tests.support.ippool_slots import set_used

ROTATION_STEPS = ["allocate", "tag", "ptr", "associate", "park-tag", "publish"]
REAP_STEPS = ["reset-ptr", "denylist", "release"]


@dataclass
class Rig:
    host: str
    spec: SenderHost
    machinery: PoolMachinery
    aws: MotoGaps
    clock: FakeClock
    url: str
    moto_url: str
    client: Any = None
    pool: Pool = field(init=False)

    def __post_init__(self) -> None:
        self.client, self.pool = self.machinery.client, self.machinery.pool

    def reaper(self) -> Reaper:
        return self.machinery.reaper()

    def reconciler(self) -> Reconciler:
        return self.machinery.reconciler(grace_s=0)

    def rotator(self, owner: str = "parent", **options: Any) -> Rotator:
        return self.machinery.rotator(owner, **options)

    def child(self, mode: str, step: str) -> int:
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO_ROOT), **CLI_AWS_ENV,
               "AWS_ENDPOINT_URL": self.moto_url}
        args = [sys.executable, "-m", "tests.scenarios.fault_child", mode, step, self.host, self.spec.instance_id,
                repr(self.clock()), self.url, self.spec.forward_zone or ""]
        done = subprocess.run(args, env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == -signal.SIGKILL, done.stderr
        time.sleep(0.3)  # the killed process's heartbeat (0.2 s) lapses, as a dead worker's does
        return done.returncode

    def check(self) -> None:
        assert violations(self.pool, self.aws, self.host, self.clock()) == []


@pytest.fixture
def rig(moto_url: str, redis_url: str, clock: FakeClock) -> Iterator[Rig]:
    host = unique_host()
    route53 = boto3.client("route53", region_name=REGION, endpoint_url=moto_url, **FAKE_CREDENTIALS)
    zone = f"{host}.example.com"
    route53.create_hosted_zone(Name=zone, CallerReference=host)
    route53.close()
    spec = SenderHost(host, server_instance(moto_url), REGION, "10.30.1.250",
                      PoolPolicy(2, park_minutes=15, ptr=True, ptr_zone=zone))
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    session = boto3.Session(region_name=REGION, **FAKE_CREDENTIALS)
    aws = MotoGaps(lambda: session, REGION, endpoint_url=moto_url, sleep=clock.sleep, clock=clock)
    machinery = build_machinery(client, aws, {host: spec}, clock, store_clock=clock, rng=random.Random(5))
    made = Rig(host, spec, machinery, aws, clock, redis_url, moto_url)
    machinery.lifecycle().create(spec, 2)
    yield made
    machinery.lifecycle().destroy(spec)
    assert aws.describe_pool_addresses("sendhost", host=host) == []
    aws.close()
    client.close()


@pytest.mark.slow
@pytest.mark.parametrize("step", ROTATION_STEPS)
def test_rotation_killed_after_each_step_is_reconciled(rig: Rig, step: str) -> None:
    old = rig.pool.slots.slot_status(rig.host, 0)
    set_used(rig.pool, rig.host, 0, old.budget)
    rig.child("rotate", step)

    differences = rig.reconciler().run(fix=True)
    if step != "publish":  # a rotation killed after publishing is complete but for its bookkeeping
        assert differences and all(d.fixed for d in differences), differences
    assert rig.reconciler().run() == []  # nothing left to fix
    rig.check()

    # The worker carries on: the slot serves (or, rolled back, rotates now), and the reaper empties the park.
    cycle = rig.rotator().rotate_ready(rig.host)
    assert all(r.outcome == ROTATED for r in cycle)
    slot = rig.pool.slots.slot_status(rig.host, 0)
    assert slot.state == "active" and slot.public_ip != old.public_ip
    rig.clock.advance(16 * 60)
    rig.reaper().reap(rig.host)
    assert rig.aws.describe_pool_addresses("sendhost", host=rig.host, states=[EipState.PARKED]) == []
    rig.check()


@pytest.mark.slow
@pytest.mark.parametrize("step", REAP_STEPS)
def test_reap_killed_after_each_step_is_reconciled(rig: Rig, step: str) -> None:
    set_used(rig.pool, rig.host, 0, rig.pool.slots.slot_status(rig.host, 0).budget)
    [rotation] = rig.rotator().rotate_ready(rig.host)  # slot 0's first address is parked, with PTR
    set_used(rig.pool, rig.host, 0, rig.pool.slots.slot_status(rig.host, 0).budget)
    rig.rotator().rotate_ready(rig.host)  # the PTR'd address from the first rotation is parked too
    rig.clock.advance(16 * 60)
    rig.child("reap", step)

    differences = rig.reconciler().run(fix=True)
    assert all(d.kind == "parked_overdue" and d.fixed for d in differences), differences
    assert rig.reconciler().run() == []
    assert rig.aws.describe_pool_addresses("sendhost", host=rig.host, states=[EipState.PARKED]) == []
    assert Denylist(rig.client, rig.clock).listed(rotation.new_ip or "")
    rig.check()


def test_redis_loss_is_rebuilt_from_aws_tags_with_no_new_sends_on_old_addresses(rig: Rig) -> None:
    set_used(rig.pool, rig.host, 0, rig.pool.slots.slot_status(rig.host, 0).budget)
    rig.rotator().rotate_ready(rig.host)
    before = rig.pool.status(rig.host)[0].slots
    rig.client.flushall()
    differences = rig.reconciler().run(fix=True)
    assert sorted(d.kind for d in differences) == ["parked_unindexed", "slot_missing", "slot_missing"]
    after = rig.pool.status(rig.host)[0].slots
    assert [(s.private_ip, s.public_ip, s.allocation_id) for s in after] == [
        (s.private_ip, s.public_ip, s.allocation_id) for s in before]
    assert all(s.used >= s.budget and s.state == "ready" for s in after)  # no send until rotated
    assert rig.pool.lease(rig.host).fallback
    assert len(PoolRecords(rig.client, rig.clock).parked(rig.host)) == 1
    rig.check()
    assert {r.outcome for r in rig.rotator().rotate_ready(rig.host)} == {ROTATED}
    rig.check()


def test_no_send_goes_out_on_an_address_while_reconcile_rebuilds_it(rig: Rig, tmp_path: Path) -> None:
    """Real sender processes lease non-stop while Redis loses everything and reconcile rebuilds the slots from AWS
    tags, again and again: an address reconcile cannot vouch for is placed already spent, in one step, so not a
    single lease lands on it (a placement followed by a separate "mark it spent" call left a window)."""
    def lose_redis_and_rebuild() -> None:
        rig.client.flushall()
        rebuilt = rig.reconciler().run(fix=True)
        assert [d.kind for d in rebuilt] == ["slot_missing"] * 2

    lose_redis_and_rebuild()  # from here on no address may take a send: none is ever rotated
    ctx = multiprocessing.get_context("fork")
    stop = ctx.Event()
    outs = [tmp_path / f"sender-{n}.json" for n in range(4)]
    senders = [ctx.Process(target=workers.lease_until, args=(rig.url, rig.host, stop, str(out))) for out in outs]
    for sender in senders:
        sender.start()
    try:
        for _ in range(10):
            lose_redis_and_rebuild()
    finally:
        stop.set()
        for sender in senders:
            sender.join(timeout=30)
    reports = [json.loads(out.read_text()) for out in outs]
    assert all(report["leases"] > 0 for report in reports)
    assert [lease for report in reports for lease in report["on_slots"]] == []


def test_reconcile_never_resets_a_rotation_a_slow_rotator_published_meanwhile(rig: Rig,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A rotator too slow to refresh its heartbeat looks gone. Reconcile reads the slot "rotating"; before it acts,
    the rotator publishes and senders lease the new address. Finishing the "abandoned" rotation must then change
    nothing: it is fenced on the generation reconcile saw, so the address keeps its used count and its budget."""
    seen: list[Any] = []

    def read_redis_mid_rotation(step: str) -> None:
        if step == "park-tag":  # associated, tagged active, not yet published: what a reconcile could read
            seen.append(rig.pool.status(rig.host)[0])
            time.sleep(0.2)  # longer than the heartbeat: the rotator looks gone

    set_used(rig.pool, rig.host, 0, rig.pool.slots.slot_status(rig.host, 0).budget)
    slow = rig.rotator("slow", checkpoint=read_redis_mid_rotation, heartbeat_s=0.05)
    [rotation] = slow.rotate_ready(rig.host)
    assert rotation.outcome == ROTATED and seen[0].slots[0].state == "rotating"
    rig.pool.slots.retire(rig.host, 1)  # every lease now goes to slot 0's new address
    for _ in range(2):
        rig.pool.lease(rig.host).release()
    published = rig.pool.slots.slot_status(rig.host, 0)
    assert (published.public_ip, published.used) == (rotation.new_ip, 2)

    monkeypatch.setattr(Reconciler, "_slots", lambda self, spec: {s.slot: s for s in seen[0].slots})
    rig.reconciler().run(fix=True)
    after = rig.pool.slots.slot_status(rig.host, 0)
    assert (after.public_ip, after.used, after.generation) == (rotation.new_ip, 2, published.generation)
