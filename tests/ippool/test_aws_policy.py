"""docs/iam-policy.json lists exactly the AWS calls the adapter makes, and lets it touch only EIPs tagged ours.

Every adapter test also checks its own recorded calls against the policy at teardown (`aws_calls` fixture); this
module drives every public adapter method once, so a call the policy lacks, or one it lists but the code never
makes, fails here even if no other test happens to reach it.
"""
# ruff: noqa: F811  (pytest fixtures are imported from tests.support.aws and requested by name)

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable
from pathlib import Path

import boto3
import pytest

import ippool.aws
from ippool.aws.adapter import IAM_PREFIX, Ec2Adapter
from ippool.aws.models import TAG_PARKED_UNTIL, TAG_POOL, pool_tags
from ippool.spec import DEFAULT_POOL_NAME
from ippool.states import EipState
from tests.conftest import REPO_ROOT
from tests.support.aws import (  # noqa: F401  (fixtures)
    POLICY_PATH,
    REGION,
    AdapterFactory,
    CallRecorder,
    StubbedAws,
    aws_calls,
    create_host,
    make_adapter,
    moto_aws,
    policy_actions,
    sleeper,
    stubbed_aws,
)
from toolkit import iam_policy
from toolkit.iam_policy import Deployment
from toolkit.inventory import load_inventory


def _drive_every_method(moto: Ec2Adapter, stubbed: Ec2Adapter, fake: StubbedAws) -> dict[str, Callable[[], object]]:
    """One call per public adapter method; moto answers what it implements, the Stubber fake the rest."""
    instance_id, eni_id = create_host()
    route53 = boto3.client("route53", region_name=REGION)
    route53.create_hosted_zone(Name="mail.example.com", CallerReference="policy")
    route53.close()
    state: dict[str, str] = {}

    def allocate() -> object:
        address = moto.allocate_address(pool_tags("p", "h", 0, EipState.INCOMING))
        state["allocation_id"] = address.allocation_id
        return address

    def assign() -> object:
        interface = moto.assign_secondary_private_ips(eni_id, 2)
        state["private_ip"] = interface.secondary_private_ips[0]
        return interface

    def associate() -> object:
        state["association_id"] = moto.associate_address(state["allocation_id"], eni_id, state["private_ip"])
        return state["association_id"]

    def interface_network() -> object:
        network = moto.describe_interface_network(eni_id)
        state["subnet_id"], state["vpc_id"] = network.subnet_id, network.vpc_id
        return network

    def upsert() -> object:
        state["change_id"] = moto.upsert_a_record("mail.example.com", "s1.mail.example.com", "198.18.0.1")
        return state["change_id"]

    ec2 = fake.stub("ec2")
    ec2.add_response("modify_address_attribute", {})
    ec2.add_response("describe_addresses_attribute", {"Addresses": [
        {"AllocationId": "eipalloc-0abc", "PtrRecord": "s1.mail.example.com."}]})
    ec2.add_response("describe_addresses_attribute", {"Addresses": [
        {"AllocationId": "eipalloc-0abc", "PtrRecord": "s1.mail.example.com."}]})
    ec2.add_response("reset_address_attribute", {})
    fake.stub("service-quotas").add_response("get_service_quota", {"Quota": {"Value": 5.0}})

    return {  # in an order that works: later calls use what earlier ones made
        "describe_instance": lambda: moto.describe_instance(instance_id),
        "describe_network_interface": lambda: moto.describe_network_interface(eni_id),
        "max_private_ips_per_interface": lambda: moto.max_private_ips_per_interface("c5.large"),
        "describe_interface_network": interface_network,
        "effective_route_table": lambda: moto.effective_route_table(state["subnet_id"], state["vpc_id"]),
        "assign_secondary_private_ips": assign,
        "subnet_cidr": lambda: moto.subnet_cidr(moto.describe_network_interface(eni_id).subnet_id),
        "interfaces_holding": lambda: moto.interfaces_holding(moto.describe_network_interface(eni_id).subnet_id,
                                                              [state["private_ip"]]),
        "assign_private_ips": lambda: moto.assign_private_ips(eni_id, ["10.20.1.200"]),
        "allocate_address": allocate,
        "associate_address": associate,
        "create_tags": lambda: moto.create_tags(state["allocation_id"], {TAG_PARKED_UNTIL: "2026-11-30T05:00:00Z"}),
        "describe_pool_addresses": lambda: moto.describe_pool_addresses("p", host="h", slot=0),
        "count_region_addresses": moto.count_region_addresses,
        "describe_interface_addresses": lambda: moto.describe_interface_addresses(eni_id),
        "get_address": lambda: moto.get_address(state["allocation_id"]),
        "set_reverse_dns": lambda: stubbed.set_reverse_dns("eipalloc-0abc", "s1.mail.example.com"),
        "describe_reverse_dns": lambda: stubbed.describe_reverse_dns("eipalloc-0abc"),
        "wait_reverse_dns": lambda: stubbed.wait_reverse_dns("eipalloc-0abc", "s1.mail.example.com"),
        "reset_reverse_dns": lambda: stubbed.reset_reverse_dns("eipalloc-0abc"),
        "eip_quota": stubbed.eip_quota,
        "require_credentials": moto.require_credentials,  # resolves the credential chain locally: no AWS call
        "public_zone_id": lambda: moto.public_zone_id("mail.example.com"),
        "upsert_a_record": upsert,
        "wait_for_change": lambda: moto.wait_for_change(state["change_id"]),
        "delete_a_record": lambda: moto.delete_a_record("mail.example.com", "s1.mail.example.com", "198.18.0.1"),
        "disassociate_address": lambda: moto.disassociate_address(state["association_id"]),
        "release_address": lambda: moto.release_address(state["allocation_id"]),
        "unassign_secondary_private_ips": lambda: moto.unassign_secondary_private_ips(eni_id, [state["private_ip"]]),
    }


