"""The processes of the chaos test: senders leasing through `Pool`, and pool workers (the real `Worker`).

    python -m tests.scenarios.chaos_procs sender REDIS_URL HOST STOP_FILE OUT_FILE
    python -m tests.scenarios.chaos_procs worker REDIS_URL HOST INSTANCE_ID OUT_FILE

A sender leases until STOP_FILE exists, then writes {public_ip: sends, "fallback": n, "max_wait_s": s} to OUT_FILE.
A worker appends one line per finished rotation to OUT_FILE (so a SIGKILLed worker's count survives it) and runs
until SIGTERM. AWS is the moto server on AWS_ENDPOINT_URL; budgets, parking and heartbeats are short so hundreds of
rotations fit in a minute. The workers' adapter is `MotoGaps`, the named fake that gives moto AWS's reassociation.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import time
import traceback
from collections import Counter
from pathlib import Path

import boto3

from ippool import Pool
from ippool.assembly import build_machinery
from ippool.rotator import ROTATED
from ippool.worker_loop import CycleReport, Worker
from sendhost.model import PoolPolicy, SenderHost
from tests.support.ippool_fakes import MotoGaps

SOCKET_TIMEOUT_S = 0.5
SLOTS = 4
BUDGET = (2, 4)
PARK_MINUTES = 0.05  # 3 s
HEARTBEAT_S = 1.0
GRACE_S = 2.0
STALE_S = 10.0


def spec(host: str, instance_id: str) -> SenderHost:
    return SenderHost(host, instance_id, "us-east-1", "10.30.1.250",
                      PoolPolicy(SLOTS, budget=BUDGET, park_minutes=PARK_MINUTES))


def sender(url: str, host: str, stop_file: str, out_file: str) -> None:
    logging.getLogger("ippool").setLevel(logging.ERROR)  # fallbacks are expected here; the test counts them
    pool = Pool.from_url(url, socket_timeout=SOCKET_TIMEOUT_S)
    sends: Counter[str] = Counter()
    max_wait = 0.0
    while not os.path.exists(stop_file):
        started = time.monotonic()
        lease = pool.lease(host, ttl_s=5)
        max_wait = max(max_wait, time.monotonic() - started)
        sends[lease.public_ip or "fallback"] += 1
        time.sleep(0.02)  # the send
        lease.release()
    pool.close()
    Path(out_file).write_text(json.dumps({**sends, "max_wait_s": max_wait}))


def worker(url: str, host: str, instance_id: str, out_file: str) -> None:
    import redis

    client = redis.Redis.from_url(url, decode_responses=True, socket_timeout=5)
    aws = MotoGaps(lambda: boto3.Session(region_name="us-east-1"), "us-east-1",
                   endpoint_url=os.environ["AWS_ENDPOINT_URL"])
    clock = time.time
    specs = {host: spec(host, instance_id)}
    machinery = build_machinery(client, aws, specs, clock)
    reconciler = machinery.reconciler(grace_s=GRACE_S, stale_s=STALE_S)
    runner = Worker(machinery.rotator(f"chaos-{os.getpid()}", heartbeat_s=HEARTBEAT_S), machinery.reaper(), [host],
                    interval_s=0.1, reconcile=lambda: reconciler.run(fix=True), reconcile_every_s=5.0)
    signal.signal(signal.SIGTERM, lambda signum, frame: runner.stop())

    def record(report: CycleReport) -> None:
        done = sum(1 for r in report.rotations if r.outcome == ROTATED)
        if done:
            with open(out_file, "a") as out:
                out.write("r\n" * done)

    try:
        runner.run(on_cycle=record)
    except BaseException:  # keep the reason where the test can show it
        Path(out_file + ".err").write_text(traceback.format_exc())
        raise
    aws.close()
    client.close()


if __name__ == "__main__":
    role, *args = sys.argv[1:]
    if role == "sender":
        sender(*args)
    else:
        worker(*args)
