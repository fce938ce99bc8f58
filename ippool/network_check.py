"""`sendhost pool doctor`: does a sender host's network let its slots' Elastic IPs be the addresses mail leaves from?

An Elastic IP on a private IP only translates traffic that leaves through an internet gateway: the gateway does the
1:1 mapping. Behind a NAT gateway (or any other 0.0.0.0/0 target) every send leaves from that target's address and
the pool's rotation changes nothing the recipient sees. Sends that find no leasable slot fall back to the primary
private IP, which then needs a public address of its own.

Each check reads AWS through the adapter and ends in one `NetworkCheck`. A check that could not look (access denied,
AWS unreachable, unknown instance) says so and names what it needed: it never reports fine.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from ippool import errors
from ippool.aws.models import Instance, InterfaceNetwork, RouteTable

INTERNET = "0.0.0.0/0"
ROUTE_CHECK = "internet route"
PUBLIC_ADDRESS_CHECK = "public address"
CHECK_NAMES = (ROUTE_CHECK, PUBLIC_ADDRESS_CHECK)


class CheckStatus(StrEnum):
    OK = "ok"
    FAILED = "failed"
    COULDNT_CHECK = "couldnt_check"  # the check could not look: nothing is known, good or bad


@dataclass(frozen=True)
class NetworkCheck:
    """The outcome of one check of one host: what was found, and the fix when it is not ok."""

    host: str
    name: str
    status: CheckStatus
    detail: str
    fix: str = ""

    def to_json(self) -> dict[str, str]:
        return {"host": self.host, "check": self.name, "status": str(self.status), "detail": self.detail,
                "fix": self.fix}


class NetworkReader(Protocol):
    """The adapter calls the checks need (`ippool.aws.adapter.Ec2Adapter` has them)."""

    def describe_instance(self, instance_id: str) -> Instance: ...

    def describe_interface_network(self, eni_id: str) -> InterfaceNetwork: ...

    def effective_route_table(self, subnet_id: str, vpc_id: str) -> RouteTable | None: ...


def check_host_network(aws: NetworkReader, host: str, instance_id: str) -> tuple[NetworkCheck, ...]:
    """Every network check of one host, in CHECK_NAMES order; a failed read makes the checks that needed it
    `couldnt_check`, naming the IAM action."""
    try:
        instance = aws.describe_instance(instance_id)
    except errors.IppoolError as exc:
        return tuple(couldnt_check(host, name, "ec2:DescribeInstances", exc) for name in CHECK_NAMES)
    try:
        interface = aws.describe_interface_network(instance.primary_interface.eni_id)
    except errors.IppoolError as exc:
        return tuple(couldnt_check(host, name, "ec2:DescribeNetworkInterfaces", exc) for name in CHECK_NAMES)
    try:
        table = aws.effective_route_table(interface.subnet_id, interface.vpc_id)
    except errors.IppoolError as exc:
        route = couldnt_check(host, ROUTE_CHECK, "ec2:DescribeRouteTables", exc)
    else:
        route = route_check(host, interface, table)
    return route, public_address_check(host, interface)


def couldnt_check(host: str, name: str, action: str, exc: errors.IppoolError) -> NetworkCheck:
    """The check could not look because AWS refused or failed `action`; the fix says how to let it look."""
    if isinstance(exc, errors.AwsCredentialsError):
        fix = (f"allow {action} to these credentials (`sendhost iam policy` prints a policy that has it), or "
               f"refresh them if they expired; then run `sendhost pool doctor` again")
    elif isinstance(exc, errors.UnknownInstance):
        fix = "check sendhost_instance_id and sendhost_region of the host in the inventory"
    else:
        fix = f"run `sendhost pool doctor` again once AWS answers {action}"
    return NetworkCheck(host, name, CheckStatus.COULDNT_CHECK, f"could not read {action}: {exc}", fix)


def route_check(host: str, interface: InterfaceNetwork, table: RouteTable | None) -> NetworkCheck:
    """The subnet's 0.0.0.0/0 must go to an internet gateway, or the slots' Elastic IPs never carry a send."""
    where = f"subnet {interface.subnet_id}"
    if table is None:
        return NetworkCheck(host, ROUTE_CHECK, CheckStatus.FAILED,
                            f"no route table applies to {where} (none associated, and {interface.vpc_id} has no "
                            f"main table)",
                            f"associate {where} with a route table that routes {INTERNET} to an internet gateway")
    which = f"{table.route_table_id} ({'main table of ' + interface.vpc_id if table.main else where})"
    fix = (f"route {INTERNET} of {table.route_table_id} to an internet gateway (igw-…); behind a NAT every send "
           f"leaves from the NAT's address")
    route = table.route_to(INTERNET)
    if route is None:
        return NetworkCheck(host, ROUTE_CHECK, CheckStatus.FAILED,
                            f"{which} has no {INTERNET} route: the host cannot reach the internet", fix)
    if route.state == "blackhole":
        return NetworkCheck(host, ROUTE_CHECK, CheckStatus.FAILED,
                            f"{which} routes {INTERNET} to {route.target or 'a target'} that no longer exists "
                            f"(blackhole): nothing leaves the subnet", fix)
    if route.target.startswith("nat-"):
        return NetworkCheck(host, ROUTE_CHECK, CheckStatus.FAILED,
                            f"{which} routes {INTERNET} to NAT gateway {route.target}: every send leaves from the "
                            f"NAT's address, never from a slot's Elastic IP", fix)
    if not route.target.startswith("igw-"):
        return NetworkCheck(host, ROUTE_CHECK, CheckStatus.FAILED,
                            f"{which} routes {INTERNET} to {route.target or 'an unnamed target'}, not an internet "
                            f"gateway: sends leave through it, not from the slots' Elastic IPs", fix)
    return NetworkCheck(host, ROUTE_CHECK, CheckStatus.OK, f"{which} routes {INTERNET} to {route.target}")


def public_address_check(host: str, interface: InterfaceNetwork) -> NetworkCheck:
    """The primary private IP needs a public address: sends that find no leasable slot leave from it."""
    primary = f"primary private IP {interface.primary_private_ip} of {interface.eni_id}"
    if interface.public_ip is None:
        return NetworkCheck(host, PUBLIC_ADDRESS_CHECK, CheckStatus.FAILED,
                            f"{primary} has no public address: a send that finds no leasable slot falls back to it "
                            f"and cannot reach the internet",
                            f"associate an Elastic IP with {interface.primary_private_ip} on {interface.eni_id} "
                            f"(`aws ec2 associate-address --network-interface-id {interface.eni_id} "
                            f"--private-ip-address {interface.primary_private_ip} --allocation-id eipalloc-…`)")
    kind = (f"Elastic IP {interface.allocation_id}" if interface.allocation_id is not None
            else "auto-assigned: it changes when the instance stops")
    return NetworkCheck(host, PUBLIC_ADDRESS_CHECK, CheckStatus.OK, f"{primary} has {interface.public_ip} ({kind})")
