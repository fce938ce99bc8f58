"""The worker loop: a stop request lets the slot in hand finish and starts no other; SIGTERM ends the CLI worker;
it records the region's EIP quota and usage for the exporter every few minutes, and a failed reading stops nothing."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import boto3
import pytest

from ippool.assembly import build_regional
from ippool.aws.errors import map_aws_error
from ippool.quota_readings import QuotaReading, QuotaReadings
from ippool.rotator import ROTATED
from ippool.worker_loop import Worker
from tests.conftest import REPO_ROOT
from tests.support.aws import REGION, CallRecorder
from tests.support.ippool_cli import cli_env, server_instance, unique_host, write_inventory
from tests.support.ippool_fakes import MotoGaps
from tests.support.ippool_world import World


def test_stop_mid_rotation_finishes_that_slot_and_starts_no_other(world: World) -> None:
    spec = world.add_host(slots=2)
    world.lifecycle().create(spec, 2)
    world.exhaust("sender-1", 0)
    world.exhaust("sender-1", 1)
    runner: list[Worker] = []
    rotator = world.rotator(checkpoint=lambda step: runner[0].stop() if step == "allocate" else None)
    runner.append(Worker(rotator, world.reaper(), ["sender-1"], interval_s=3600))
    cycles = runner[0].run()
    assert cycles == 1  # stopped: no sleep, no second cycle
    states = [(s.state, s.used) for s in world.pool.status("sender-1")[0].slots]
    assert states[0] == ("active", 0)  # the slot in hand was rotated to the end
    assert states[1][0] == "ready"  # the next one was not started


def test_worker_cycles_sleep_between_and_rotate_what_became_ready(world: World) -> None:
    spec = world.add_host(slots=1)
    world.lifecycle().create(spec, 1)
    runner = Worker(world.rotator(), world.reaper(), ["sender-1"], interval_s=0)
    assert runner.run_cycle().rotations == []
    world.exhaust("sender-1", 0)
    assert [r.outcome for r in runner.run_cycle().rotations] == [ROTATED]


def test_a_cycle_reads_the_parked_eips_of_all_its_hosts_at_once_and_releases_each_due_one(
        world: World, aws_calls: CallRecorder) -> None:
    names = ["sender-1", "sender-2", "sender-3"]
    parked = {}
    for name in names:
        [record] = world.lifecycle().create(world.add_host(name, slots=1, park_minutes=15), 1)
        world.exhaust(name, 0)
        world.rotator().rotate_ready(name)
        parked[name] = record.public_ip
    world.clock.advance(15 * 60 + 1)
    runner = Worker(world.rotator(), world.reaper(), names, interval_s=0)
    before = aws_calls.count("ec2:DescribeAddresses")
    report = runner.run_cycle()
    assert sorted((r.host, r.public_ip, r.released) for r in report.reaped) == [
        (name, parked[name], True) for name in names]
    # one read of the pool's parked EIPs for the three hosts, not one per host; release reads none
    assert aws_calls.count("ec2:DescribeAddresses") - before == 1
    assert report.errors == []


def test_cli_worker_exits_cleanly_on_sigterm(moto_url: str, redis_url: str, tmp_path: Path) -> None:
    host = unique_host()
    env = cli_env(moto_url, redis_url, write_inventory(tmp_path / "inv.yml", host, server_instance(moto_url)))
    full_env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO_ROOT), **env}
    process = subprocess.Popen([sys.executable, "-m", "toolkit", "-v", "pool", "worker", "--interval", "600"],
                               env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        assert process.stderr is not None
        while "started" not in (line := process.stderr.readline()):  # SIGTERM is handled from here on
            assert line and time.monotonic() < deadline, "the worker did not start"
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=max(1, deadline - time.monotonic()))
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    _out, err = process.communicate()
    assert code == 0, err
    assert "Traceback" not in err


class QuotaRefused(MotoGaps):
    """Named fake: Service Quotas refuses the credentials (a policy from before servicequotas:GetServiceQuota)."""

    def eip_quota(self) -> int:
        raise map_aws_error("AccessDeniedException", "not authorized to perform servicequotas:GetServiceQuota",
                            operation="GetServiceQuota", subject="quota ec2/L-0263D0A3", region=self.region,
                            attempts=1)


def _readings(world: World) -> list[QuotaReading]:
    return QuotaReadings(world.client, world.clock).all()


def test_the_worker_records_the_eip_quota_and_usage_every_few_minutes(world: World) -> None:
    world.aws = world.gaps(quota=5)
    spec = world.add_host(slots=2)
    world.lifecycle().create(spec, 2)
    runner = world.worker("test-worker", interval_s=0, reconcile=False)
    runner.monotonic = world.clock
    assert runner.run_cycle().errors == []
    assert _readings(world) == [QuotaReading(REGION, 5, 2, world.clock())]
    first = world.clock()
    boto3.client("ec2", region_name=REGION).allocate_address(Domain="vpc")  # not ours: it counts all the same
    world.clock.advance(runner.quota_every_s - 1)
    runner.run_cycle()
    assert _readings(world) == [QuotaReading(REGION, 5, 2, first)]  # not due yet: AWS not asked again
    world.clock.advance(1)
    runner.run_cycle()
    assert _readings(world) == [QuotaReading(REGION, 5, 3, world.clock())]


def test_a_failed_quota_reading_keeps_the_last_one_and_stops_nothing(world: World) -> None:
    world.aws = world.gaps(quota=5)
    spec = world.add_host(slots=1)
    world.lifecycle().create(spec, 1)
    runner = world.worker("test-worker", interval_s=0, reconcile=False)
    runner.monotonic = world.clock
    runner.run_cycle()
    [before] = _readings(world)
    world.aws = QuotaRefused(lambda: boto3.Session(region_name=REGION), REGION, sleep=world.clock.sleep,
                             clock=world.clock, quota=5)  # what the worker reads the quota through from now on
    world.exhaust("sender-1", 0)
    world.clock.advance(runner.quota_every_s)
    report = runner.run_cycle()  # a refusal of credentials stops the worker anywhere else
    world.aws.close()
    assert report.errors == []
    assert [r.outcome for r in report.rotations] == [ROTATED]  # the cycle went on
    assert _readings(world) == [before]  # kept, and aging: the exporter serves its timestamp


def test_a_regional_worker_records_every_regions_quota_though_one_region_refuses(
        world: World, caplog: pytest.LogCaptureFixture) -> None:
    refused = QuotaRefused(lambda: boto3.Session(region_name=REGION), REGION)
    other = MotoGaps(lambda: boto3.Session(region_name="eu-west-1"), "eu-west-1", quota=7)
    try:
        pools = build_regional(world.client, {REGION: refused, "eu-west-1": other}, {}, world.clock)
        runner = pools.worker("test-worker", interval_s=0, reconcile=False)
        runner.monotonic = world.clock
        assert runner.run_cycle().errors == []  # a failed reading is logged, not a cycle error
    finally:
        refused.close()
        other.close()
    assert _readings(world) == [QuotaReading("eu-west-1", 7, 0, world.clock())]  # read after the refusal
    assert "refused GetServiceQuota" in caplog.text
