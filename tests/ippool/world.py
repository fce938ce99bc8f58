"""A pool world for rotation tests: real Redis, moto's EC2 (in-process) behind the real adapter, a fake clock.

Import the fixtures into a test module (`from tests.ippool.world import world, ...`).
"""
# ruff: noqa: F401, F811  (fixtures are re-exported and requested by name)

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
import redis

from ippool import Pool
from ippool.aws import Ec2Adapter
from ippool.denylist import Denylist
from ippool.ledger import Ledger
from ippool.provisioner import Provisioner
from ippool.reaper import Reaper
from ippool.rotator import Rotator
from ippool.screen import Screen, no_screen
from ippool.spec import HostSpec
from tests.support.aws import (
    REGION,
    AdapterFactory,
    CallRecorder,
    aws_calls,
    create_host,
    make_adapter,
    moto_aws,
    sleeper,
)
from tests.support.clock import FakeClock
from tests.support.ippool_fakes import MotoGaps


@dataclass
class World:
    client: Any
    pool: Pool
    aws: Ec2Adapter
    clock: FakeClock
    on_call: Callable[[str], None] | None = None
    specs: dict[str, HostSpec] = field(default_factory=dict)
    _made: list[Ec2Adapter] = field(default_factory=list)

    def gaps(self, quota: int | None = None) -> MotoGaps:
        """The adapter over moto with the named fakes for PTR and the EIP quota."""
        adapter = MotoGaps(lambda: boto3.Session(region_name=REGION), REGION, sleep=self.clock.sleep,
                           clock=self.clock, on_call=self.on_call, quota=quota)
        self._made.append(adapter)
        return adapter

    @property
    def ledger(self) -> Ledger:
        return Ledger(self.client, self.clock)

    @property
    def denylist(self) -> Denylist:
        return Denylist(self.client, self.clock)

    def rotator(self, owner: str = "test-rotator", screen: Screen = no_screen, max_draws: int = 4,
                checkpoint: Callable[[str], None] | None = None, aws: Ec2Adapter | None = None) -> Rotator:
        extra: dict[str, Any] = {} if checkpoint is None else {"checkpoint": checkpoint}
        return Rotator(self.pool, aws or self.aws, self.specs, self.denylist, self.ledger, self.clock, owner,
                       screen=screen, max_draws=max_draws, **extra)

    def reaper(self, aws: Ec2Adapter | None = None) -> Reaper:
        return Reaper(aws or self.aws, self.denylist, self.ledger, self.clock)

    def provisioner(self, aws: Ec2Adapter | None = None) -> Provisioner:
        return Provisioner(aws or self.aws, self.pool, self.reaper(aws))

    def add_host(self, name: str = "sender-1", slots: int = 2, instance_type: str = "c5.large",
                 **policy: Any) -> HostSpec:
        instance_id, _eni = create_host(instance_type)
        spec = HostSpec(name=name, instance_id=instance_id, primary_ip="10.20.1.250", slots=slots, **policy)
        self.specs[name] = spec
        return spec

    def exhaust(self, host: str, slot: int) -> None:
        """Spend a slot's whole budget with no lease live: it is ready to rotate."""
        budget = self.pool.slot_status(host, slot).budget
        self.pool.set_used(host, slot, budget)


@pytest.fixture
def world(moto_aws: None, redis_url: str, clock: FakeClock, make_adapter: AdapterFactory,
          aws_calls: CallRecorder) -> Iterator[World]:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    pool = Pool(client, clock=clock, rng=random.Random(99))
    made = World(client, pool, make_adapter(), clock, on_call=aws_calls)
    yield made
    for adapter in made._made:
        adapter.close()
    client.close()
