"""Hosts in two regions, one inventory: each host's pool commands go to its own region's AWS, run as a user runs
them against the moto server (which keeps each region's EIPs apart) and a real Redis. Also the bad input a
region or a PTR zone can be: one line, exit 2, nothing allocated."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest
import redis

from tests.conftest import run_cli
from tests.support.aws import FAKE_CREDENTIALS
from tests.support.ippool_cli import CLI_AWS_ENV, cli_env, server_instance, unique_host

US, EU = "us-east-1", "eu-west-1"


def write_two_region_inventory(path: Path, hosts: dict[str, tuple[str, str]], pool_extra: str = "") -> Path:
    """An inventory of `hosts` (name -> (instance id, region)), one slot each, parked 0 minutes."""
    entries = "".join(f"""\
        {name}:
          sendhost_instance_id: {instance}
          sendhost_region: {region}
          sendhost_primary_ip: 10.30.1.{250 - index}
          sendhost_pool:
            slots: 1
            park_minutes: 0
{pool_extra}""" for index, (name, (instance, region)) in enumerate(hosts.items()))
    path.write_text(f"all:\n  children:\n    senders:\n      hosts:\n{entries}")
    return path


def addresses(moto_url: str, region: str, host: str) -> list[dict[str, Any]]:
    """The EIPs tagged for `host` in `region` of the moto server."""
    ec2 = boto3.client("ec2", region_name=region, endpoint_url=moto_url, **FAKE_CREDENTIALS)
    try:
        found: list[dict[str, Any]] = ec2.describe_addresses(
            Filters=[{"Name": "tag:sendhost:host", "Values": [host]}])["Addresses"]
        return found
    finally:
        ec2.close()


@pytest.mark.slow
def test_each_host_is_served_in_its_own_region(moto_url: str, redis_url: str, tmp_path: Path) -> None:
    us_host, eu_host = unique_host(), unique_host()
    inventory = write_two_region_inventory(tmp_path / "inventory.yml", {
        us_host: (server_instance(moto_url, region=US), US), eu_host: (server_instance(moto_url, region=EU), EU)})
    env = cli_env(moto_url, redis_url, inventory)  # AWS_DEFAULT_REGION is us-east-1: the eu host must not use it

    for host in (us_host, eu_host):
        created = run_cli("pool", "create", host, env=env)
        assert created.returncode == 0, created.stderr
    us_ips = [a["PublicIp"] for a in addresses(moto_url, US, us_host)]
    eu_ips = [a["PublicIp"] for a in addresses(moto_url, EU, eu_host)]
    assert len(us_ips) == len(eu_ips) == 1
    assert addresses(moto_url, US, eu_host) == addresses(moto_url, EU, us_host) == []

    rotated = run_cli("pool", "rotate", eu_host, "--force", "--format", "json", env=env)
    assert rotated.returncode == 0, rotated.stderr
    [rotation] = json.loads(rotated.stdout)["rotations"]
    assert (rotation["outcome"], rotation["old_ip"]) == ("rotated", eu_ips[0])
    eu_now = {a["PublicIp"]: a for a in addresses(moto_url, EU, eu_host)}
    assert sorted(eu_now) == sorted([eu_ips[0], rotation["new_ip"]])  # the fresh one and the parked one, in EU
    assert eu_now[rotation["new_ip"]].get("AssociationId")

    client = redis.Redis.from_url(redis_url)
    client.flushall()  # Redis lost everything: reconcile rebuilds both hosts, each from its own region's tags
    client.close()
    fixed = run_cli("pool", "reconcile", "--fix", "--format", "json", env=env)
    assert fixed.returncode == 0, fixed.stderr
    rebuilt = {(d["host"], d["kind"]) for d in json.loads(fixed.stdout)["differences"] if d["fixed"]}
    assert {(us_host, "slot_missing"), (eu_host, "slot_missing")} <= rebuilt
    clean = run_cli("pool", "reconcile", env=env)
    assert (clean.returncode, clean.stdout.splitlines()[-1]) == (0, "AWS and Redis agree"), clean.stderr

    # Rebuilt slots take no sends until they rotate: one worker cycle rotates both, each in its own region, and
    # reaps each replaced address (parked 0 minutes) there.
    cycle = run_cli("pool", "worker", "--once", "--format", "json", env=env)
    assert cycle.returncode == 0, cycle.stderr
    new_ips = {r["host"]: r["new_ip"] for r in json.loads(cycle.stdout)["rotations"] if r["outcome"] == "rotated"}
    assert sorted(new_ips) == sorted([us_host, eu_host])
    assert [a["PublicIp"] for a in addresses(moto_url, EU, eu_host)] == [new_ips[eu_host]]
    assert [a["PublicIp"] for a in addresses(moto_url, US, us_host)] == [new_ips[us_host]]


def test_no_credentials_names_the_region_and_allocates_nothing(moto_url: str, redis_url: str,
                                                                tmp_path: Path) -> None:
    host = unique_host()
    inventory = write_two_region_inventory(tmp_path / "inventory.yml",
                                           {host: (server_instance(moto_url, region=EU), EU)})
    env = {**{k: v for k, v in cli_env(moto_url, redis_url, inventory).items() if k not in CLI_AWS_ENV},
           "AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
           "AWS_EC2_METADATA_DISABLED": "true"}
    for command in (["pool", "create", host], ["pool", "worker", "--once"], ["pool", "reconcile", "--fix"]):
        result = run_cli(*command, env=env)
        assert result.returncode == 2, result.stderr
        assert result.stderr.startswith(f"error: region {EU}: no AWS credentials found in the default credential "
                                        "chain: set AWS_PROFILE or AWS_ACCESS_KEY_ID"), result.stderr
        assert result.stderr.count("\n") == 1
    assert addresses(moto_url, EU, host) == []


def _ptr_inventory(tmp_path: Path, moto_url: str, host: str, zone: str) -> Path:
    return write_two_region_inventory(tmp_path / "inventory.yml", {host: (server_instance(moto_url), US)},
                                      pool_extra=f"            ptr: true\n            ptr_zone: {zone}\n")


def test_a_ptr_zone_route53_does_not_have_is_exit_2_before_any_allocation(moto_url: str, redis_url: str,
                                                                           tmp_path: Path) -> None:
    host = unique_host()
    env = cli_env(moto_url, redis_url, _ptr_inventory(tmp_path, moto_url, host, f"{host}.example.org"))
    for command in (["pool", "create", host], ["pool", "rotate", host, "--force"], ["pool", "worker", "--once"]):
        result = run_cli(*command, env=env)
        assert result.returncode == 2, result.stderr
        assert addresses(moto_url, US, host) == []
        assert result.stderr == (f"error: {host}.sendhost_pool.ptr_zone '{host}.example.org': Route 53 has no public "
                                 f"hosted zone {host}.example.org.: create a public zone of that name or fix the "
                                 "host's PTR zone in the inventory\n")


def test_a_ptr_zone_that_is_only_private_is_exit_2_before_any_allocation(moto_url: str, redis_url: str,
                                                                          tmp_path: Path) -> None:
    host = unique_host()
    zone = f"{host}.example.org"
    ec2 = boto3.client("ec2", region_name=US, endpoint_url=moto_url, **FAKE_CREDENTIALS)
    route53 = boto3.client("route53", region_name=US, endpoint_url=moto_url, **FAKE_CREDENTIALS)
    vpc = ec2.create_vpc(CidrBlock="10.40.0.0/16")["Vpc"]["VpcId"]
    route53.create_hosted_zone(Name=zone, CallerReference=host, HostedZoneConfig={"PrivateZone": True},
                               VPC={"VPCRegion": US, "VPCId": vpc})
    ec2.close()
    route53.close()
    env = cli_env(moto_url, redis_url, _ptr_inventory(tmp_path, moto_url, host, zone))
    result = run_cli("pool", "create", host, env=env)
    assert result.returncode == 2, result.stderr
    assert addresses(moto_url, US, host) == []
    assert result.stderr.startswith(f"error: {host}.sendhost_pool.ptr_zone '{zone}': Route 53 has no public hosted "
                                    f"zone {zone}. (only a private zone has that name"), result.stderr
    assert result.stderr.count("\n") == 1
