"""`sendhost pool exporter`: Prometheus text over HTTP, values read from a real Redis at scrape time."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
import urllib.request

import redis
from prometheus_client.parser import text_string_to_metric_families

from ippool import Pool
from ippool.denylist import Denylist
from ippool.metrics import PoolCollector
from ippool.quota_readings import QuotaReadings
from ippool.records import PoolRecords
from tests.conftest import REPO_ROOT
from tests.support.net import free_port


def scrape(url: str, deadline_s: float = 20) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                body = response.read().decode()
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(body) for sample in family.samples}


class FixedQuota:
    """Named fake of the AWS adapter's quota reads: the region's quota and the EIPs the account holds there."""

    def __init__(self, region: str, quota: int, held: int) -> None:
        self.region, self.quota, self.held = region, quota, held

    def eip_quota(self) -> int:
        return self.quota

    def count_region_addresses(self) -> int:
        return self.held


def test_exporter_serves_pool_metrics_from_redis(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    pool = Pool(client, rng=random.Random(3))
    pool.register_host("sender-1", "10.0.0.10", budget=(2, 2))
    pool.put_address("sender-1", 0, private_ip="10.0.1.1", public_ip="203.0.113.1", allocation_id="eipalloc-1")
    pool.put_address("sender-1", 1, private_ip="10.0.1.2", public_ip="203.0.113.2", allocation_id="eipalloc-2")
    leases = [pool.lease("sender-1", ttl_s=300) for _ in range(5)]  # 4 on slots (budget 2 each), 1 fallback
    assert [lease.fallback for lease in leases].count(True) == 1
    records = PoolRecords(client, time.time)
    records.rotated("sender-1")
    records.count("sender-1", "redraws:denylist", 3)
    records.count("sender-1", "reconcile:leaked")
    records.park("sender-1", "eipalloc-9", "198.51.100.9", 0, time.time() + 600)
    Denylist(client, time.time).add("sender-1", "198.51.100.8")
    records.throttled("AllocateAddress")
    QuotaReadings(client, lambda: 1_796_000_000.0).take(FixedQuota("eu-west-1", 5, 4))
    client.close()

    port = free_port()
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO_ROOT), "REDIS_URL": redis_url}
    process = subprocess.Popen([sys.executable, "-m", "toolkit", "pool", "exporter", "--listen", f"127.0.0.1:{port}"],
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        metrics = scrape(f"http://127.0.0.1:{port}/metrics")
        host = (("host", "sender-1"),)
        assert metrics[("sendhost_pool_leases_total", host)] == 4
        assert metrics[("sendhost_pool_fallback_leases_total", host)] == 1
        assert metrics[("sendhost_pool_slots", (("host", "sender-1"), ("state", "retiring")))] == 2
        assert metrics[("sendhost_pool_slots", (("host", "sender-1"), ("state", "active")))] == 0
        assert metrics[("sendhost_pool_rotations_total", host)] == 1
        assert metrics[("sendhost_pool_redraws_total", (("host", "sender-1"), ("reason", "denylist")))] == 3
        assert metrics[("sendhost_pool_reconcile_differences_total", (("host", "sender-1"), ("kind", "leaked")))] == 1
        assert metrics[("sendhost_pool_parked_eips", host)] == 1
        assert metrics[("sendhost_pool_denylist_size", host)] == 1
        assert metrics[("sendhost_pool_aws_throttles_total", ())] == 1
        assert abs(metrics[("sendhost_pool_last_rotation_timestamp_seconds", host)] - time.time()) < 60
        region = (("region", "eu-west-1"),)
        assert metrics[("sendhost_pool_eip_quota", region)] == 5
        assert metrics[("sendhost_pool_eip_allocated", region)] == 4
        assert metrics[("sendhost_pool_eip_quota_read_timestamp_seconds", region)] == 1_796_000_000.0
    finally:
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=10)
        _out, err = process.communicate()
    assert code == 0, err


def test_leases_total_keeps_the_sends_of_replaced_addresses(redis_url: str) -> None:
    """Leases are counted in the slots' used counts (no write on the hot path), so a rotation that resets a slot's
    used must carry its sends over: the counter never goes back."""
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    pool = Pool(client, rng=random.Random(3))
    pool.register_host("sender-1", "10.0.0.10", budget=(3, 3))
    pool.put_address("sender-1", 0, private_ip="10.0.1.1", public_ip="203.0.113.1", allocation_id="eipalloc-1")

    def leases_total() -> float:
        [family] = [f for f in PoolCollector(client).collect() if f.name == "sendhost_pool_leases"]
        return sum(sample.value for sample in family.samples if sample.name == "sendhost_pool_leases_total")

    for _ in range(3):
        pool.lease("sender-1").release()
    assert leases_total() == 3
    [ready] = pool.slots.ready_slots("sender-1")
    assert pool.slots.mark_rotating("sender-1", 0, ready.generation) is not None
    assert pool.slots.publish("sender-1", 0, ready.generation, private_ip="10.0.1.1", public_ip="203.0.113.7",
                        allocation_id="eipalloc-7") is not None
    pool.lease("sender-1").release()
    assert leases_total() == 4
    pool.put_address("sender-1", 0, private_ip="10.0.1.1", public_ip="203.0.113.8", allocation_id="eipalloc-8")
    assert leases_total() == 4
    client.close()
