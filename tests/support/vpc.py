"""A sender host's network in moto (in-process or server): VPC, subnet, route table and gateway, and an instance,
shaped the way a test of `pool doctor` needs it."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class Egress(StrEnum):
    """Where the subnet's 0.0.0.0/0 goes."""

    INTERNET_GATEWAY = "igw"
    NAT_GATEWAY = "nat"
    NOWHERE = "none"  # no 0.0.0.0/0 route at all


@dataclass(frozen=True)
class SenderNetwork:
    instance_id: str
    eni_id: str
    primary_private_ip: str
    public_ip: str | None
    subnet_id: str
    vpc_id: str
    route_table_id: str  # the table in effect for the subnet (its own, or the VPC's main one)
    target: str | None  # where 0.0.0.0/0 goes: igw-… or nat-…


def build_sender_network(ec2: Any, egress: Egress = Egress.INTERNET_GATEWAY, *, public_ip: bool = True,
                         own_table: bool = True, octet: int = 40) -> SenderNetwork:
    """Make the network with `ec2` (a boto3 EC2 client on moto) in 10.`octet`.0.0/16 (hosts of one inventory need
    their own addresses). `own_table=False` leaves the subnet on the VPC's main route table, with the route there."""
    vpc_id = ec2.create_vpc(CidrBlock=f"10.{octet}.0.0/16")["Vpc"]["VpcId"]
    subnet_id = ec2.create_subnet(VpcId=vpc_id, CidrBlock=f"10.{octet}.1.0/24")["Subnet"]["SubnetId"]
    if own_table:
        table_id = ec2.create_route_table(VpcId=vpc_id)["RouteTable"]["RouteTableId"]
        ec2.associate_route_table(RouteTableId=table_id, SubnetId=subnet_id)
    else:
        [main] = ec2.describe_route_tables(Filters=[{"Name": "vpc-id", "Values": [vpc_id]},
                                                    {"Name": "association.main", "Values": ["true"]}])["RouteTables"]
        table_id = main["RouteTableId"]
    igw = ec2.create_internet_gateway()["InternetGateway"]["InternetGatewayId"]
    ec2.attach_internet_gateway(InternetGatewayId=igw, VpcId=vpc_id)
    target: str | None = None
    if egress == Egress.INTERNET_GATEWAY:
        target = igw
        ec2.create_route(RouteTableId=table_id, DestinationCidrBlock="0.0.0.0/0", GatewayId=igw)
    elif egress == Egress.NAT_GATEWAY:
        allocation = ec2.allocate_address(Domain="vpc")["AllocationId"]
        target = ec2.create_nat_gateway(SubnetId=subnet_id, AllocationId=allocation)["NatGateway"]["NatGatewayId"]
        ec2.create_route(RouteTableId=table_id, DestinationCidrBlock="0.0.0.0/0", NatGatewayId=target)
    instance = ec2.run_instances(
        ImageId="ami-12c6146b", MinCount=1, MaxCount=1, InstanceType="c5.large",
        NetworkInterfaces=[{"DeviceIndex": 0, "SubnetId": subnet_id, "AssociatePublicIpAddress": public_ip}],
    )["Instances"][0]
    eni = instance["NetworkInterfaces"][0]
    described = ec2.describe_network_interfaces(NetworkInterfaceIds=[eni["NetworkInterfaceId"]])
    association = described["NetworkInterfaces"][0].get("Association") or {}
    return SenderNetwork(instance_id=instance["InstanceId"], eni_id=eni["NetworkInterfaceId"],
                         primary_private_ip=eni["PrivateIpAddress"], public_ip=association.get("PublicIp"),
                         subnet_id=subnet_id, vpc_id=vpc_id, route_table_id=table_id, target=target)
