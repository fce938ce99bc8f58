"""`sendhost pool create/rotate/retire/worker/destroy`, run as a user runs them, against the moto server and a
real Redis. Few and broad: each CLI call pays for a fresh interpreter."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlsplit

import boto3
import pytest
import redis

from tests.conftest import run_cli
from tests.support.aws import FAKE_CREDENTIALS, REGION
from tests.support.ippool_cli import CLI_AWS_ENV, cli_env, server_instance, unique_host, write_inventory


@pytest.mark.slow
def test_pool_lifecycle_through_the_cli(moto_url: str, redis_url: str, tmp_path: Path) -> None:
    host = unique_host()
    inventory = write_inventory(tmp_path / "inventory.yml", host, server_instance(moto_url), slots=2,
                                park_minutes=0)
    env = cli_env(moto_url, redis_url, inventory)

    created = run_cli("pool", "create", host, "--format", "json", env=env)
    assert created.returncode == 0, created.stderr
    first = json.loads(created.stdout)
    assert [s["action"] for s in first["slots"]] == ["created", "created"]

    again = run_cli("pool", "create", host, env=env)
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines()[-1] == f"{host}: 2 slots, 0 created, 2 already in place"

    rotated = run_cli("pool", "rotate", host, "--slot", "0", "--force", "--format", "json", env=env)
    assert rotated.returncode == 0, rotated.stderr
    [rotation] = json.loads(rotated.stdout)["rotations"]
    assert (rotation["outcome"], rotation["old_ip"]) == ("rotated", first["slots"][0]["public_ip"])

    status = run_cli("pool", "status", host, env=env)
    assert status.returncode == 0, status.stderr
    assert f"parked: 1: {rotation['old_ip']} (0s left); denylist: 0; last rotation: " in status.stdout

    retired = run_cli("pool", "retire", "--ip", first["slots"][1]["public_ip"], "--reason", "on a blocklist",
                      env=env)
    assert retired.returncode == 0, retired.stderr
    assert "slot 1) takes no new leases and is denied for 7 days; state now ready" in retired.stdout

    cycle = run_cli("pool", "worker", "--once", "--format", "json", env=env)
    assert cycle.returncode == 0, cycle.stderr
    report = json.loads(cycle.stdout)
    assert [(r["slot"], r["outcome"]) for r in report["rotations"]] == [(1, "rotated")]
    # At start the worker's reconcile reaps slot 0's old address (parked 0 minutes: overdue); the cycle then
    # rotates slot 1 and releases the address it retired.
    assert [(d["kind"], d["fixed"]) for d in report["reconciled"]] == [("parked_overdue", True)]
    assert report["summary"] == "reconcile fixed 1, 1 rotated, 1 released, 0 error(s)"

    destroyed = run_cli("pool", "destroy", host, "--yes", "--format", "json", env=env)
    assert destroyed.returncode == 0, destroyed.stderr
    assert len(json.loads(destroyed.stdout)["released"]) == 2
    gone = run_cli("pool", "status", host, env=env)
    assert gone.returncode == 2 and "is not registered" in gone.stderr


def test_bad_input_is_one_line_and_exit_2(moto_url: str, redis_url: str, tmp_path: Path) -> None:
    host = unique_host()
    inventory = write_inventory(tmp_path / "inventory.yml", host, "i-0123456789abcdef0")
    env = cli_env(moto_url, redis_url, inventory)
    unknown_host = run_cli("pool", "create", "nosuch", env=env)
    unknown_instance = run_cli("pool", "create", host, env=env)
    too_many = run_cli("pool", "create", host, "--slots", "40", env={
        **env, "SENDHOST_INVENTORY": str(write_inventory(tmp_path / "i2.yml", host, server_instance(moto_url)))})
    no_credentials = run_cli("pool", "create", host, env={
        **{k: v for k, v in env.items() if k not in CLI_AWS_ENV}, "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
        "AWS_EC2_METADATA_DISABLED": "true"})
    for result, needle in [(unknown_host, "no host 'nosuch'"),
                           (unknown_instance, "i-0123456789abcdef0 does not exist"),
                           (too_many, "--slots 40 is more than instance type c5.large allows"),
                           (no_credentials, "no AWS credentials found")]:
        assert result.returncode == 2, (needle, result.stderr)
        assert result.stderr.count("\n") == 1 and needle in result.stderr, result.stderr
        assert "Traceback" not in result.stderr


def test_inventory_private_ips_outside_the_subnet_are_one_line_exit_2_and_nothing_allocated(
        moto_url: str, redis_url: str, tmp_path: Path) -> None:
    host = unique_host()
    instance = server_instance(moto_url)
    inventory = write_inventory(tmp_path / "inventory.yml", host, instance, slots=2,
                                private_ips=["10.30.1.40", "10.31.0.9"])
    result = run_cli("pool", "create", host, env=cli_env(moto_url, redis_url, inventory))
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(f"error: {host}.sendhost_pool.private_ips: 10.31.0.9 is outside subnet "
                                    "10.30.1.0/24 of "), result.stderr
    assert result.stderr.endswith(": list addresses inside 10.30.1.0/24\n") and result.stderr.count("\n") == 1
    ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=moto_url, **FAKE_CREDENTIALS)
    tagged = ec2.describe_addresses(Filters=[{"Name": "tag:sendhost:host", "Values": [host]}])["Addresses"]
    [raw] = [i for r in ec2.describe_instances(InstanceIds=[instance])["Reservations"] for i in r["Instances"]]
    ec2.close()
    assert tagged == []
    assert [p for p in raw["NetworkInterfaces"][0]["PrivateIpAddresses"] if not p["Primary"]] == []


def test_reconcile_reports_then_rebuilds_redis_after_it_lost_its_data(moto_url: str, redis_url: str,
                                                                        tmp_path: Path) -> None:
    host = unique_host()
    env = cli_env(moto_url, redis_url, write_inventory(tmp_path / "inventory.yml", host, server_instance(moto_url)))
    assert run_cli("pool", "create", host, env=env).returncode == 0
    client = redis.Redis.from_url(redis_url)
    client.flushall()
    client.close()

    found = run_cli("pool", "reconcile", host, "--format", "json", env=env)
    assert found.returncode == 1, found.stderr
    assert [d["kind"] for d in json.loads(found.stdout)["differences"]] == ["slot_missing", "slot_missing"]
    assert "run `sendhost pool reconcile --fix`" in found.stderr
    # the table of a dry run says nothing was done, though each detail names what --fix does ("rebuilt")
    dry = run_cli("pool", "reconcile", host, env=env)
    assert dry.returncode == 1, dry.stderr
    assert "detail: what --fix does" in dry.stdout and dry.stdout.count("no (dry run)") == 2
    assert dry.stdout.splitlines()[-1] == ("2 difference(s), nothing changed: a dry run; `--fix` does what each "
                                           "detail ends with")

    fixed = run_cli("pool", "reconcile", host, "--fix", env=env)
    assert fixed.returncode == 0, fixed.stderr
    assert fixed.stdout.splitlines()[-1] == "2 difference(s), 2 fixed, 0 open"
    clean = run_cli("pool", "reconcile", host, env=env)
    assert (clean.returncode, clean.stdout.splitlines()[-1]) == (0, "AWS and Redis agree")


def test_two_pools_in_one_aws_account_never_touch_each_other_s_addresses(moto_url: str, redis_url: str,
                                                                         tmp_path: Path) -> None:
    """Same host name, same instance, same account: only the pool name (the `sendhost:pool` tag) tells the two
    deployments apart. Each has its own Redis database, as each deployment must."""
    host, instance = unique_host(), server_instance(moto_url)
    team_a = cli_env(moto_url, redis_url, write_inventory(tmp_path / "a.yml", host, instance, pool_name="team-a"))
    team_b = cli_env(moto_url, urlsplit(redis_url)._replace(path="/7").geturl(),
                     write_inventory(tmp_path / "b.yml", host, instance, pool_name="team-b"))
    created = run_cli("pool", "create", host, "--format", "json", env=team_a)
    assert created.returncode == 0, created.stderr
    team_a_ips = sorted(slot["public_ip"] for slot in json.loads(created.stdout)["slots"])

    seen_by_b = run_cli("pool", "reconcile", host, "--fix", env=team_b)
    assert (seen_by_b.returncode, seen_by_b.stdout.splitlines()[-1]) == (0, "AWS and Redis agree"), seen_by_b.stderr
    destroyed_by_b = run_cli("pool", "destroy", host, "--yes", "--format", "json", env=team_b)
    assert destroyed_by_b.returncode == 0, destroyed_by_b.stderr
    assert json.loads(destroyed_by_b.stdout)["released"] == []

    ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=moto_url, **FAKE_CREDENTIALS)
    tagged = ec2.describe_addresses(Filters=[{"Name": "tag:sendhost:pool", "Values": ["team-a"]},
                                             {"Name": "tag:sendhost:host", "Values": [host]}])["Addresses"]
    ec2.close()
    assert sorted(a["PublicIp"] for a in tagged) == team_a_ips  # still allocated, still team-a's
    seen_by_a = run_cli("pool", "reconcile", host, env=team_a)
    assert (seen_by_a.returncode, seen_by_a.stdout.splitlines()[-1]) == (0, "AWS and Redis agree"), seen_by_a.stderr


def test_pool_rotate_refuses_another_pool_s_eip_planted_in_redis(moto_url: str, redis_url: str,
                                                                  tmp_path: Path) -> None:
    """The reproduction: two deployments (pools alpha and beta) in one account, beta's allocation id written into
    alpha's slot hash, alpha's `pool rotate` run. It refuses by name, changes nothing, and reconcile lists it."""
    host_a, host_b = unique_host(), unique_host()
    alpha = cli_env(moto_url, redis_url, write_inventory(tmp_path / "a.yml", host_a, server_instance(moto_url),
                                                         slots=1, park_minutes=0, pool_name="alpha"))
    beta = cli_env(moto_url, urlsplit(redis_url)._replace(path="/7").geturl(),
                   write_inventory(tmp_path / "b.yml", host_b, server_instance(moto_url), slots=1,
                                   pool_name="beta"))
    for env, host in ((alpha, host_a), (beta, host_b)):
        made = run_cli("pool", "create", host, env=env)
        assert made.returncode == 0, made.stderr
    beta_eip = json.loads(run_cli("pool", "status", host_b, "--format", "json", env=beta).stdout)["slots"][0]
    client = redis.Redis.from_url(redis_url)
    client.hset(f"sendhost:{{{host_a}}}:slot:0", mapping={"allocation_id": beta_eip["allocation_id"],
                                                          "public_ip": beta_eip["public_ip"]})
    client.close()

    rotated = run_cli("pool", "rotate", host_a, "--slot", "0", "--force", env=alpha)
    assert rotated.returncode == 1, rotated.stdout
    assert "refused to touch EIP" in rotated.stderr and "sendhost:pool=beta (want alpha)" in rotated.stderr
    assert rotated.stderr.count("\n") == 1 and "Traceback" not in rotated.stderr

    ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=moto_url, **FAKE_CREDENTIALS)
    [address] = ec2.describe_addresses(AllocationIds=[beta_eip["allocation_id"]])["Addresses"]
    ec2.close()
    tags = {tag["Key"]: tag["Value"] for tag in address.get("Tags", [])}
    assert address.get("AssociationId"), "beta's EIP was detached from beta's instance"
    assert (tags["sendhost:pool"], tags["sendhost:host"], tags["sendhost:state"]) == ("beta", host_b, "active")

    found = run_cli("pool", "reconcile", host_a, "--format", "json", env=alpha)
    assert found.returncode == 1, found.stderr
    assert [d["kind"] for d in json.loads(found.stdout)["differences"]] == ["slot_not_ours"]


def _destroy_on_a_terminal(env: dict[str, str], host: str, answer: str) -> tuple[int, str]:
    """`sendhost pool destroy HOST` with a terminal (a pty) for stdin and stdout, typing `answer`."""
    import os
    import pty
    import subprocess
    import sys
    import time

    from tests.support.cli import cli_env as process_env
    from tests.support.cli import read_terminal

    primary, secondary = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "toolkit", "pool", "destroy", host], stdin=secondary,
                               stdout=secondary, stderr=secondary, env=process_env(env), close_fds=True)
    os.close(secondary)
    os.write(primary, answer.encode())
    deadline = time.monotonic() + 120
    shown = read_terminal(primary, deadline)
    if process.poll() is None and time.monotonic() >= deadline:
        process.kill()
    return process.wait(timeout=30), shown.decode(errors="replace")


def test_destroy_asks_on_a_terminal_and_needs_yes_elsewhere(moto_url: str, redis_url: str, tmp_path: Path) -> None:
    host = unique_host()
    env = cli_env(moto_url, redis_url, write_inventory(tmp_path / "inventory.yml", host, server_instance(moto_url),
                                                       slots=1))
    assert run_cli("pool", "create", host, env=env).returncode == 0

    unasked = run_cli("pool", "destroy", host, env=env)  # no terminal: never a silent release
    assert unasked.returncode == 2
    assert unasked.stderr == (f"error: pool destroy releases every Elastic IP of {host} and cannot be undone: pass "
                              "--yes to confirm (there is no terminal to ask on)\n")
    returncode, shown = _destroy_on_a_terminal(env, host, "n\n")
    assert returncode == 1, shown
    assert f"Release every Elastic IP of {host}" in shown and "aborted" in shown
    status = run_cli("pool", "status", host, "--format", "json", env=env)
    assert status.returncode == 0 and len(json.loads(status.stdout)["slots"]) == 1  # nothing was touched

    returncode, shown = _destroy_on_a_terminal(env, host, "y\n")
    assert returncode == 0, shown
    assert f"{host}: released 1 Elastic IP(s)" in shown
