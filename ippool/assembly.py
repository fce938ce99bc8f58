"""The composition root of the pool machinery: one place that wires the slot store, records, denylist, parker,
reaper, rotator, reconciler, pool lifecycle (create/destroy) and worker loop from a Redis client, an AWS adapter,
the hosts (`sendhost.model.SenderHost`), a clock and the pool name. The CLI, the simulation, the tests and the
benches all build through it.

An AWS adapter speaks to one region, so hosts in several regions get one `PoolMachinery` per region
(`build_regional`): each acts on its own region's hosts through its own adapter, and all share one Redis.
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
from ippool.parking import Parker, Reaper, no_checkpoint
from ippool.pool import Pool
from ippool.pool_lifecycle import PoolLifecycle
from ippool.quota_readings import QuotaReadings
from ippool.reconcile import Difference, Reconciler
from ippool.records import PoolRecords
from ippool.rotator import DEFAULT_MAX_DRAWS, Rotator
from ippool.screen import Screen, no_screen
from ippool.slot_store import SlotStore
from ippool.spec import DEFAULT_POOL_NAME
from ippool.worker_loop import Lane, Worker
from sendhost.model import SenderHost

Checkpoint = Callable[[str], None]


@dataclass
class PoolMachinery:
    """The pool's working parts over one Redis, one AWS adapter and one set of hosts.

    `clock` (epoch seconds) drives parking deadlines, the denylist and reconcile's grace; `pool.slots` reads Redis
    TIME unless the machinery was built with `store_clock`.
    """

    pool: Pool
    aws: Ec2Adapter
    specs: Mapping[str, SenderHost]
    clock: Callable[[], float]
    pool_name: str = DEFAULT_POOL_NAME
    screen: Screen = no_screen
    sleep: Callable[[float], None] = time.sleep  # `pool destroy` waits out AWS's PTR release delay with it
    client: Any = field(init=False)  # the Redis client under `pool`
    slots: SlotStore = field(init=False)  # the fenced slot store `pool` composes

    def __post_init__(self) -> None:
        self.client, self.slots = self.pool.client, self.pool.slots

    @cached_property
    def records(self) -> PoolRecords:
        return PoolRecords(self.client, self.clock)

    @cached_property
    def denylist(self) -> Denylist:
        return Denylist(self.client, self.clock)

    def parker(self, aws: Ec2Adapter | None = None) -> Parker:
        return Parker(aws or self.aws, self.records, self.pool_name)

    def reaper(self, *, aws: Ec2Adapter | None = None, checkpoint: Checkpoint = no_checkpoint) -> Reaper:
        return Reaper(aws or self.aws, self.denylist, self.records, self.clock, pool_name=self.pool_name,
                      checkpoint=checkpoint)

    def rotator(self, owner: str, *, aws: Ec2Adapter | None = None, screen: Screen | None = None,
                max_draws: int = DEFAULT_MAX_DRAWS, checkpoint: Checkpoint = no_checkpoint,
                heartbeat_s: float = 30.0) -> Rotator:
        return Rotator(self.slots, aws or self.aws, self.specs, self.denylist, self.records, self.clock, owner,
                       pool_name=self.pool_name, screen=screen if screen is not None else self.screen,
                       max_draws=max_draws, checkpoint=checkpoint, heartbeat_s=heartbeat_s)

    def reconciler(self, *, aws: Ec2Adapter | None = None, grace_s: float = 120.0, stale_s: float = 600.0,
                   checkpoint: Checkpoint = no_checkpoint) -> Reconciler:
        return Reconciler(self.slots, aws or self.aws, self.specs, self.records,
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


def build_machinery(client: Any, aws: Ec2Adapter, specs: Mapping[str, SenderHost], clock: Callable[[], float],
                    pool_name: str = DEFAULT_POOL_NAME, *, store_clock: Callable[[], float] | None = None,
                    rng: random.Random | None = None, screen: Screen | None = None) -> PoolMachinery:
    """The pool machinery on `client` (a `redis.Redis` or `RedisCluster`) and `aws` for the hosts of `specs`.

    `store_clock` replaces Redis TIME in the slot store's scripts (tests and the simulator); `rng` draws budgets.
    """
    return PoolMachinery(Pool(client, clock=store_clock, rng=rng), aws, dict(specs), clock, pool_name,
                         screen if screen is not None else no_screen)


@dataclass
class RegionalPools:
    """The pool machinery of hosts in one or more regions: one `PoolMachinery` per region, each holding only that
    region's hosts and that region's adapter, all over one Redis (so one slot store, records and denylist).

    A host is always served by the machinery of its own region: there is no default adapter a host could fall
    through to.
    """

    regions: dict[str, PoolMachinery]  # region -> the machinery of the hosts in it

    def of_host(self, host: str) -> PoolMachinery:
        """The machinery of `host`'s region (KeyError for a host of no region: callers check the inventory)."""
        for machinery in self.regions.values():
            if host in machinery.specs:
                return machinery
        raise KeyError(host)

    @property
    def shared(self) -> PoolMachinery:
        """A machinery for the parts that live only in Redis (slot store, records, denylist): every region's are
        the same."""
        return next(iter(self.regions.values()))

    @property
    def specs(self) -> dict[str, SenderHost]:
        return {name: spec for machinery in self.regions.values() for name, spec in machinery.specs.items()}

    def adapters(self) -> list[Ec2Adapter]:
        return [machinery.aws for machinery in self.regions.values()]

    def reconcile(self, hosts: Sequence[str] | None = None, *, fix: bool = False,
                  grace_s: float = 120.0) -> list[Difference]:
        """Each region's reconciler over its own hosts among `hosts` (default: every host)."""
        found: list[Difference] = []
        for machinery in self.regions.values():
            mine = [h for h in (hosts if hosts is not None else machinery.specs) if h in machinery.specs]
            if mine:
                found += machinery.reconciler(grace_s=grace_s).run(mine, fix=fix)
        return found

    def worker(self, owner: str, *, interval_s: float = 10.0, reconcile: bool = True) -> Worker:
        """One worker loop over every host, each rotated and reaped through its own region's adapter; with
        `reconcile`, every region is reconciled (`--fix`) at start and whenever a host vanishes from Redis. It
        records the EIP quota reading of every region."""
        first, *others = [Lane(m.rotator(owner), m.reaper(), list(m.specs)) for m in self.regions.values()]
        return Worker(first.rotator, first.reaper, first.hosts, interval_s=interval_s,
                      reconcile=(lambda: self.reconcile(fix=True)) if reconcile else None, more_lanes=others,
                      record_quota=self._record_quotas)

    def _record_quotas(self) -> None:
        """Record each region's EIP quota reading; one region's failure leaves the others' readings fresh and is
        raised after them (the worker logs it)."""
        readings = QuotaReadings(self.shared.client, self.shared.clock)
        failures = []
        for aws in self.adapters():
            try:
                readings.take(aws)
            except Exception as exc:  # raised below, after the other regions had their turn
                failures.append(exc)
        if failures:
            raise failures[0]


def build_regional(client: Any, adapters: Mapping[str, Ec2Adapter], specs: Mapping[str, Mapping[str, SenderHost]],
                   clock: Callable[[], float], pool_name: str = DEFAULT_POOL_NAME, *,
                   screen: Screen | None = None) -> RegionalPools:
    """The machinery of every region of `adapters` (region -> its adapter), each over its own hosts of `specs`
    (region -> host name -> spec); one `Pool` on `client` under all of them."""
    if not adapters:
        raise ValueError("no region: the pool machinery needs at least one region's adapter")
    pool = Pool(client)
    return RegionalPools({region: PoolMachinery(pool, aws, dict(specs.get(region, {})), clock, pool_name,
                                                screen if screen is not None else no_screen)
                          for region, aws in adapters.items()})
