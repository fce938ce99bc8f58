"""A rotation or a reap in a process of its own, SIGKILLed by itself right after one named step (fault injection).

    python -m tests.scenarios.fault_child rotate|reap STEP HOST INSTANCE_ID NOW REDIS_URL [PTR_ZONE]

AWS is the moto server on AWS_ENDPOINT_URL (through the named fake `MotoGaps`, for reverse DNS); Redis is real.
The clock is fixed at NOW (epoch seconds), the parent test's fake clock.
"""

from __future__ import annotations

import os
import signal
import sys

import boto3
import redis

from ippool.assembly import build_machinery
from sendhost.model import PoolPolicy, SenderHost
from tests.support.ippool_fakes import MotoGaps

HEARTBEAT_S = 0.2  # short, so the parent sees the killed rotator's heartbeat lapse quickly


def main() -> None:
    mode, step, host, instance_id, now, url, *rest = sys.argv[1:]
    ptr_zone = rest[0] if rest else None

    def clock() -> float:
        return float(now)

    def checkpoint(name: str) -> None:
        if name == step:
            os.kill(os.getpid(), signal.SIGKILL)

    client = redis.Redis.from_url(url, decode_responses=True)
    aws = MotoGaps(lambda: boto3.Session(region_name="us-east-1"), "us-east-1",
                   endpoint_url=os.environ["AWS_ENDPOINT_URL"], sleep=lambda s: None, clock=clock)
    spec = SenderHost(host, instance_id, "us-east-1", "10.30.1.250",
                      PoolPolicy(2, park_minutes=15, ptr=ptr_zone is not None, ptr_zone=ptr_zone))
    machinery = build_machinery(client, aws, {host: spec}, clock, store_clock=clock)
    if mode == "rotate":
        machinery.rotator(f"child-{step}", checkpoint=checkpoint, heartbeat_s=HEARTBEAT_S).rotate_ready(host)
    else:
        machinery.reaper(checkpoint=checkpoint).reap(host)
    aws.close()
    client.close()
    sys.exit(3)  # the step never came: the test must notice


if __name__ == "__main__":
    main()