def _public_methods() -> set[str]:
    return {name for name, member in inspect.getmembers(Ec2Adapter, inspect.isfunction)
            if not name.startswith("_") and name != "close"}


@pytest.mark.usefixtures("moto_aws")
def test_policy_allows_exactly_the_calls_the_adapter_makes(make_adapter: AdapterFactory, stubbed_aws: StubbedAws,
                                                           aws_calls: CallRecorder) -> None:
    drivers = _drive_every_method(make_adapter(), make_adapter(stubbed_aws), stubbed_aws)
    assert set(drivers) == _public_methods(), "drive every public adapter method here, so its calls are checked"
    for call in drivers.values():
        call()
    stubbed_aws.assert_all_answered()
    missing = aws_calls.actions - policy_actions()
    unused = policy_actions() - aws_calls.actions
    assert not missing, f"the adapter calls these, the policy does not allow them: {sorted(missing)}"
    assert not unused, f"the policy allows these, the adapter never calls them: {sorted(unused)}"


def test_every_call_in_the_adapter_source_is_in_the_policy() -> None:
    # A static cross-check: each `self._call("service", "Operation", ...)` in ippool/aws/.
    source = "".join(path.read_text() for path in Path(ippool.aws.__file__).parent.glob("*.py"))
    made = {f"{IAM_PREFIX[service]}:{operation}"
            for service, operation in re.findall(r'_call\(\s*"([\w-]+)",\s*"(\w+)"', source)}
    assert len(made) >= 15
    assert made == policy_actions()


def _statements() -> list[dict[str, object]]:
    return list(json.loads(POLICY_PATH.read_text())["Statement"])


def _as_list(value: object) -> list[str]:
    return [value] if isinstance(value, str) else list(value)  # type: ignore[call-overload]


def test_policy_names_actions_exactly_without_wildcards() -> None:
    for statement in _statements():
        assert all("*" not in action for action in _as_list(statement["Action"])), statement["Sid"]


def test_policy_touches_only_eips_tagged_with_this_pools_name() -> None:
    # Every statement that can change an Elastic IP requires our pool tag to EQUAL the pool's name (on the request
    # when allocating, on the resource afterwards): merely having a sendhost:pool tag let pool A release pool B's.
    for statement in _statements():
        resources = _as_list(statement["Resource"])
        actions = [a for a in _as_list(statement["Action"]) if a.startswith("ec2:") and "Describe" not in a]
        if not actions or not any(":elastic-ip/" in r or r == "*" for r in resources):
            continue
        assert resources == ["arn:aws:ec2:*:*:elastic-ip/*"], f"{statement['Sid']}: mutate only elastic-ip"
        equals = statement["Condition"]["StringEquals"]  # type: ignore[index]
        assert (equals.get("aws:ResourceTag/sendhost:pool") == DEFAULT_POOL_NAME
                or equals.get("aws:RequestTag/sendhost:pool") == DEFAULT_POOL_NAME), statement["Sid"]


def test_docs_policy_is_the_rendering_for_the_example_inventory() -> None:
    # README and docs/security.md show this file; `sendhost iam policy` renders the same for any inventory.
    example = load_inventory(REPO_ROOT / "inventory.example.yml")
    assert example.pool_name == DEFAULT_POOL_NAME
    assert POLICY_PATH.read_text() == Deployment.of(example).policy_json()


def test_policy_tag_keys_are_the_ones_ippool_writes() -> None:
    assert iam_policy.TAG_POOL == TAG_POOL
    assert set(iam_policy.REQUIRED_NEW_EIP_TAGS) == set(pool_tags("p", "h", 0, EipState.INCOMING))


@pytest.mark.usefixtures("moto_aws")
def test_policy_document_passes_iams_grammar_check() -> None:
    # moto's IAM runs AWS's policy-document validation (version, effects, action and ARN syntax, condition shape).
    iam = boto3.client("iam", region_name=REGION)
    try:
        created = iam.create_policy(PolicyName="sendhost-ippool", PolicyDocument=POLICY_PATH.read_text())
        assert created["Policy"]["PolicyName"] == "sendhost-ippool"
        broken = POLICY_PATH.read_text().replace('"Effect": "Allow"', '"Effect": "Permit"', 1)
        with pytest.raises(iam.exceptions.MalformedPolicyDocumentException):
            iam.create_policy(PolicyName="broken", PolicyDocument=broken)
    finally:
        iam.close()
