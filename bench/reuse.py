"""Address reuse: how often a rotation puts a never-before-used address into service, with parking on and off.

    python bench/reuse.py [--rotations 500] [--slots 4] [--seed 1]

AWS hands recently released Elastic IPs straight back (in staging, 498 redraws returned only 4 distinct IPs). This
runs the real rotator and reaper (ippool.rotator, ippool.reaper) against `ReusingEc2StandIn`, the named EC2 fake that
models it: the last 4 released addresses come back on the next allocations with probability 0.99, unless they are
still allocated (parked). EC2 is moto in-process; Redis is a private redis-server; time is a fake clock advancing 60 s
per worker cycle. Every cycle spends every slot's budget, rotates, then reaps, as `pool worker` does.

Modes, each until `--rotations` rotations finished:
  parking on    park 15 min, then release and deny for 7 days; a draw that is denied or parked is parked and redrawn
  parking off   park 0 min (the old address is released in the same cycle), deny and redraw as above
  naive         no parking, no denylist: release at once and take what AWS hands out (the baseline)

Prints, per mode, the share of rotations that put a never-before-used address into service, draws per rotation and
cycles in which a slot found no fresh address (it falls back that cycle); then the ratio against the baseline.
Target: >= 0.99 with parking on.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from sendhost.model import PoolPolicy, SenderHost

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import boto3
import redis

from bench.lease import start_redis
from ippool.assembly import build_machinery
from ippool.denylist import Denylist
from ippool.rotator import NO_FRESH_ADDRESS, ROTATED
from simulation.reusing_ec2 import ReusingEc2StandIn
from tests.support.ippool_slots import set_used

REGION = "us-east-1"
CYCLE_S = 60.0


class Clock:
    """Fake clock: epoch seconds, moved by the bench."""

    def __init__(self) -> None:
        self.now = 1_796_000_000.0

    def __call__(self) -> float:
        return self.now


class NoDenylist(Denylist):
    """The naive baseline's denylist: remembers nothing."""

    def add(self, host: str, public_ip: str) -> None:
        return None

    def listed(self, public_ip: str) -> bool:
        return False


@dataclass
class Outcome:
    mode: str
    rotations: int
    fresh: int
    draws: int
    no_fresh_cycles: int

    @property
    def share(self) -> float:
        return self.fresh / self.rotations if self.rotations else 0.0


def run_mode(mode: str, url: str, rotations: int, slots: int, seed: int) -> Outcome:
    from moto import mock_aws

    client = redis.Redis.from_url(url, decode_responses=True)
    client.flushall()
    clock = Clock()
    park_minutes = 15.0 if mode == "parking on" else 0.0
    with mock_aws():
        ec2 = boto3.client("ec2", region_name=REGION)
        vpc = ec2.create_vpc(CidrBlock="10.40.0.0/16")["Vpc"]["VpcId"]
        subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.40.1.0/24")["Subnet"]["SubnetId"]
        instance = ec2.run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1, InstanceType="c5.xlarge",
                                     SubnetId=subnet)["Instances"][0]["InstanceId"]
        ec2.close()
        aws = ReusingEc2StandIn(lambda: boto3.Session(region_name=REGION), REGION, seed=seed,
                                sleep=lambda s: None, clock=clock)
        spec = SenderHost("bench-host", instance, REGION, "10.40.1.250", PoolPolicy(slots, park_minutes=park_minutes))
        machinery = build_machinery(client, aws, {spec.name: spec}, clock, store_clock=clock, rng=random.Random(seed))
        if mode == "naive":
            machinery.denylist = NoDenylist(client, clock)
        pool, reaper, rotator = machinery.pool, machinery.reaper(), machinery.rotator("bench")
        records = machinery.lifecycle().create(spec, slots)
        served = {record.public_ip for record in records}
        allocations_before = aws.fresh + aws.handed_back
        outcome = Outcome(mode, 0, 0, 0, 0)
        while outcome.rotations < rotations:
            for slot in range(slots):
                set_used(pool, spec.name, slot, pool.slots.slot_status(spec.name, slot).budget)
            for result in rotator.rotate_ready(spec.name):
                if result.outcome == ROTATED and outcome.rotations < rotations:
                    outcome.rotations += 1
                    outcome.fresh += result.new_ip not in served
                    served.add(result.new_ip or "")
                elif result.outcome == NO_FRESH_ADDRESS:
                    outcome.no_fresh_cycles += 1
            reaper.reap(spec.name)
            clock.now += CYCLE_S
        outcome.draws = aws.fresh + aws.handed_back - allocations_before
        aws.close()
    client.close()
    return outcome


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rotations", type=int, default=500)
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    for name, value in {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
                        "AWS_DEFAULT_REGION": REGION}.items():
        os.environ.setdefault(name, value)
    with tempfile.TemporaryDirectory() as workdir:
        process, url = start_redis(workdir)
        try:
            outcomes = [run_mode(mode, url, args.rotations, args.slots, args.seed)
                        for mode in ("parking on", "parking off", "naive")]
        finally:
            process.terminate()
            process.wait()
    print(f"{'mode':<12} {'rotations':>9} {'fresh share':>11} {'draws/rotation':>14} {'no-fresh slot-cycles':>20}")
    for o in outcomes:
        print(f"{o.mode:<12} {o.rotations:>9} {o.share:>11.3f} {o.draws / o.rotations:>14.2f} {o.no_fresh_cycles:>20}")
    baseline = outcomes[-1].share
    on = outcomes[0].share
    ratio = f"{on / baseline:.1f}x" if baseline else "inf"
    print(f"parking on: {on:.3f} of rotations put a never-used address into service vs {baseline:.3f} naive "
          f"({ratio}); target >= 0.99: {'met' if on >= 0.99 else 'NOT met'}")




if __name__ == "__main__":
    main()
