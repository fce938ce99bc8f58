"""Bodies of the real processes the concurrency tests start: senders leasing in a loop, and rotators."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any

from ippool import Pool


def lease_loop(backend: Any, host: str, iterations: int, out_path: str, hold_s: float = 0.0,
               seed: int = 0) -> None:
    """Lease, hold for up to `hold_s`, release, `iterations` times; write every lease and any exception."""
    rng = random.Random(seed)
    client = backend.client()
    pool = Pool(client)
    records: list[list[Any]] = []
    errors: list[str] = []
    for _ in range(iterations):
        try:
            lease = pool.lease(host, ttl_s=30)
            records.append([lease.fallback, lease.slot, lease.generation, lease.public_ip, lease.source_ip])
            if hold_s:
                time.sleep(rng.uniform(0, hold_s))
            lease.release()
        except BaseException as error:  # the test asserts there are none
            errors.append(repr(error))
    client.close()
    Path(out_path).write_text(json.dumps({"records": records, "errors": errors}))


def rotator_loop(backend: Any, host: str, rotator_id: int, out_path: str, stop: Any) -> None:
    """Rotate every ready slot until `stop` is set, racing other rotators; write what was claimed and published.

    Addresses are made up (100.64.0.0/10, shared address space): no AWS here, only the Redis side of rotation.
    """
    client = backend.client()
    pool = Pool(client, rng=random.Random(rotator_id))
    claimed: list[list[Any]] = []
    published: list[list[Any]] = []
    refused = 0
    counter = 0
    while not stop.is_set():
        for ready in pool.slots.ready_slots(host):
            snapshot = pool.slots.mark_rotating(host, ready.slot, ready.generation)
            if snapshot is None:
                refused += 1
                continue
            claimed.append([ready.slot, snapshot.generation, snapshot.public_ip, snapshot.used, snapshot.budget])
            counter += 1
            public_ip = f"100.{64 + rotator_id}.{counter // 256}.{counter % 256}"
            placed = pool.slots.publish(host, ready.slot, ready.generation,
                                        private_ip=snapshot.private_ip or "10.0.1.1", public_ip=public_ip,
                                        allocation_id=f"eipalloc-{rotator_id}-{counter}")
            published.append([public_ip, None if placed is None else placed.generation,
                              None if placed is None else placed.budget])
        time.sleep(0.002)
    client.close()
    Path(out_path).write_text(json.dumps({"claimed": claimed, "published": published, "refused": refused}))


def hold_until_killed(backend: Any, host: str, ttl_s: float, conn: Any) -> None:
    """Lease and never release: report the lease, then wait to be SIGKILLed."""
    client = backend.client()
    lease = Pool(client).lease(host, ttl_s=ttl_s)
    conn.send([lease.slot, lease.member, lease.fallback])
    time.sleep(120)


def lease_for(url: str, host: str, seconds: float, out_path: str, socket_timeout: float) -> None:
    """Lease and release in a loop for `seconds` through `Pool.from_url`; write (start, fallback, duration,
    reason) per lease and any exception."""
    records: list[list[Any]] = []
    errors: list[str] = []
    with Pool.from_url(url, socket_timeout=socket_timeout) as pool:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            started = time.monotonic()
            try:
                with pool.lease(host, ttl_s=5, primary_ip="10.0.0.10") as lease:
                    records.append([time.time(), lease.fallback, time.monotonic() - started, lease.reason])
            except BaseException as error:  # the test asserts there are none
                errors.append(repr(error))
            time.sleep(0.005)
    Path(out_path).write_text(json.dumps({"records": records, "errors": errors}))


def lease_until(url: str, host: str, stop: Any, out_path: str) -> None:
    """Lease and release as fast as possible until `stop` is set; write every lease that got a slot."""
    pool = Pool.from_url(url)
    on_slots: list[list[Any]] = []
    count = 0
    while not stop.is_set():
        lease = pool.lease(host)
        count += 1
        if not lease.fallback:
            on_slots.append([lease.slot, lease.public_ip])
        lease.release()
    pool.close()
    Path(out_path).write_text(json.dumps({"leases": count, "on_slots": on_slots}))
