"""Service-specific endpoints reach their own service: the CLI's adapter (`toolkit.cli.pool_wiring.make_adapter`)
leaves endpoint resolution to botocore, so AWS_ENDPOINT_URL_EC2 and AWS_ENDPOINT_URL_ROUTE_53 each steer one
service and AWS_ENDPOINT_URL the rest. Real calls cross HTTP to the moto server; the other endpoint is a loopback
port nobody listens on, so a call sent there could not succeed."""

from __future__ import annotations

import os
import uuid

import boto3
import pytest

from tests.support.aws import FAKE_CREDENTIALS, REGION
from tests.support.ippool_cli import server_instance
from tests.support.net import free_port
from toolkit.app import App
from toolkit.cli import pool_wiring


def _app(monkeypatch: pytest.MonkeyPatch, aws_env: dict[str, str], **endpoints: str) -> App:
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_EC2", "AWS_ENDPOINT_URL_ROUTE_53", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    for name, url in endpoints.items():
        monkeypatch.setenv(name, url)  # botocore reads the process environment
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
    return App(env=dict(os.environ))


def test_aws_endpoint_url_ec2_steers_ec2_only(moto_url: str, aws_env: dict[str, str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    nowhere = f"http://127.0.0.1:{free_port()}"
    instance_id = server_instance(moto_url)
    app = _app(monkeypatch, aws_env, AWS_ENDPOINT_URL=nowhere, AWS_ENDPOINT_URL_EC2=moto_url)
    with pool_wiring.make_adapter(app, REGION) as adapter:
        assert adapter.describe_instance(instance_id).instance_id == instance_id  # EC2 went to the moto server
        # Route 53 keeps the general endpoint: botocore's order, not EC2's URL for every service.
        assert adapter._client("route53", reads=True).meta.endpoint_url == nowhere


def test_aws_endpoint_url_route_53_steers_route53_only(moto_url: str, aws_env: dict[str, str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    zone = f"r53-{uuid.uuid4().hex[:8]}.example.org"
    route53 = boto3.client("route53", region_name=REGION, endpoint_url=moto_url, **FAKE_CREDENTIALS)
    zone_id = route53.create_hosted_zone(Name=zone, CallerReference=zone)["HostedZone"]["Id"]
    nowhere = f"http://127.0.0.1:{free_port()}"
    app = _app(monkeypatch, aws_env, AWS_ENDPOINT_URL_EC2=nowhere, AWS_ENDPOINT_URL_ROUTE_53=moto_url)
    try:
        with pool_wiring.make_adapter(app, REGION) as adapter:
            adapter.upsert_a_record(zone, f"s1.{zone}", "198.18.0.7")  # Route 53 went to the moto server
            assert adapter._client("ec2", reads=True).meta.endpoint_url == nowhere
        records = route53.list_resource_record_sets(HostedZoneId=zone_id)["ResourceRecordSets"]
        assert [(r["Name"], r["ResourceRecords"]) for r in records if r["Type"] == "A"] == [
            (f"s1.{zone}.", [{"Value": "198.18.0.7"}])]
    finally:
        route53.close()
