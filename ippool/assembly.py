"""The composition root of the pool machinery: one place that wires the slot store, ledger, denylist, parker,
reaper, rotator, reconciler, pool lifecycle (create/destroy) and worker loop from a Redis client, an AWS adapter,
the host specs, a clock and the pool name. The CLI, the simulation, the tests and the benches all build through it.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from ippool.aws.adapter import Ec2Adapter
from ippool.denylist import Denylist
from ippool.ledger import Ledger
from ippool.parking import Parker, Reaper, no_checkpoint
from ippool.pool import Pool
from ippool.pool_lifecycle import PoolLifecycle
from ippool.quota_readings import QuotaReadings
from ippool.reconcile import Reconciler
from ippool.rotator import DEFAULT_MAX_DRAWS, Rotator
from ippool.screen import Screen, no_screen
from ippool.slot_store import SlotStore
from ippool.spec import DEFAULT_POOL_NAME, HostSpec
from ippool.worker_loop import Worker

Checkpoint = Callable[[str], None]


@dataclass
class PoolMachinery:
    """The pool's working parts over one Redis, one AWS adapter and one set of hosts.

    `clock` (epoch seconds) drives parking deadlines, the denylist and reconcile's grace; `pool.slots` reads Redis
    TIME unless the machinery was built with `store_clock`.
    """

    pool: Pool
    aws: Ec2Adapter
    specs: Mapping[str, HostSpec]
    clock: Callable[[], float]
    pool_name: str = DEFAULT_POOL_NAME
    screen: Screen = no_screen
    sleep: Callable[[float], None] = time.sleep  # `pool destroy` waits out AWS's PTR release delay with it
    client: Any = field(init=False)  # the Redis client under `pool`
    slots: SlotStore = field(init=False)  # the fenced slot store `pool` composes

    def __post_init__(self) -> None:
        self.client, self.slots = self.pool.client, self.pool.slots

    @cached_property
    def ledger(self) -> Ledger:
        return Ledger(self.client, self.clock)

    @cached_property
    def denylist(self) -> Denylist:
        return Denylist(self.client, self.clock)

    def parker(self, aws: Ec2Adapter | None = None) -> Parker:
        return Parker(aws or self.aws, self.ledger, self.pool_name)

    def reaper(self, *, aws: Ec2Adapter | None = None, checkpoint: Checkpoint = no_checkpoint) -> Reaper:
        return Reaper(aws or self.aws, self.denylist, self.ledger, self.clock, pool_name=self.pool_name,
                      checkpoint=checkpoint)

    def rotator(self, owner: str, *, aws: Ec2Adapter | None = None, screen: Screen | None = None,
                max_draws: int = DEFAULT_MAX_DRAWS, checkpoint: Checkpoint = no_checkpoint,
                heartbeat_s: float = 30.0) -> Rotator:
        return Rotator(self.slots, aws or self.aws, self.specs, self.denylist, self.ledger, self.clock, owner,
                       pool_name=self.pool_name, screen=screen if screen is not None else self.screen,
                       max_draws=max_draws, checkpoint=checkpoint, heartbeat_s=heartbeat_s)

    def reconciler(self, *, aws: Ec2Adapter | None = None, grace_s: float = 120.0, stale_s: float = 600.0,
                   checkpoint: Checkpoint = no_checkpoint) -> Reconciler:
        return Reconciler(self.slots, aws or self.aws, self.specs, self.ledger,
                          self.reaper(aws=aws, checkpoint=checkpoint), self.clock, pool_name=self.pool_name,
                          grace_s=grace_s, stale_s=stale_s)

    def lifecycle(self, *, aws: Ec2Adapter | None = None) -> PoolLifecycle:
        """`pool create` / `pool destroy` for the hosts of `specs`."""
        return PoolLifecycle(aws or self.aws, self.slots, self.reaper(aws=aws), pool_name=self.pool_name,
                             clock=self.clock, sleep=self.sleep)

    def worker(self, owner: str, *, hosts: Sequence[str] | None = None, interval_s: float = 10.0,
               reconcile: bool = True) -> Worker:
        """The worker loop over `hosts` (default: every host of `specs`); with `reconcile`, a `reconcile --fix` at
        start and whenever a host vanishes from Redis. It records the EIP quota reading of `aws`'s region."""
        reconciler = self.reconciler() if reconcile else None
        readings = QuotaReadings(self.client, self.clock)
        return Worker(self.rotator(owner), self.reaper(), list(hosts if hosts is not None else self.specs),
                      interval_s=interval_s,
                      reconcile=(lambda: reconciler.run(fix=True)) if reconciler is not None else None,
                      record_quota=lambda: readings.take(self.aws))


def build_machinery(client: Any, aws: Ec2Adapter, specs: Mapping[str, HostSpec], clock: Callable[[], float],
                    pool_name: str = DEFAULT_POOL_NAME, *, store_clock: Callable[[], float] | None = None,
                    rng: random.Random | None = None, screen: Screen | None = None) -> PoolMachinery:
    """The pool machinery on `client` (a `redis.Redis` or `RedisCluster`) and `aws` for the hosts of `specs`.

    `store_clock` replaces Redis TIME in the slot store's scripts (tests and the simulator); `rng` draws budgets.
    """
    return PoolMachinery(Pool(client, clock=store_clock, rng=rng), aws, dict(specs), clock, pool_name,
                         screen if screen is not None else no_screen)
