"""Helpers for CLI tests of the pool against the moto server: an instance there and an inventory naming it."""

from __future__ import annotations

import uuid
from pathlib import Path

import boto3

from tests.support.aws import FAKE_CREDENTIALS, REGION

CLI_AWS_ENV = {"AWS_ACCESS_KEY_ID": FAKE_CREDENTIALS["aws_access_key_id"],
               "AWS_SECRET_ACCESS_KEY": FAKE_CREDENTIALS["aws_secret_access_key"],
               "AWS_DEFAULT_REGION": REGION}


def server_instance(moto_url: str, instance_type: str = "c5.large", region: str = REGION) -> str:
    """Run an instance on the moto server (in its own VPC, in `region`); return its id."""
    ec2 = boto3.client("ec2", region_name=region, endpoint_url=moto_url, **FAKE_CREDENTIALS)
    try:
        vpc = ec2.create_vpc(CidrBlock="10.30.0.0/16")["Vpc"]["VpcId"]
        subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.30.1.0/24")["Subnet"]["SubnetId"]
        instance = ec2.run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1, InstanceType=instance_type,
                                     SubnetId=subnet)["Instances"][0]
        return str(instance["InstanceId"])
    finally:
        ec2.close()


def unique_host() -> str:
    return f"sender-{uuid.uuid4().hex[:8]}"


def write_inventory(path: Path, host: str, instance_id: str, slots: int = 2, park_minutes: int = 15,
                    pool_name: str | None = None, private_ips: list[str] | None = None) -> Path:
    pool_vars = f"  vars:\n    sendhost_pool_name: {pool_name}\n" if pool_name else ""
    path.write_text(f"""\
all:
{pool_vars}  children:
    senders:
      hosts:
        {host}:
          sendhost_instance_id: {instance_id}
          sendhost_region: {REGION}
          sendhost_primary_ip: 10.30.1.250
          sendhost_pool:
            slots: {slots}
            park_minutes: {park_minutes}
""" + (f"            private_ips: {private_ips}\n" if private_ips else ""))
    return path


def cli_env(moto_url: str, redis_url: str, inventory: Path) -> dict[str, str]:
    return {**CLI_AWS_ENV, "AWS_ENDPOINT_URL": moto_url, "REDIS_URL": redis_url,
            "SENDHOST_INVENTORY": str(inventory)}
