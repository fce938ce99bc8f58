"""One test per AWS error branch the adapter maps, with AWS played by the named Stubber fake (`StubbedAws`) where
moto never returns the code. moto-backed NotFound branches live in test_aws_moto.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from botocore.stub import ANY

from ippool import errors
from ippool.aws.models import pool_tags
from ippool.aws.pacing import Backoff
from ippool.states import EipState
from tests.support.aws import AdapterFactory, CallRecorder, SleepRecorder, StubbedAws, client_error

TAGS = pool_tags("pool-a", "sender-1", 3, EipState.INCOMING)
ALLOCATED = {"AllocationId": "eipalloc-0abc", "PublicIp": "198.18.0.9", "Domain": "vpc"}


def test_address_limit_exceeded_names_the_quota_to_raise(make_adapter: AdapterFactory,
                                                         stubbed_aws: StubbedAws) -> None:
    stubbed_aws.stub("ec2").add_client_error("allocate_address", **client_error(
        "AddressLimitExceeded", "The maximum number of addresses has been reached."))
    with pytest.raises(errors.AddressQuotaExceeded) as caught:
        make_adapter(stubbed_aws).allocate_address(TAGS)
    message = str(caught.value)
    assert "L-0263D0A3" in message and "request an increase" in message and "us-east-1" in message
    assert caught.value.exit_code == 1
    stubbed_aws.assert_all_answered()


def test_request_limit_exceeded_is_retried_then_succeeds(make_adapter: AdapterFactory, stubbed_aws: StubbedAws,
                                                         sleeper: SleepRecorder, aws_calls: CallRecorder) -> None:
    ec2 = stubbed_aws.stub("ec2")
    for _ in range(2):
        ec2.add_client_error("allocate_address", **client_error("RequestLimitExceeded", "Request limit exceeded.", 503))
    ec2.add_response("allocate_address", ALLOCATED)
    backoff = Backoff(base_s=1.0, cap_s=8.0, max_attempts=4)

    address = make_adapter(stubbed_aws, backoff=backoff).allocate_address(TAGS)

    assert address.allocation_id == "eipalloc-0abc"
    assert aws_calls.count("ec2:AllocateAddress") == 3
    assert len(sleeper.waits) == 2
    assert all(0.0 <= wait <= backoff.ceiling(n) for n, wait in enumerate(sleeper.waits))
    stubbed_aws.assert_all_answered()


def test_request_limit_exceeded_gives_up_after_max_attempts(make_adapter: AdapterFactory, stubbed_aws: StubbedAws,
                                                            sleeper: SleepRecorder, aws_calls: CallRecorder) -> None:
    backoff = Backoff(base_s=0.5, cap_s=4.0, max_attempts=3)
    for _ in range(backoff.max_attempts):
        stubbed_aws.stub("ec2").add_client_error("associate_address", **client_error("RequestLimitExceeded"))
    with pytest.raises(errors.AwsThrottled, match="RequestLimitExceeded") as caught:
        make_adapter(stubbed_aws, backoff=backoff).associate_address("eipalloc-0abc", "eni-01", "10.0.0.5")
    assert caught.value.exit_code == 1 and "3 times" in str(caught.value)
    assert aws_calls.count("ec2:AssociateAddress") == 3
    assert len(sleeper.waits) == 2  # no pointless wait after the last attempt
    stubbed_aws.assert_all_answered()


def test_invalid_ip_address_in_use_on_release(make_adapter: AdapterFactory, stubbed_aws: StubbedAws) -> None:
    stubbed_aws.stub("ec2").add_client_error("release_address", **client_error(
        "InvalidIPAddress.InUse", "Address 198.18.0.9 is in use."))
    with pytest.raises(errors.AddressInUse, match="eipalloc-0abc"):
        make_adapter(stubbed_aws).release_address("eipalloc-0abc")


def test_invalid_allocation_id_not_found_on_release_is_already_done(make_adapter: AdapterFactory,
                                                                    stubbed_aws: StubbedAws) -> None:
    stubbed_aws.stub("ec2").add_client_error("release_address", **client_error("InvalidAllocationID.NotFound"))
    assert make_adapter(stubbed_aws).release_address("eipalloc-0abc") is False


@pytest.mark.parametrize("code", ["AuthFailure", "ExpiredToken", "UnauthorizedOperation"])
def test_refused_credentials_are_a_config_error(code: str, make_adapter: AdapterFactory,
                                                stubbed_aws: StubbedAws) -> None:
    stubbed_aws.stub("ec2").add_client_error("describe_addresses", **client_error(code, "refused", 401))
    with pytest.raises(errors.AwsCredentialsError) as caught:
        make_adapter(stubbed_aws).describe_pool_addresses("pool-a")
    assert code in str(caught.value) and "docs/iam-policy.json" in str(caught.value)
    assert caught.value.exit_code == 2


def test_missing_credentials_are_a_config_error(make_adapter: AdapterFactory, monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: Path) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing may leave the machine
    with pytest.raises(errors.AwsCredentialsError, match="no AWS credentials"):
        make_adapter().describe_pool_addresses("pool-a")


def test_half_set_credentials_are_a_config_error(make_adapter: AdapterFactory, monkeypatch: pytest.MonkeyPatch,
                                                 tmp_path: Path) -> None:
    for name in ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLE")  # key id without its secret
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    with pytest.raises(errors.AwsCredentialsError, match="PartialCredentialsError") as caught:
        make_adapter().describe_pool_addresses("pool-a")
    assert caught.value.exit_code == 2


def test_malformed_instance_id_is_unknown_instance(make_adapter: AdapterFactory, stubbed_aws: StubbedAws) -> None:
    stubbed_aws.stub("ec2").add_client_error("describe_instances", **client_error(
        "InvalidInstanceID.Malformed", "Invalid id: \"sender-1\""))
    with pytest.raises(errors.UnknownInstance, match="sender-1") as caught:
        make_adapter(stubbed_aws).describe_instance("sender-1")
    assert caught.value.exit_code == 2


def test_private_ip_limit_is_a_slot_count_error(make_adapter: AdapterFactory, stubbed_aws: StubbedAws) -> None:
    stubbed_aws.stub("ec2").add_client_error("assign_private_ip_addresses", **client_error(
        "PrivateIpAddressLimitExceeded", "Number of private addresses will exceed limit."))
    with pytest.raises(errors.SlotLimitExceeded, match="sendhost_pool_size") as caught:
        make_adapter(stubbed_aws).assign_secondary_private_ips("eni-01", 40)
    assert caught.value.exit_code == 2


def test_other_refusals_carry_the_aws_code(make_adapter: AdapterFactory, stubbed_aws: StubbedAws) -> None:
    stubbed_aws.stub("ec2").add_client_error("create_tags", **client_error("InvalidParameterValue", "bad tag"))
    with pytest.raises(errors.AwsRequestFailed, match="InvalidParameterValue") as caught:
        make_adapter(stubbed_aws).create_tags("eipalloc-0abc", {"sendhost:state": "active"})
    assert caught.value.code == "InvalidParameterValue"


def test_unreachable_endpoint_is_an_operation_failure(make_adapter: AdapterFactory, aws_env: dict[str, str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.support.net import free_port

    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")  # a port nobody listens on
    with pytest.raises(errors.AwsRequestFailed, match="could not reach AWS") as caught:
        make_adapter().describe_pool_addresses("pool-a")
    assert caught.value.exit_code == 1


def test_route53_delete_of_a_missing_record_is_already_done(make_adapter: AdapterFactory,
                                                            stubbed_aws: StubbedAws) -> None:
    # moto accepts deleting a record that is not there; Route 53 refuses with InvalidChangeBatch.
    route53 = stubbed_aws.stub("route53")
    route53.add_response("list_hosted_zones_by_name", {
        "HostedZones": [{"Id": "/hostedzone/Z1", "Name": "mail.example.com.", "CallerReference": "r"}],
        "IsTruncated": False, "MaxItems": "1"}, {"DNSName": "mail.example.com.", "MaxItems": "100"})
    route53.add_client_error("change_resource_record_sets", **client_error(
        "InvalidChangeBatch", "Tried to delete resource record set [name='s1.mail.example.com.', type='A'] "
        "but it was not found"), expected_params={"HostedZoneId": "Z1", "ChangeBatch": ANY})
    assert make_adapter(stubbed_aws).delete_a_record("mail.example.com", "s1.mail.example.com", "198.18.0.1") is False
    stubbed_aws.assert_all_answered()
