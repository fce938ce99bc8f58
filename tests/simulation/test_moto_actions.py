"""The simulation's cached action names are moto's own list for each response class, read once per class, and
moto's function is back after the run."""

from __future__ import annotations

import inspect
from typing import Any

import boto3
import moto.core.responses as responses
import pytest
from moto import mock_aws
from moto.core.utils import method_names_from_class
from moto.ec2.responses import EC2Response
from moto.route53.responses import Route53

from simulation.moto_actions import cached_action_names


def test_each_class_gets_moto_own_list_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    expected = {cls: method_names_from_class(cls) for cls in (EC2Response, Route53)}
    readings: list[Any] = []
    getmembers = inspect.getmembers
    monkeypatch.setattr(inspect, "getmembers", lambda obj, *a, **k: (readings.append(obj), getmembers(obj, *a, **k))[1])
    with cached_action_names():
        for _ in range(3):
            for cls, names in expected.items():
                got = responses.method_names_from_class(cls)
                assert got == names
                got.append("changed by a caller")  # a caller's own copy: the next answer is moto's again
    assert readings == [EC2Response, Route53]


def test_requests_are_answered_through_it_and_moto_function_is_back() -> None:
    original = responses.method_names_from_class
    with mock_aws(), cached_action_names():
        client = boto3.client("ec2", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
        allocation = client.allocate_address(Domain="vpc")["AllocationId"]
        found = client.describe_addresses()["Addresses"]
        assert [a["AllocationId"] for a in found] == [allocation]
        assert responses.method_names_from_class is not original
    assert responses.method_names_from_class is original
