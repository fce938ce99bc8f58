"""A pool world for rotation tests: real Redis, moto's EC2 (in-process) behind the real adapter, a fake clock, all
wired by ippool's composition root (`ippool.assembly`).

A pytest plugin (tests/conftest.py lists it in `pytest_plugins`): a test asks for the `world` fixture by name.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
import redis

from ippool import Pool
from ippool.assembly import PoolMachinery
from ippool.aws.adapter import Ec2Adapter
from ippool.rotator import Rotator
from sendhost.model import PoolPolicy, SenderHost
from tests.support.aws import REGION, AdapterFactory, CallRecorder, create_host
from tests.support.clock import FakeClock
from tests.support.ippool_fakes import MotoGaps
from tests.support.ippool_slots import set_used

# AWS's delays as the world's fake plays them: a PTR update is PENDING this long, and release answers
# InvalidAddress.PtrSet this long after a reset (AWS: "several minutes").
PTR_DELAY_S = 40.0
PTR_RELEASE_DELAY_S = 300.0


@dataclass
class World(PoolMachinery):
    """The pool machinery of a test (on the fake clock), plus what tests need around it: hosts made in moto, the
    named fakes for what moto lacks, and a way to spend a slot's budget."""

    clock: FakeClock
    on_call: Callable[[str], None] | None = None
    _made: list[Ec2Adapter] = field(default_factory=list)

    def gaps(self, quota: int | None = None, ptr_delay_s: float = PTR_DELAY_S,
             ptr_release_delay_s: float = PTR_RELEASE_DELAY_S, ptr_failure: str | None = None) -> MotoGaps:
        """The adapter over moto with the named fakes for PTR (with AWS's delays, on the fake clock) and the quota."""
        adapter = MotoGaps(lambda: boto3.Session(region_name=REGION), REGION, sleep=self.clock.sleep,
                           clock=self.clock, on_call=self.on_call, quota=quota, ptr_delay_s=ptr_delay_s,
                           ptr_release_delay_s=ptr_release_delay_s, ptr_failure=ptr_failure)
        self._made.append(adapter)
        return adapter

    def rotator(self, owner: str = "test-rotator", **options: Any) -> Rotator:
        return super().rotator(owner, **options)

    def add_host(self, name: str = "sender-1", slots: int = 2, instance_type: str = "c5.large",
                 **policy: Any) -> SenderHost:
        instance_id, _eni = create_host(instance_type)
        # A PTR zone turns PTR on, as `ptr: true` beside `ptr_zone:` does in the inventory.
        pool = PoolPolicy(slots=slots, ptr="ptr_zone" in policy, **policy)
        spec = SenderHost(name=name, instance_id=instance_id, region=REGION, primary_ip="10.20.1.250", pool=pool)
        assert isinstance(self.specs, dict)
        self.specs[name] = spec
        return spec

    def exhaust(self, host: str, slot: int) -> None:
        """Spend a slot's whole budget with no lease live: it is ready to rotate."""
        budget = self.slots.slot_status(host, slot).budget
        set_used(self.slots, host, slot, budget)


@pytest.fixture
def world(moto_aws: None, redis_url: str, clock: FakeClock, make_adapter: AdapterFactory,
          aws_calls: CallRecorder) -> Iterator[World]:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    pool = Pool(client, clock=clock, rng=random.Random(99))
    made = World(pool, make_adapter(), {}, clock, sleep=clock.sleep, on_call=aws_calls)
    yield made
    for adapter in made._made:
        adapter.close()
    client.close()
