"""The IAM policy is scoped to one deployment: its pool name, its regions, its PTR zones.

Two pools in one account (`alpha`, `beta`): alpha's policy must let alpha's credentials change only alpha's
addresses and interfaces. `allows` below models IAM's evaluation for the condition operators this policy uses, as
AWS documents them (a missing key fails StringEquals and passes ForAllValues; Null "false" requires the key;
*IfExists passes when absent). It is a model, not AWS: moto's IAM checks the document's grammar, and
tests/ippool/test_aws_policy.py checks the actions against the calls the adapter makes.
"""

from __future__ import annotations

import json
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import boto3
import pytest

from tests.conftest import REPO_ROOT, run_cli
from tests.support.aws import REGION, moto_aws  # noqa: F401  (fixture)
from toolkit.iam_policy import render_policy

ALPHA = render_policy("alpha", ["us-east-1"], ["mail.example.com"])
EIP = "arn:aws:ec2:us-east-1:123456789012:elastic-ip/eipalloc-0abc"
ENI = "arn:aws:ec2:us-east-1:123456789012:network-interface/eni-0abc"
INSTANCE = "arn:aws:ec2:us-east-1:123456789012:instance/i-0abc"
ZONE = "arn:aws:route53:::hostedzone/Z0123"


def _values(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def _condition_holds(operator: str, key: str, expected: Any, context: dict[str, Any]) -> bool:
    present = key in context
    actual = _values(context[key]) if present else []
    wanted = _values(expected)
    if operator == "Null":
        return (not present) == (wanted == ["true"])
    if operator.startswith("ForAllValues:"):
        test = operator.split(":", 1)[1]
        match = {"StringLike": lambda v: any(fnmatchcase(v, w) for w in wanted),
                 "StringEquals": lambda v: v in wanted,
                 "StringNotEquals": lambda v: v not in wanted}[test]
        return all(match(v) for v in actual)  # vacuously true when the key is missing
    if_exists = operator.endswith("IfExists")
    if not present:
        return if_exists
    base = operator.removesuffix("IfExists")
    if base == "StringEquals":
        return any(v in wanted for v in actual)
    if base == "StringLike":
        return any(fnmatchcase(v, w) for v in actual for w in wanted)
    raise AssertionError(f"the model does not know {operator}; extend it before using it in the policy")


def allows(policy: dict[str, Any], action: str, resources: list[str], context: dict[str, Any]) -> bool:
    """Every resource of the request must be allowed by some statement (IAM checks each resource it names)."""
    def one(resource: str, resource_context: dict[str, Any]) -> bool:
        for statement in policy["Statement"]:
            if action not in _values(statement["Action"]):
                continue
            if not any(fnmatchcase(resource, pattern) for pattern in _values(statement["Resource"])):
                continue
            conditions = statement.get("Condition", {})
            if all(_condition_holds(op, key, expected, resource_context)
                   for op, block in conditions.items() for key, expected in block.items()):
                return True
        return False

    return all(one(resource, {**context, **context.get(resource, {})}) for resource in resources)


def tagged(pool: str | None) -> dict[str, str]:
    return {"aws:ResourceTag/sendhost:pool": pool} if pool else {}


US = {"aws:RequestedRegion": "us-east-1"}
EU = {"aws:RequestedRegion": "eu-west-1"}


@pytest.mark.parametrize("action", ["ec2:ReleaseAddress", "ec2:DisassociateAddress", "ec2:ModifyAddressAttribute",
                                    "ec2:ResetAddressAttribute"])
def test_alpha_may_change_its_own_eips_but_not_betas(action: str) -> None:
    assert allows(ALPHA, action, [EIP], {**US, **tagged("alpha")})
    assert not allows(ALPHA, action, [EIP], {**US, **tagged("beta")})
    assert not allows(ALPHA, action, [EIP], {**US, **tagged(None)})
    assert not allows(ALPHA, action, [EIP], {**EU, **tagged("alpha")}), "outside the inventory's regions"


def test_association_needs_both_the_eip_and_the_interface_to_be_alphas() -> None:
    def associate(eip_pool: str | None, eni_pool: str | None) -> bool:
        return allows(ALPHA, "ec2:AssociateAddress", [EIP, ENI, INSTANCE],
                      {**US, EIP: tagged(eip_pool), ENI: tagged(eni_pool), INSTANCE: tagged(eni_pool)})

    assert associate("alpha", "alpha")
    assert not associate("beta", "alpha")
    assert not associate("alpha", "beta"), "alpha may not attach its address to beta's host"
    assert not associate("alpha", None), "sender instances and ENIs must carry the pool tag"


def test_slot_private_ips_only_on_alphas_interfaces() -> None:
    for action in ("ec2:AssignPrivateIpAddresses", "ec2:UnassignPrivateIpAddresses"):
        assert allows(ALPHA, action, [ENI], {**US, **tagged("alpha")})
        assert not allows(ALPHA, action, [ENI], {**US, **tagged("beta")})


def test_allocation_must_tag_the_new_address_for_alpha() -> None:
    tags = {"sendhost:pool": "alpha", "sendhost:host": "sender-1", "sendhost:slot": "0", "sendhost:state": "incoming"}

    def allocate(request_tags: dict[str, str]) -> bool:
        context = {**US, "aws:TagKeys": list(request_tags), "ec2:CreateAction": "AllocateAddress",
                   **{f"aws:RequestTag/{k}": v for k, v in request_tags.items()}}
        return (allows(ALPHA, "ec2:AllocateAddress", [EIP], context)
                and allows(ALPHA, "ec2:CreateTags", [EIP], context))

    assert allocate(tags)
    assert not allocate({**tags, "sendhost:pool": "beta"})
    assert not allocate({k: v for k, v in tags.items() if k != "sendhost:slot"})
    assert not allocate({**tags, "Name": "mine"}), "only sendhost:* tags"


def test_retagging_cannot_move_an_address_to_another_pool_or_drop_its_pool_tag() -> None:
    def create_tags(resource_pool: str, request_tags: dict[str, str]) -> bool:
        context = {**US, **tagged(resource_pool), "aws:TagKeys": list(request_tags),
                   **{f"aws:RequestTag/{k}": v for k, v in request_tags.items()}}
        return allows(ALPHA, "ec2:CreateTags", [EIP], context)

    def delete_tags(resource_pool: str, keys: list[str] | None) -> bool:
        context = {**US, **tagged(resource_pool), **({"aws:TagKeys": keys} if keys is not None else {})}
        return allows(ALPHA, "ec2:DeleteTags", [EIP], context)

    assert create_tags("alpha", {"sendhost:state": "parked", "sendhost:parked_until": "2026-11-30T05:00:00Z"})
    assert create_tags("alpha", {"sendhost:pool": "alpha", "sendhost:state": "active"})
    assert not create_tags("alpha", {"sendhost:pool": "beta"})
    assert not create_tags("beta", {"sendhost:state": "parked"})
    # The pool never deletes tags (it overwrites them), so the policy grants no DeleteTags at all.
    assert not delete_tags("alpha", ["sendhost:parked_until"])
    assert not delete_tags("alpha", ["sendhost:pool"])
    assert not delete_tags("alpha", None), "DeleteTags without keys deletes every tag"
    assert not delete_tags("beta", ["sendhost:parked_until"])


def test_reads_and_quota_only_in_the_inventorys_regions() -> None:
    for action, resource in (("ec2:DescribeAddresses", "*"), ("servicequotas:GetServiceQuota",
                                                               "arn:aws:servicequotas:us-east-1:1:ec2/L-0263D0A3")):
        assert allows(ALPHA, action, [resource], US)
        assert not allows(ALPHA, action, [resource], EU)


def test_route53_changes_only_a_records_inside_the_ptr_zones() -> None:
    def change(names: list[str], types: list[str], actions: list[str]) -> bool:
        return allows(ALPHA, "route53:ChangeResourceRecordSets", [ZONE], {
            "route53:ChangeResourceRecordSetsNormalizedRecordNames": names,
            "route53:ChangeResourceRecordSetsRecordTypes": types,
            "route53:ChangeResourceRecordSetsActions": actions})

    assert change(["sender-2-0.mail.example.com"], ["A"], ["UPSERT"])
    assert change(["sender-2-0.mail.example.com"], ["A"], ["DELETE"])
    assert not change(["www.example.com"], ["A"], ["UPSERT"]), "outside the configured zone"
    assert not change(["mail.example.com.evil.net"], ["A"], ["UPSERT"])
    assert not change(["sender-2-0.mail.example.com", "www.example.net"], ["A"], ["UPSERT"])
    assert not change(["sender-2-0.mail.example.com"], ["MX"], ["UPSERT"])
    assert not change(["sender-2-0.mail.example.com"], ["A"], ["CREATE"])


def test_without_ptr_zones_there_is_no_route53_permission() -> None:
    policy = render_policy("alpha", ["us-east-1"])
    assert not [a for s in policy["Statement"] for a in _values(s["Action"]) if a.startswith("route53:")]


def test_policies_for_two_pools_differ_only_in_the_pool_name() -> None:
    alpha = json.dumps(render_policy("alpha", ["us-east-1", "eu-west-1"], ["mail.example.com"]))
    beta = json.dumps(render_policy("beta", ["us-east-1", "eu-west-1"], ["mail.example.com"]))
    assert "beta" not in alpha and alpha.count('"alpha"') == beta.count('"beta"') >= 7
    assert alpha.replace('"alpha"', '"beta"') == beta


@pytest.mark.usefixtures("moto_aws")
def test_rendered_policies_pass_iams_grammar_check() -> None:
    iam = boto3.client("iam", region_name=REGION)
    try:
        for index, policy in enumerate([render_policy("alpha", ["us-east-1", "eu-west-1"], ["a.example.com",
                                                                                              "b.example.org"]),
                                        render_policy("team.b_2", ["ap-southeast-2"])]):
            created = iam.create_policy(PolicyName=f"sendhost-{index}", PolicyDocument=json.dumps(policy))
            assert created["Policy"]["PolicyName"] == f"sendhost-{index}"
    finally:
        iam.close()


def test_cli_renders_the_example_inventorys_policy_as_shipped_in_docs() -> None:
    result = run_cli("--inventory", str(REPO_ROOT / "inventory.example.yml"), "iam", "policy")
    assert result.returncode == 0, result.stderr
    assert result.stdout == (REPO_ROOT / "docs" / "iam-policy.json").read_text()


def test_cli_flags_name_a_deployment_without_an_inventory(tmp_path: Path) -> None:
    result = run_cli("iam", "policy", "--pool-name", "beta", "--region", "eu-west-1", "--region", "us-east-1",
                     cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == render_policy("beta", ["eu-west-1", "us-east-1"])


@pytest.mark.parametrize(("args", "message"), [
    ((), "error: iam policy: name the deployment: pass --inventory PATH, or --pool-name NAME and --region REGION"),
    (("--pool-name", "team a", "--region", "us-east-1"), "error: --pool-name: 'team a' is not a pool name"),
    (("--pool-name", "a", "--region", "mars"), "error: --region: 'mars' is not an AWS region like us-east-1"),
    (("--pool-name", "a", "--region", "us-east-1", "--ptr-zone", "*"), "error: --ptr-zone: '*' is not a zone name"),
])
def test_cli_without_a_deployment_is_exit_2(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    result = run_cli("iam", "policy", *args, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout == "" and result.stderr.startswith(message), result.stderr


def _resources(policy: dict[str, Any]) -> list[str]:
    return [r for s in policy["Statement"] for r in _values(s["Resource"]) if r != "*"]


@pytest.mark.parametrize(("region", "partition"), [("us-east-1", "aws"), ("cn-north-1", "aws-cn"),
                                                    ("us-gov-west-1", "aws-us-gov")])
def test_arns_name_the_partition_of_the_regions(region: str, partition: str) -> None:
    resources = _resources(render_policy("alpha", [region], ["mail.example.com"]))
    assert len(resources) >= 7 and all(r.startswith(f"arn:{partition}:") for r in resources), resources


def _inventory_in(tmp_path: Path, example_inventory: Path, regions: tuple[str, str]) -> Path:
    text = example_inventory.read_text().split("sendhost_region: us-east-1")
    assert len(text) == 3, "the example inventory has two hosts, both in us-east-1"
    path = tmp_path / "inventory.yml"
    path.write_text(f"{text[0]}sendhost_region: {regions[0]}{text[1]}sendhost_region: {regions[1]}{text[2]}")
    return path


def test_cli_renders_the_inventory_s_partition(tmp_path: Path, example_inventory: Path) -> None:
    inventory = _inventory_in(tmp_path, example_inventory, ("cn-north-1", "cn-northwest-1"))
    result = run_cli("--inventory", str(inventory), "iam", "policy")
    assert result.returncode == 0, result.stderr
    policy = json.loads(result.stdout)
    assert all(r.startswith("arn:aws-cn:") for r in _resources(policy))
    assert policy["Statement"][0]["Condition"]["StringEquals"]["aws:RequestedRegion"] == ["cn-north-1",
                                                                                          "cn-northwest-1"]


def test_an_inventory_spanning_two_partitions_is_exit_2(tmp_path: Path, example_inventory: Path) -> None:
    inventory = _inventory_in(tmp_path, example_inventory, ("us-east-1", "cn-north-1"))
    result = run_cli("--inventory", str(inventory), "iam", "policy")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (f"error: {inventory}: the hosts' sendhost_region: regions of different AWS partitions "
                             "(us-east-1 in aws; cn-north-1 in aws-cn): one policy and one set of credentials cover "
                             "one partition; put the hosts of each partition in an inventory of their own\n")
    flags = run_cli("iam", "policy", "--pool-name", "a", "--region", "us-gov-west-1", "--region", "us-east-1",
                    cwd=tmp_path)
    assert flags.returncode == 2 and flags.stderr.startswith("error: --region: regions of different AWS partitions")
