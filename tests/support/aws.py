"""Shared AWS test helpers: moto (in-process) for what it implements, a named Stubber fake for what it lacks,
and a recorder that holds every AWS call a test makes against docs/iam-policy.json.

A pytest plugin (tests/conftest.py lists it in `pytest_plugins`): a test asks for its fixtures by name.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.stub import Stubber

from ippool.aws.adapter import Ec2Adapter
from ippool.aws.pacing import Backoff, TokenBucket
from tests.support.clock import FakeClock

REGION = "us-east-1"
POLICY_PATH = Path(__file__).resolve().parents[2] / "docs" / "iam-policy.json"
FAKE_CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing",
                    "aws_session_token": "testing"}


def policy_actions(path: Path = POLICY_PATH) -> set[str]:
    """Every action the IAM policy allows (the policy lists actions exactly, without wildcards)."""
    document = json.loads(path.read_text())
    actions: set[str] = set()
    for statement in document["Statement"]:
        assert statement["Effect"] == "Allow", "the shipped policy only allows"
        listed = statement["Action"]
        actions.update([listed] if isinstance(listed, str) else listed)
    return actions


class CallRecorder:
    """Collects the IAM action of every AWS request attempt an adapter makes (its `on_call` hook)."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, action: str) -> None:
        self.calls.append(action)

    @property
    def actions(self) -> set[str]:
        return set(self.calls)

    def count(self, action: str) -> int:
        return self.calls.count(action)


class SleepRecorder:
    """Named fake for `time.sleep`: records each wait and moves the fake clock instead of sleeping."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.waits: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.clock.advance(seconds)


class StubbedAws:
    """Named fake: AWS as botocore's Stubber plays it, for what moto lacks (EIP reverse DNS, EC2 Service Quotas,
    `PrivateIpAddress` on associate, error codes moto never returns). The clients are real botocore clients, so
    every request is still validated against AWS's API model; only the responses are queued by the test.
    Passed to the adapter as its session (it has `client(service, **kwargs)`)."""

    def __init__(self, region: str = REGION) -> None:
        self._session = boto3.Session(region_name=region, **FAKE_CREDENTIALS)
        self._clients: dict[str, Any] = {}
        self.stubbers: dict[str, Stubber] = {}

    def client(self, service_name: str, **kwargs: Any) -> Any:
        if service_name not in self._clients:
            kwargs.setdefault("config", Config(retries={"mode": "standard", "total_max_attempts": 1}))
            kwargs.setdefault("endpoint_url", "http://127.0.0.1:9")  # never reached: the stubber answers first
            client = self._session.client(service_name, **kwargs)
            stubber = Stubber(client)
            stubber.activate()
            self._clients[service_name] = client
            self.stubbers[service_name] = stubber
        return self._clients[service_name]

    def stub(self, service_name: str) -> Stubber:
        """The stubber of a service's client (made now if the adapter has not asked for it yet)."""
        self.client(service_name)
        return self.stubbers[service_name]

    def assert_all_answered(self) -> None:
        for stubber in self.stubbers.values():
            stubber.assert_no_pending_responses()

    def close(self) -> None:
        for stubber in self.stubbers.values():
            stubber.deactivate()
        for client in self._clients.values():
            client.close()


AdapterFactory = Callable[..., Ec2Adapter]


@pytest.fixture
def aws_calls() -> Iterator[CallRecorder]:
    """Records every AWS call of the test; fails the test if one is not allowed by docs/iam-policy.json."""
    recorder = CallRecorder()
    yield recorder
    missing = recorder.actions - policy_actions()
    assert not missing, f"AWS calls missing from docs/iam-policy.json: {sorted(missing)}"


@pytest.fixture
def moto_aws(aws_env: dict[str, str]) -> Iterator[None]:
    """moto's in-process AWS for the test's duration (fresh, empty account)."""
    from moto import mock_aws  # imported late: moto is heavy

    with mock_aws():
        yield


@pytest.fixture
def sleeper(clock: FakeClock) -> SleepRecorder:
    return SleepRecorder(clock)


@pytest.fixture
def make_adapter(clock: FakeClock, sleeper: SleepRecorder, aws_calls: CallRecorder) -> Iterator[AdapterFactory]:
    """Build adapters wired to the fake clock, the recording sleep, a seeded RNG and the call recorder.

    Without `session`, the adapter uses a real boto3 session (moto answers when `moto_aws` is active).
    """
    made: list[Ec2Adapter] = []

    def build(session: Any = None, *, backoff: Backoff | None = None, bucket: TokenBucket | None = None,
              seed: int = 7) -> Ec2Adapter:
        factory = (lambda: session) if session is not None else (lambda: boto3.Session(region_name=REGION))
        adapter = Ec2Adapter(factory, REGION, sleep=sleeper, clock=clock, rng=random.Random(seed),
                             on_call=aws_calls, backoff=backoff, bucket=bucket)
        made.append(adapter)
        return adapter

    yield build
    for adapter in made:
        adapter.close()


@pytest.fixture
def stubbed_aws() -> Iterator[StubbedAws]:
    fake = StubbedAws()
    yield fake
    fake.close()


def create_host(instance_type: str = "c5.large") -> tuple[str, str]:
    """Make a VPC, subnet and running instance in moto; return (instance id, primary ENI id)."""
    ec2 = boto3.client("ec2", region_name=REGION)
    try:
        vpc_id = ec2.create_vpc(CidrBlock="10.20.0.0/16")["Vpc"]["VpcId"]
        subnet_id = ec2.create_subnet(VpcId=vpc_id, CidrBlock="10.20.1.0/24")["Subnet"]["SubnetId"]
        instance = ec2.run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1, InstanceType=instance_type,
                                     SubnetId=subnet_id)["Instances"][0]
        return instance["InstanceId"], instance["NetworkInterfaces"][0]["NetworkInterfaceId"]
    finally:
        ec2.close()


def client_error(code: str, message: str = "stubbed error", status: int = 400) -> dict[str, Any]:
    """Keyword arguments for `Stubber.add_client_error` that make AWS answer with `code`."""
    return {"service_error_code": code, "service_message": message, "http_status_code": status}
