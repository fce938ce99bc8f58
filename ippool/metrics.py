"""Prometheus metrics of the pools, read from Redis at each scrape (`sendhost pool exporter`).

Every value comes from Redis, so any number of workers and senders add up, and an exporter restart loses nothing.
Counters (`*_total`) only grow, except after Redis loses its data. The Elastic IP quota and usage per region are
the worker's last reading (ippool.quota_readings), with its timestamp: reading AWS at each scrape would spend its
Service Quotas request rate.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ippool.denylist import Denylist
from ippool.keys import HostKeys
from ippool.quota_readings import QuotaReadings
from ippool.records import PoolRecords
from ippool.slot_store import SlotStore
from ippool.states import SlotState
from ippool.status import text

PREFIX = "sendhost_pool"


class PoolCollector(Collector):
    """Collects the pool's metrics from Redis on every scrape."""

    def __init__(self, client: Any, clock: Callable[[], float] = time.time) -> None:
        self._client = client
        self._clock = clock

    def collect(self) -> Iterator[Metric]:
        pool, records = SlotStore(self._client), PoolRecords(self._client, self._clock)
        denylist = Denylist(self._client, self._clock)
        slots = GaugeMetricFamily(f"{PREFIX}_slots", "Slots by state (active, retiring, ready, rotating, empty).",
                                  labels=["host", "state"])
        leases = CounterMetricFamily(f"{PREFIX}_leases", "Leases granted on a slot (the used counts of the slots' "
                                     "addresses plus those of the addresses they replaced).", labels=["host"])
        fallbacks = CounterMetricFamily(f"{PREFIX}_fallback_leases", "Leases that fell back to the primary IP "
                                        "because no slot could take a send (counted in Redis).", labels=["host"])
        rotations = CounterMetricFamily(f"{PREFIX}_rotations", "Slots rotated to a fresh address.", labels=["host"])
        redraws = CounterMetricFamily(f"{PREFIX}_redraws", "Drawn addresses rejected and parked, by reason.",
                                      labels=["host", "reason"])
        parked = GaugeMetricFamily(f"{PREFIX}_parked_eips", "Elastic IPs parked, waiting for the reaper.",
                                   labels=["host"])
        denied = GaugeMetricFamily(f"{PREFIX}_denylist_size", "Addresses denied for 7 days.", labels=["host"])
        last = GaugeMetricFamily(f"{PREFIX}_last_rotation_timestamp_seconds", "When the host last rotated a slot.",
                                 labels=["host"])
        differences = CounterMetricFamily(f"{PREFIX}_reconcile_differences", "Differences reconcile found, by kind.",
                                          labels=["host", "kind"])
        now_ms = int(self._clock() * 1000)
        for state in pool.status(now=now_ms / 1000):
            host = state.host
            for name in SlotState:
                slots.add_metric([host, str(name)], sum(1 for s in state.slots if s.state == name))
            meta = {text(k): text(v) for k, v in self._client.hgetall(HostKeys(host).meta).items()}
            # Counted without a write on the hot path: the lease already counts in its slot's used.
            leases.add_metric([host], float(meta.get("leases_retired", 0)) + sum(s.used for s in state.slots))
            # the counter's own key, plus what the meta hash counted before it had one (a counter never drops)
            fallbacks.add_metric([host], float(meta.get("fallbacks_total", 0))
                                 + float(self._client.get(HostKeys(host).fallbacks) or 0))
            stats = records.stats(host)
            rotations.add_metric([host], stats.get("rotations", 0.0))
            for key, value in stats.items():
                if key.startswith("redraws:"):
                    redraws.add_metric([host, key.split(":", 1)[1]], value)
                elif key.startswith("reconcile:"):
                    differences.add_metric([host, key.split(":", 1)[1]], value)
            if "last_rotation_ms" in stats:
                last.add_metric([host], stats["last_rotation_ms"] / 1000)
            parked.add_metric([host], len(records.parked(host)))
            denied.add_metric([host], denylist.size(host))
        throttles = CounterMetricFamily(f"{PREFIX}_aws_throttles", "AWS calls answered RequestLimitExceeded "
                                        "(retried with backoff).")
        throttles.add_metric([], records.throttles())
        yield from (slots, leases, fallbacks, rotations, redraws, parked, denied, last, differences, throttles)
        yield from self._quota()

    def _quota(self) -> Iterator[Metric]:
        quota = GaugeMetricFamily(f"{PREFIX}_eip_quota", "The region's applied Elastic IP quota (Service Quotas "
                                  "ec2/L-0263D0A3), as the worker last read it.", labels=["region"])
        allocated = GaugeMetricFamily(f"{PREFIX}_eip_allocated", "Elastic IPs the account holds in the region, "
                                      "ours or not (all count against the quota), as the worker last read them.",
                                      labels=["region"])
        read_at = GaugeMetricFamily(f"{PREFIX}_eip_quota_read_timestamp_seconds", "When the worker last read the "
                                    "region's quota and EIPs; an old one means the two numbers above are old.",
                                    labels=["region"])
        for reading in QuotaReadings(self._client, self._clock).all():
            quota.add_metric([reading.region], reading.quota)
            allocated.add_metric([reading.region], reading.allocated)
            read_at.add_metric([reading.region], reading.read_at)
        yield from (quota, allocated, read_at)
