"""The adapter against moto's server mode over HTTP (how the CLI reaches moto via AWS_ENDPOINT_URL)."""

from __future__ import annotations

import random
import uuid

import boto3

from ippool.aws.adapter import Ec2Adapter
from ippool.aws.models import pool_tags
from ippool.states import EipState
from tests.support.aws import REGION, CallRecorder


def test_adapter_reaches_a_moto_server_through_endpoint_url(moto_url: str, aws_env: dict[str, str],
                                                           aws_calls: CallRecorder) -> None:
    # No in-process mock here: every request crosses HTTP to the moto server (shared by the session: own pool).
    pool = f"server-pool-{uuid.uuid4().hex[:8]}"
    with Ec2Adapter(lambda: boto3.Session(region_name=REGION), REGION, endpoint_url=moto_url,
                    sleep=lambda s: None, rng=random.Random(1), on_call=aws_calls) as adapter:
        address = adapter.allocate_address(pool_tags(pool, "h", 0, EipState.INCOMING))
        assert adapter.describe_pool_addresses(pool) == [address]
        assert adapter.release_address(address.allocation_id) is True
    assert aws_calls.calls == ["ec2:AllocateAddress", "ec2:DescribeAddresses", "ec2:ReleaseAddress"]
