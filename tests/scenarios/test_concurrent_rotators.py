"""Several rotators at once: real processes racing for the same ready slots rotate each exactly once."""

from __future__ import annotations

import multiprocessing
import random
import time
from pathlib import Path
from typing import Any

import boto3
import pytest
import redis

from ippool.assembly import build_machinery
from ippool.aws.adapter import Ec2Adapter
from ippool.rotator import LOST_CLAIM, ROTATED
from sendhost.model import PoolPolicy, SenderHost
from tests.support.aws import FAKE_CREDENTIALS, REGION
from tests.support.ippool_cli import server_instance, unique_host
from tests.support.ippool_invariants import violations
from tests.support.ippool_slots import set_used

CTX = multiprocessing.get_context("spawn")
SLOTS = 4


def adapter(moto_url: str) -> Ec2Adapter:
    session = boto3.Session(region_name=REGION, **FAKE_CREDENTIALS)
    return Ec2Adapter(lambda: session, REGION, endpoint_url=moto_url)


def rotate_in_child(moto_url: str, redis_url: str, spec: SenderHost, start: Any, out: str) -> None:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    aws = adapter(moto_url)
    rotator = build_machinery(client, aws, {spec.name: spec}, time.time).rotator(f"racer-{out[-5:]}")
    rotator.eni(spec)  # look the ENI up before the start line, so both race on the slots alone
    # What `rotate_ready` does, with the ready slots read before the start line: both racers hold every slot at the
    # same generation, so each slot is claimed by both, whichever of them comes second.
    ready = rotator.slots.ready_slots(spec.name, now=time.time())
    # The start line is both racers ready, however long each took to start: a fixed delay lost its race on a busy
    # machine (one racer done with a slot before the other reached it, so no claim of it was lost).
    start.wait(timeout=120)
    results = [rotator.rotate_slot(spec.name, slot) for slot in ready]
    Path(out).write_text("\n".join(f"{r.slot} {r.outcome}" for r in results))
    aws.close()
    client.close()


@pytest.mark.slow
def test_two_rotator_processes_rotate_each_ready_slot_once(moto_url: str, redis_url: str, tmp_path: Path) -> None:
    spec = SenderHost(unique_host(), server_instance(moto_url), REGION, "10.30.1.250", PoolPolicy(SLOTS))
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    aws = adapter(moto_url)
    machinery = build_machinery(client, aws, {spec.name: spec}, time.time, rng=random.Random(2))
    pool = machinery.pool
    try:
        machinery.lifecycle().create(spec, SLOTS)
        for slot in range(SLOTS):
            set_used(pool, spec.name, slot, pool.slots.slot_status(spec.name, slot).budget)
        outs = [str(tmp_path / f"racer{n}.txt") for n in range(2)]
        start = CTX.Barrier(len(outs))
        racers = [CTX.Process(target=rotate_in_child, args=(moto_url, redis_url, spec, start, out)) for out in outs]
        for racer in racers:
            racer.start()
        for racer in racers:
            racer.join(timeout=120)
            assert racer.exitcode == 0
        outcomes = [line.split() for out in outs for line in Path(out).read_text().splitlines()]
        rotated = sorted(int(slot) for slot, outcome in outcomes if outcome == ROTATED)
        assert rotated == list(range(SLOTS))  # each slot once, whoever won it
        lost = sorted(int(slot) for slot, outcome in outcomes if outcome == LOST_CLAIM)
        assert lost == list(range(SLOTS))  # and the other racer's claim on it really lost: a race happened
        assert all(s.state == "active" and s.generation == 2 for s in pool.status(spec.name)[0].slots)
        assert violations(pool, aws, spec.name, time.time()) == []
    finally:
        machinery.lifecycle().destroy(spec)
        aws.close()
        client.close()
