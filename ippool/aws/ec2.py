"""EC2 calls of the pool: the instance and its network interface, Elastic IPs, their tags and reverse DNS."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ippool import errors
from ippool.aws.client import AwsClient
from ippool.aws.models import (
    TAG_HOST,
    TAG_POOL,
    TAG_SLOT,
    TAG_STATE,
    Address,
    Instance,
    InterfaceNetwork,
    NetworkInterface,
    ReverseDns,
    Route,
    RouteTable,
)
from ippool.states import PtrStatus

# How long AWS takes to publish a PTR: usually under a minute, sometimes several (it checks the forward record).
PTR_WAIT_S = 900.0
PTR_POLL_S = 10.0


class Ec2Calls(AwsClient):
    """The EC2 half of the adapter."""

    # --- instances and network interfaces ---------------------------------------------------------------------

    def describe_instance(self, instance_id: str) -> Instance:
        """The instance and its primary ENI (device index 0) with its private IPs."""
        response = self._call("ec2", "DescribeInstances", f"instance {instance_id}", InstanceIds=[instance_id])
        found = [inst for res in response.get("Reservations", []) for inst in res.get("Instances", [])]
        if not found:
            raise errors.UnknownInstance(
                f"instance {instance_id} does not exist in {self.region}: check sendhost_instance_id and "
                f"sendhost_region in the inventory")
        raw = found[0]
        enis = sorted(raw.get("NetworkInterfaces", []), key=lambda eni: eni.get("Attachment", {}).get("DeviceIndex", 0))
        if not enis:
            raise errors.AwsRequestFailed(f"instance {instance_id} has no network interface to hold pool slots")
        return Instance(instance_id=raw["InstanceId"], instance_type=raw.get("InstanceType", ""),
                        state=raw.get("State", {}).get("Name", ""), primary_interface=_interface_from(enis[0]))

    def describe_network_interface(self, eni_id: str) -> NetworkInterface:
        """One ENI with its primary and secondary private IPs."""
        response = self._call("ec2", "DescribeNetworkInterfaces", f"network interface {eni_id}",
                              NetworkInterfaceIds=[eni_id])
        return _interface_from(response["NetworkInterfaces"][0])

    def max_private_ips_per_interface(self, instance_type: str) -> int:
        """How many private IPs (primary included) one ENI of this instance type may hold."""
        response = self._call("ec2", "DescribeInstanceTypes", f"instance type {instance_type}",
                              InstanceTypes=[instance_type])
        return int(response["InstanceTypes"][0]["NetworkInfo"]["Ipv4AddressesPerInterface"])

    def assign_secondary_private_ips(self, eni_id: str, count: int) -> NetworkInterface:
        """Add `count` secondary private IPs to the ENI; return the ENI as it now is."""
        if count < 1:
            raise ValueError("assign at least one secondary private IP")
        self._call("ec2", "AssignPrivateIpAddresses", f"network interface {eni_id}",
                   NetworkInterfaceId=eni_id, SecondaryPrivateIpAddressCount=count)
        # Re-read rather than trust the response: AWS lists only the new IPs there, moto lists them all.
        return self.describe_network_interface(eni_id)

    # --- slot addresses the inventory names (`sendhost_pool.private_ips`): checked, then assigned exactly ---------

    def subnet_cidr(self, subnet_id: str) -> str:
        """The IPv4 CIDR block of a subnet (slot addresses must lie inside the instance's)."""
        response = self._call("ec2", "DescribeSubnets", f"subnet {subnet_id}", SubnetIds=[subnet_id])
        return str(response["Subnets"][0]["CidrBlock"])

    def interfaces_holding(self, subnet_id: str, private_ips: Sequence[str]) -> dict[str, str]:
        """private IP -> id of the ENI in the subnet that holds it (primary or secondary), for those in use.

        Narrowed to the subnet: private IPs are unique per VPC only, another VPC may use the same ones."""
        wanted = set(private_ips)
        response = self._call("ec2", "DescribeNetworkInterfaces", f"private IPs {', '.join(private_ips)}",
                              Filters=[{"Name": "subnet-id", "Values": [subnet_id]},
                                       {"Name": "addresses.private-ip-address", "Values": list(private_ips)}])
        held: dict[str, str] = {}
        for raw in response.get("NetworkInterfaces", []):
            for entry in raw.get("PrivateIpAddresses", []):  # the filter matches the ENI; name only wanted IPs
                if entry.get("PrivateIpAddress") in wanted:
                    held[entry["PrivateIpAddress"]] = raw["NetworkInterfaceId"]
        return held

    def assign_private_ips(self, eni_id: str, private_ips: Sequence[str]) -> NetworkInterface:
        """Add exactly these secondary private IPs to the ENI; return the ENI as it now is."""
        if not private_ips:
            raise ValueError("assign at least one secondary private IP")
        self._call("ec2", "AssignPrivateIpAddresses", f"network interface {eni_id}",
                   NetworkInterfaceId=eni_id, PrivateIpAddresses=list(private_ips))
        return self.describe_network_interface(eni_id)

    def unassign_secondary_private_ips(self, eni_id: str, private_ips: Sequence[str]) -> None:
        """Remove these secondary private IPs from the ENI."""
        self._call("ec2", "UnassignPrivateIpAddresses", f"network interface {eni_id}",
                   NetworkInterfaceId=eni_id, PrivateIpAddresses=list(private_ips))

    # --- network path (`sendhost pool doctor`) -------------------------------------------------------------

    def describe_interface_network(self, eni_id: str) -> InterfaceNetwork:
        """The ENI's subnet and VPC, and the public address (Elastic or auto-assigned) of its primary private IP."""
        response = self._call("ec2", "DescribeNetworkInterfaces", f"network interface {eni_id}",
                              NetworkInterfaceIds=[eni_id])
        raw = response["NetworkInterfaces"][0]
        private = raw.get("PrivateIpAddresses", [])
        primary: Mapping[str, Any] = next((p for p in private if p.get("Primary")), {})
        # AWS lists each private IP's association; the ENI-level one is a fallback for answers that list none per
        # IP (moto), never a reason to credit the primary IP with a slot's Elastic IP.
        per_ip = any(p.get("Association") for p in private)
        association = (primary.get("Association") if per_ip else raw.get("Association")) or {}
        return InterfaceNetwork(eni_id=raw["NetworkInterfaceId"], subnet_id=raw.get("SubnetId", ""),
                                vpc_id=raw.get("VpcId", ""),
                                primary_private_ip=primary.get("PrivateIpAddress") or raw.get("PrivateIpAddress", ""),
                                public_ip=association.get("PublicIp") or None,
                                allocation_id=association.get("AllocationId") or None)

    def effective_route_table(self, subnet_id: str, vpc_id: str) -> RouteTable | None:
        """The route table the subnet uses: the one associated with it, else its VPC's main table (None: neither)."""
        response = self._call("ec2", "DescribeRouteTables", f"subnet {subnet_id}",
                              Filters=[{"Name": "association.subnet-id", "Values": [subnet_id]}])
        main = False
        if not response.get("RouteTables"):
            # A subnet without a table of its own routes by its VPC's main table.
            response = self._call("ec2", "DescribeRouteTables", f"main route table of {vpc_id}",
                                  Filters=[{"Name": "vpc-id", "Values": [vpc_id]},
                                           {"Name": "association.main", "Values": ["true"]}])
            main = True
        tables = response.get("RouteTables", [])
        return _route_table_from(tables[0], main) if tables else None

    # --- Elastic IPs ----------------------------------------------------------------------------------------

    def allocate_address(self, tags: Mapping[str, str], address: str | None = None) -> Address:
        """Allocate a VPC EIP tagged in the same call (never an untagged moment); `address` asks for a specific one.

        `address` is AWS's "recover this released address" parameter; the EC2 stand-in uses it to model reuse.
        """
        if not tags.get(TAG_POOL):
            raise ValueError(f"an EIP of ours must be tagged {TAG_POOL} when allocated (the IAM policy requires it)")
        params: dict[str, Any] = {
            "Domain": "vpc",
            "TagSpecifications": [{"ResourceType": "elastic-ip", "Tags": _tag_list(tags)}],
        }
        if address is not None:
            params["Address"] = address
        subject = f"pool {tags[TAG_POOL]} host {tags.get(TAG_HOST, '?')} slot {tags.get(TAG_SLOT, '?')}"
        response = self._call("ec2", "AllocateAddress", subject, **params)
        return Address(allocation_id=response["AllocationId"], public_ip=response["PublicIp"], tags=dict(tags))

    def associate_address(self, allocation_id: str, eni_id: str, private_ip: str) -> str:
        """Point the EIP at one private IP of the ENI; return the association id.

        `AllowReassociation=False`: AWS refuses (AddressAlreadyAssociated) instead of silently moving an EIP that
        is associated elsewhere, or taking a private IP that already holds one (ours or a stranger's). Callers
        detect and free the slot's private IP first."""
        response = self._call("ec2", "AssociateAddress", f"EIP {allocation_id}",
                              AllocationId=allocation_id, NetworkInterfaceId=eni_id,
                              PrivateIpAddress=private_ip, AllowReassociation=False)
        return str(response["AssociationId"])

    def disassociate_address(self, association_id: str) -> bool:
        """Detach an EIP; False when the association was already gone (callers treat that as done)."""
        try:
            self._call("ec2", "DisassociateAddress", f"association {association_id}", AssociationId=association_id)
        except errors.AddressGone:
            return False
        return True

    def release_address(self, allocation_id: str) -> bool:
        """Give an EIP back to AWS; False when it was already released (callers treat that as done).

        Raises PtrStillSet while AWS still holds its reverse DNS (minutes after a reset): retry later."""
        try:
            self._call("ec2", "ReleaseAddress", f"EIP {allocation_id}", AllocationId=allocation_id)
        except errors.AddressGone:
            return False
        return True

    def create_tags(self, resource_id: str, tags: Mapping[str, str]) -> None:
        """Set (add or overwrite) tags on an EIP."""
        self._call("ec2", "CreateTags", f"EIP {resource_id}", Resources=[resource_id], Tags=_tag_list(tags))


    def describe_pool_addresses(self, pool: str, *, host: str | None = None, slot: int | None = None,
                                states: Iterable[str] | None = None) -> list[Address]:
        """Every EIP tagged with this pool, narrowed by host, slot and state tags; sorted by allocation id."""
        filters = [{"Name": f"tag:{TAG_POOL}", "Values": [pool]}]
        if host is not None:
            filters.append({"Name": f"tag:{TAG_HOST}", "Values": [host]})
        if slot is not None:
            filters.append({"Name": f"tag:{TAG_SLOT}", "Values": [str(slot)]})
        if states is not None:
            filters.append({"Name": f"tag:{TAG_STATE}", "Values": list(states)})
        response = self._call("ec2", "DescribeAddresses", f"pool {pool}", Filters=filters)
        return sorted((_address_from(raw) for raw in response.get("Addresses", [])), key=lambda a: a.allocation_id)

    def describe_interface_addresses(self, eni_id: str) -> list[Address]:
        """Every EIP associated with this ENI, ours or not (reconcile looks for strangers on slot IPs)."""
        response = self._call("ec2", "DescribeAddresses", f"network interface {eni_id}",
                              Filters=[{"Name": "network-interface-id", "Values": [eni_id]}])
        return sorted((_address_from(raw) for raw in response.get("Addresses", [])), key=lambda a: a.allocation_id)

    def count_region_addresses(self) -> int:
        """How many EIPs the account holds in this region, ours or not: they all count against the quota."""
        response = self._call("ec2", "DescribeAddresses", f"region {self.region}")
        return len(response.get("Addresses", []))

    def get_address(self, allocation_id: str) -> Address | None:
        """One EIP by allocation id, or None when it no longer exists."""
        try:
            response = self._call("ec2", "DescribeAddresses", f"EIP {allocation_id}", AllocationIds=[allocation_id])
        except errors.AddressGone:
            return None
        found = response.get("Addresses", [])
        return _address_from(found[0]) if found else None


    # --- reverse DNS --------------------------------------------------------------------

    def set_reverse_dns(self, allocation_id: str, domain_name: str) -> ReverseDns:
        """Ask AWS to serve `domain_name` as the EIP's PTR (its A record must already resolve to the EIP).

        AWS answers at once with the update PENDING; `wait_reverse_dns` polls until it is set or failed."""
        response = self._call("ec2", "ModifyAddressAttribute", f"EIP {allocation_id}",
                              AllocationId=allocation_id, DomainName=domain_name)
        return _reverse_dns_from(allocation_id, response.get("Address", {}))

    def describe_reverse_dns(self, allocation_id: str) -> ReverseDns:
        """The EIP's PTR and the state of its last update, as AWS reports them now."""
        response = self._call("ec2", "DescribeAddressesAttribute", f"EIP {allocation_id}",
                              AllocationIds=[allocation_id], Attribute="domain-name")
        found = response.get("Addresses", [])
        return _reverse_dns_from(allocation_id, found[0] if found else {})

    def wait_reverse_dns(self, allocation_id: str, domain_name: str, *, timeout_s: float = PTR_WAIT_S,
                         interval_s: float = PTR_POLL_S) -> ReverseDns:
        """Poll until AWS serves `domain_name` as the EIP's PTR; ReverseDnsFailed when AWS reports the update
        FAILED or it is still pending after `timeout_s`."""
        deadline = self._clock() + timeout_s
        while True:
            current = self.describe_reverse_dns(allocation_id)
            if current.serves(domain_name) and current.update_status != PtrStatus.PENDING:
                return current
            if current.update_status == PtrStatus.FAILED:
                raise errors.ReverseDnsFailed(
                    f"EIP {allocation_id}: AWS could not set its reverse DNS to {domain_name} "
                    f"({current.reason or 'no reason given'}): check that the A record resolves to the address")
            if self._clock() >= deadline:
                raise errors.ReverseDnsFailed(
                    f"EIP {allocation_id}: reverse DNS {domain_name} still not set after {timeout_s:.0f}s "
                    f"(status {current.update_status or 'none'}): the address is not put into service")
            self._sleep(interval_s)

    def reset_reverse_dns(self, allocation_id: str) -> None:
        """Remove the EIP's PTR; AWS refuses to release an EIP that still has one."""
        self._call("ec2", "ResetAddressAttribute", f"EIP {allocation_id}",
                   AllocationId=allocation_id, Attribute="domain-name")



def _tag_list(tags: Mapping[str, str]) -> list[dict[str, str]]:
    return [{"Key": key, "Value": value} for key, value in tags.items()]


def _address_from(raw: Mapping[str, Any]) -> Address:
    return Address(
        allocation_id=raw["AllocationId"], public_ip=raw["PublicIp"],
        association_id=raw.get("AssociationId") or None,
        network_interface_id=raw.get("NetworkInterfaceId") or None,
        private_ip=raw.get("PrivateIpAddress") or None,
        tags={tag["Key"]: tag["Value"] for tag in raw.get("Tags", [])},
    )


def _reverse_dns_from(allocation_id: str, raw: Mapping[str, Any]) -> ReverseDns:
    update = raw.get("PtrRecordUpdate") or {}
    status = update.get("Status")
    return ReverseDns(
        allocation_id=allocation_id,
        ptr_record=(raw.get("PtrRecord") or "").rstrip(".") or None,
        update_value=(update.get("Value") or "").rstrip(".") or None,
        update_status=PtrStatus(status) if status in tuple(PtrStatus) else None,
        reason=str(update.get("Reason") or ""),
    )


def _interface_from(raw: Mapping[str, Any]) -> NetworkInterface:
    private = raw.get("PrivateIpAddresses", [])
    primary = next((p["PrivateIpAddress"] for p in private if p.get("Primary")), raw.get("PrivateIpAddress", ""))
    secondary = tuple(p["PrivateIpAddress"] for p in private if not p.get("Primary"))
    return NetworkInterface(eni_id=raw["NetworkInterfaceId"], subnet_id=raw.get("SubnetId", ""),
                            primary_private_ip=primary, secondary_private_ips=secondary)


# Where a route goes, in the fields AWS may name it by; the first one set is the target.
_ROUTE_TARGET_FIELDS = ("GatewayId", "NatGatewayId", "NetworkInterfaceId", "InstanceId", "TransitGatewayId",
                        "VpcPeeringConnectionId", "LocalGatewayId", "CarrierGatewayId", "EgressOnlyInternetGatewayId",
                        "CoreNetworkArn")


def _route_table_from(raw: Mapping[str, Any], main: bool) -> RouteTable:
    routes = tuple(
        Route(destination=route.get("DestinationCidrBlock", ""),
              target=next((str(route[f]) for f in _ROUTE_TARGET_FIELDS if route.get(f)), ""),
              state=route.get("State", "active"))
        for route in raw.get("Routes", []) if route.get("DestinationCidrBlock")
    )
    return RouteTable(route_table_id=raw["RouteTableId"], main=main, routes=routes)
