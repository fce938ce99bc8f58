"""The IAM policy one deployment needs, rendered for its pool name, regions and PTR zones.

Scoping, and why:
- every EC2 mutation requires the resource's (or, when allocating, the request's) `sendhost:pool` tag to EQUAL
  this pool's name, so the credentials of pool `alpha` cannot move, re-tag or release pool `beta`'s addresses
  (a mere "has a sendhost:pool tag" condition let them);
- slot private IPs and attachments are allowed only on network interfaces and instances tagged with the pool,
  so the sender instances and their ENIs must carry `sendhost:pool=<name>` (set when the instance is launched;
  this policy cannot add that tag itself, or it would grant itself any instance);
- a tag change may not move an address to another pool, nor delete its pool tag;
- EC2 and Service Quotas calls are limited with `aws:RequestedRegion` to the inventory's regions;
- Route 53 changes are A records only, UPSERT or DELETE only, and only for names inside the configured PTR zones
  (`route53:ChangeResourceRecordSetsNormalizedRecordNames`); with no PTR zone there is no Route 53 statement;
- ARNs name the partition of the regions (`aws`, `aws-cn` for cn-*, `aws-us-gov` for us-gov-*, from botocore's
  endpoint data): a policy, like a set of credentials, lives in one partition, so regions of two are refused.

The actions listed are exactly the calls ippool's AWS adapter makes (tests/ippool/test_aws_policy.py holds that).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolkit.inventory import Inventory

# The tag keys are part of the IAM contract with ippool (ippool.aws.models); the test checks they agree.
TAG_POOL = "sendhost:pool"
REQUIRED_NEW_EIP_TAGS = ("sendhost:pool", "sendhost:host", "sendhost:slot", "sendhost:state")


def _arns(partition: str) -> dict[str, str]:
    return {"eip": f"arn:{partition}:ec2:*:*:elastic-ip/*",
            "eni": f"arn:{partition}:ec2:*:*:network-interface/*",
            "instance": f"arn:{partition}:ec2:*:*:instance/*",
            "eip_quota": f"arn:{partition}:servicequotas:*:*:ec2/L-0263D0A3",
            "hosted_zone": f"arn:{partition}:route53:::hostedzone/*",
            "change": f"arn:{partition}:route53:::change/*"}


def partition_of_regions(regions: Iterable[str]) -> str:
    """The one AWS partition all `regions` are in; ValueError naming them when they span two (or one is in none)."""
    from ippool.aws.client import partition_of  # late: boto3 is heavy, and only ippool.aws imports it

    partitions: dict[str, list[str]] = {}
    for region in sorted(set(regions)):
        partitions.setdefault(partition_of(region), []).append(region)
    if len(partitions) > 1:
        spread = "; ".join(f"{', '.join(names)} in {partition}" for partition, names in sorted(partitions.items()))
        raise ValueError(f"regions of different AWS partitions ({spread}): one policy and one set of credentials "
                         "cover one partition; put the hosts of each partition in an inventory of their own")
    if not partitions:
        raise ValueError("no region: a policy needs at least one region the sender hosts run in")
    return next(iter(partitions))


def render_policy(pool_name: str, regions: Iterable[str], ptr_zones: Iterable[str] = ()) -> dict[str, Any]:
    """The policy document for one deployment: its pool name, the regions its hosts are in, its PTR zones."""
    region_list = sorted(set(regions))
    arn = _arns(partition_of_regions(region_list))
    zones = sorted({zone.rstrip(".").lower() for zone in ptr_zones})
    in_regions = {"aws:RequestedRegion": region_list}
    ours = {f"aws:ResourceTag/{TAG_POOL}": pool_name, **in_regions}
    statements: list[dict[str, Any]] = [
        {"Sid": "ReadPoolState", "Effect": "Allow",
         "Action": ["ec2:DescribeAddresses", "ec2:DescribeInstances", "ec2:DescribeInstanceTypes",
                    "ec2:DescribeNetworkInterfaces", "ec2:DescribeAddressesAttribute", "ec2:DescribeSubnets",
                    "ec2:DescribeRouteTables"],  # `pool doctor`: does the subnet route to an internet gateway
         "Resource": "*", "Condition": {"StringEquals": in_regions}},
        {"Sid": "SlotPrivateIpsOnOurInterfaces", "Effect": "Allow",
         "Action": ["ec2:AssignPrivateIpAddresses", "ec2:UnassignPrivateIpAddresses"],
         "Resource": arn["eni"], "Condition": {"StringEquals": ours}},
        {"Sid": "AllocateOnlyEipsTaggedForThisPool", "Effect": "Allow", "Action": "ec2:AllocateAddress",
         "Resource": arn["eip"],
         "Condition": {"StringEquals": {f"aws:RequestTag/{TAG_POOL}": pool_name, **in_regions},
                       "Null": {f"aws:RequestTag/{key}": "false" for key in REQUIRED_NEW_EIP_TAGS},
                       "ForAllValues:StringLike": {"aws:TagKeys": ["sendhost:*"]}}},
        {"Sid": "TagEipsWhenAllocating", "Effect": "Allow", "Action": "ec2:CreateTags", "Resource": arn["eip"],
         "Condition": {"StringEquals": {"ec2:CreateAction": "AllocateAddress",
                                        f"aws:RequestTag/{TAG_POOL}": pool_name, **in_regions}}},
        {"Sid": "RetagOnlyThisPoolsEips", "Effect": "Allow", "Action": "ec2:CreateTags", "Resource": arn["eip"],
         "Condition": {"StringEquals": ours,
                       # re-tagging may repeat the pool tag, never change it to another pool's name
                       "StringEqualsIfExists": {f"aws:RequestTag/{TAG_POOL}": pool_name},
                       "ForAllValues:StringLike": {"aws:TagKeys": ["sendhost:*"]}}},
        {"Sid": "MoveAndReleaseOnlyThisPoolsEips", "Effect": "Allow",
         "Action": ["ec2:AssociateAddress", "ec2:DisassociateAddress", "ec2:ReleaseAddress",
                    "ec2:ModifyAddressAttribute", "ec2:ResetAddressAttribute"],
         "Resource": arn["eip"], "Condition": {"StringEquals": ours}},
        {"Sid": "AttachToThisPoolsSenderInterfaces", "Effect": "Allow",
         "Action": ["ec2:AssociateAddress", "ec2:DisassociateAddress"],
         "Resource": [arn["eni"], arn["instance"]], "Condition": {"StringEquals": ours}},
        {"Sid": "ReadEipQuota", "Effect": "Allow", "Action": "servicequotas:GetServiceQuota",
         "Resource": arn["eip_quota"], "Condition": {"StringEquals": in_regions}},
    ]
    if zones:
        statements += [
            # Route 53 is global: its requests are not made "in" the hosts' regions, so no region condition.
            {"Sid": "FindPtrZones", "Effect": "Allow", "Action": "route53:ListHostedZonesByName", "Resource": "*"},
            # The pool waits for its record changes to be INSYNC before it asks EC2 for the PTR.
            {"Sid": "WaitForRecordChanges", "Effect": "Allow", "Action": "route53:GetChange",
             "Resource": arn["change"]},
            {"Sid": "ForwardRecordsInPtrZonesOnly", "Effect": "Allow", "Action": "route53:ChangeResourceRecordSets",
             "Resource": arn["hosted_zone"],
             "Condition": {"ForAllValues:StringEquals": {"route53:ChangeResourceRecordSetsRecordTypes": ["A"],
                                                         "route53:ChangeResourceRecordSetsActions": ["UPSERT",
                                                                                                     "DELETE"]},
                           "ForAllValues:StringLike": {
                               "route53:ChangeResourceRecordSetsNormalizedRecordNames": [f"*.{z}" for z in zones]}}},
        ]
    return {"Version": "2012-10-17", "Statement": statements}


def render_policy_json(pool_name: str, regions: Iterable[str], ptr_zones: Iterable[str] = ()) -> str:
    """The policy as the JSON text AWS takes (and docs/iam-policy.json holds for the example inventory)."""
    return json.dumps(render_policy(pool_name, regions, ptr_zones), indent=2) + "\n"


@dataclass(frozen=True)
class Deployment:
    """What a policy is scoped to: one pool name, the regions its hosts run in, the zones of their PTR records."""

    pool_name: str
    regions: tuple[str, ...]
    ptr_zones: tuple[str, ...] = ()

    @classmethod
    def of(cls, inventory: Inventory) -> Deployment:
        return cls(inventory.pool_name, tuple(sorted({host.region for host in inventory.hosts})),
                   tuple(sorted({h.pool.ptr_zone for h in inventory.hosts if h.pool.ptr and h.pool.ptr_zone})))

    def policy_json(self) -> str:
        return render_policy_json(self.pool_name, self.regions, self.ptr_zones)
