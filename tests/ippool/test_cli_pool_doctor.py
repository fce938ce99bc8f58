"""`sendhost pool doctor`, run as a user runs it, against moto's server (AWS_ENDPOINT_URL)."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from tests.conftest import run_cli
from tests.support.aws import FAKE_CREDENTIALS, REGION
from tests.support.ippool_cli import CLI_AWS_ENV, unique_host
from tests.support.vpc import Egress, SenderNetwork, build_sender_network
from toolkit.iam_policy import render_policy


@pytest.fixture
def server_ec2(moto_url: str) -> Iterator[Any]:
    client = boto3.client("ec2", region_name=REGION, endpoint_url=moto_url, **FAKE_CREDENTIALS)
    yield client
    client.close()


def write_inventory(path: Path, hosts: dict[str, SenderNetwork]) -> Path:
    entries = "".join(f"""\
        {name}:
          sendhost_instance_id: {net.instance_id}
          sendhost_region: {REGION}
          sendhost_primary_ip: {net.primary_private_ip}
          sendhost_pool:
            slots: 1
""" for name, net in hosts.items())
    path.write_text(f"all:\n  children:\n    senders:\n      hosts:\n{entries}")
    return path


def doctor(moto_url: str, inventory: Path, *args: str, **env: str) -> Any:
    return run_cli("pool", "doctor", *args, env={**CLI_AWS_ENV, "AWS_ENDPOINT_URL": moto_url,
                                                  "SENDHOST_INVENTORY": str(inventory), **env})


def test_a_host_ready_to_send_passes_every_check(moto_url: str, server_ec2: Any, tmp_path: Path) -> None:
    host, net = unique_host(), build_sender_network(server_ec2)
    inventory = write_inventory(tmp_path / "inventory.yml", {host: net})

    result = doctor(moto_url, inventory, "--format", "json")

    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert [(c["host"], c["check"], c["status"], c["fix"]) for c in report["checks"]] == [
        (host, "internet route", "ok", ""), (host, "public address", "ok", "")]
    assert report["checks"][0]["detail"] == f"{net.route_table_id} (subnet {net.subnet_id}) routes 0.0.0.0/0 to " \
                                            f"{net.target}"
    assert report["summary"] == "2 check(s) on 1 host(s): 2 ok, 0 failed, 0 could not check"


def test_table_names_each_check_and_its_fix(moto_url: str, server_ec2: Any, tmp_path: Path) -> None:
    host, net = unique_host(), build_sender_network(server_ec2, Egress.NAT_GATEWAY)
    inventory = write_inventory(tmp_path / "inventory.yml", {host: net})

    result = doctor(moto_url, inventory)

    assert result.returncode == 1
    lines = [line.rstrip() for line in result.stdout.splitlines()]
    assert lines[0] == "pool doctor"
    assert [cell.strip() for cell in lines[2].split("┃")[1:-1]] == ["host", "check", "status", "detail", "fix"]
    rows = [[cell.strip() for cell in line.split("│")[1:-1]] for line in lines if line.startswith("│")]
    assert rows[0] == [host, "internet route", "failed",
                       f"{net.route_table_id} (subnet {net.subnet_id}) routes 0.0.0.0/0 to NAT gateway {net.target}: "
                       f"every send leaves from the NAT's address, never from a slot's Elastic IP",
                       f"route 0.0.0.0/0 of {net.route_table_id} to an internet gateway (igw-…); behind a NAT every "
                       f"send leaves from the NAT's address"]
    assert rows[1][:3] == [host, "public address", "ok"]
    assert rows[1][4] == "-"  # no fix for a check that passed
    assert lines[-1] == "2 check(s) on 1 host(s): 1 ok, 1 failed, 0 could not check"


def test_failures_exit_1_naming_each_fix_and_only_named_hosts_are_checked(moto_url: str, server_ec2: Any,
                                                                          tmp_path: Path) -> None:
    nat_host, nat = unique_host(), build_sender_network(server_ec2, Egress.NAT_GATEWAY, public_ip=False)
    good_host, good = unique_host(), build_sender_network(server_ec2, octet=41)
    inventory = write_inventory(tmp_path / "inventory.yml", {nat_host: nat, good_host: good})

    named = doctor(moto_url, inventory, good_host, "--format", "json")
    every = doctor(moto_url, inventory, "--format", "json")

    assert named.returncode == 0, named.stderr
    assert {c["host"] for c in json.loads(named.stdout)["checks"]} == {good_host}
    assert every.returncode == 1
    assert [c["status"] for c in json.loads(every.stdout)["checks"]] == ["failed", "failed", "ok", "ok"]
    assert every.stderr.startswith(
        f"error: 2 network check(s) failed: {nat_host} internet route: route 0.0.0.0/0 of {nat.route_table_id} to an "
        f"internet gateway (igw-…); behind a NAT every send leaves from the NAT's address; {nat_host} public address: "
        f"associate an Elastic IP with {nat.primary_private_ip} on {nat.eni_id}")
    assert "Traceback" not in every.stderr


def test_an_unknown_host_exits_2_naming_the_known_ones(moto_url: str, server_ec2: Any, tmp_path: Path) -> None:
    host = unique_host()
    inventory = write_inventory(tmp_path / "inventory.yml", {host: build_sender_network(server_ec2)})

    result = doctor(moto_url, inventory, "sender-nope")

    assert result.returncode == 2
    assert f"no host 'sender-nope' in group senders (known: {host})" in result.stderr


def _reset_auth(moto_url: str, count: str) -> str:
    """Make moto's server enforce IAM after `count` more requests ("inf": never); return the count it had before."""
    request = urllib.request.Request(f"{moto_url}/moto-api/reset-auth", data=count.encode(), method="POST",
                                     headers={"Content-Type": "text/plain"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return str(json.loads(response.read())["PREVIOUS_INITIAL_NO_AUTH_ACTION_COUNT"])


def test_a_check_that_cannot_look_exits_1_with_its_own_message(moto_url: str, server_ec2: Any,
                                                               tmp_path: Path) -> None:
    host, net = unique_host(), build_sender_network(server_ec2, Egress.NAT_GATEWAY)
    inventory = write_inventory(tmp_path / "inventory.yml", {host: net})
    policy = render_policy("sendhost", [REGION])
    policy["Statement"][0]["Action"].remove("ec2:DescribeRouteTables")  # ReadPoolState
    user = f"doctor-{host}"
    previous = _reset_auth(moto_url, "4")  # the four IAM calls below make the user; every later request is checked
    try:
        iam = boto3.client("iam", region_name=REGION, endpoint_url=moto_url, **FAKE_CREDENTIALS)
        iam.create_user(UserName=user)
        arn = iam.create_policy(PolicyName=user, PolicyDocument=json.dumps(policy))["Policy"]["Arn"]
        iam.attach_user_policy(UserName=user, PolicyArn=arn)
        key = iam.create_access_key(UserName=user)["AccessKey"]
        iam.close()
        result = doctor(moto_url, inventory, "--format", "json", AWS_ACCESS_KEY_ID=key["AccessKeyId"],
                        AWS_SECRET_ACCESS_KEY=key["SecretAccessKey"])
    finally:
        _reset_auth(moto_url, previous)

    assert result.returncode == 1
    statuses = {c["check"]: c["status"] for c in json.loads(result.stdout)["checks"]}
    assert statuses == {"internet route": "couldnt_check", "public address": "ok"}
    assert result.stderr.startswith(
        f"error: 1 network check(s) could not look, so nothing is known about them: {host} internet route: allow "
        f"ec2:DescribeRouteTables to these credentials")


def test_no_credentials_is_said_once_with_how_to_provide_them(moto_url: str, server_ec2: Any,
                                                              tmp_path: Path) -> None:
    """Not four "allow ec2:DescribeInstances" fixes for two hosts: the one thing missing, said once, exit 2."""
    hosts = {unique_host(): build_sender_network(server_ec2),
             unique_host(): build_sender_network(server_ec2, octet=41)}
    inventory = write_inventory(tmp_path / "inventory.yml", hosts)
    nowhere = str(tmp_path / "no-such-file")
    result = run_cli("pool", "doctor", env={
        "AWS_ENDPOINT_URL": moto_url, "AWS_DEFAULT_REGION": REGION, "SENDHOST_INVENTORY": str(inventory),
        "AWS_SHARED_CREDENTIALS_FILE": nowhere, "AWS_CONFIG_FILE": nowhere, "AWS_EC2_METADATA_DISABLED": "true"})
    assert result.returncode == 2
    assert result.stderr == (f"error: region {REGION}: no AWS credentials found in the default credential chain: set "
                             "AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (see docs/iam-policy.json for the "
                             "permissions needed)\n")
    assert result.stdout == ""
