"""The example account inside moto: one VPC, subnet and running instance per sender host, with the slots'
secondary private IPs on its primary network interface, and the Route 53 zones of hosts that want PTR records.
Scaffolding of the simulated account only; ippool's Provisioner (`sendhost pool create`) then builds the pools.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any

from sendhost.model import SenderHost
from simulation.errors import SimulationConfigError

# An image id moto knows; the simulation never boots anything.
MOTO_AMI = "ami-12c6146b"


@dataclass(frozen=True)
class HostWorld:
    """A host as it exists in moto: its instance, primary ENI and the private IP of each slot."""

    host: SenderHost
    instance_id: str
    eni_id: str
    slot_ips: tuple[str, ...]


def slot_private_ips(host: SenderHost) -> tuple[str, ...]:
    """The inventory's slot addresses, or the next addresses after the primary IP inside its subnet."""
    if host.pool.private_ips:
        if len(host.pool.private_ips) < host.pool.slots:
            raise SimulationConfigError(f"host {host.name}: {host.pool.slots} slots but only "
                                        f"{len(host.pool.private_ips)} private_ips in sendhost_pool")
        return tuple(host.pool.private_ips[:host.pool.slots])
    network = _subnet(host)
    primary = ipaddress.IPv4Address(host.primary_ip)
    # AWS reserves the first four addresses and the last of every subnet.
    usable = [ip for ip in list(network.hosts())[3:-1] if ip > primary]
    if len(usable) < host.pool.slots:
        raise SimulationConfigError(f"host {host.name}: no room for {host.pool.slots} slot addresses after "
                                    f"{host.primary_ip} in {network}")
    return tuple(str(ip) for ip in usable[:host.pool.slots])


def _subnet(host: SenderHost) -> ipaddress.IPv4Network:
    try:
        if host.subnet:
            return ipaddress.IPv4Network(host.subnet, strict=False)
        return ipaddress.IPv4Network(f"{host.primary_ip}/24", strict=False)
    except ValueError as exc:
        raise SimulationConfigError(f"host {host.name}: {exc}") from None


def build_hosts(session: Any, region: str, hosts: tuple[SenderHost, ...]) -> list[HostWorld]:
    """Create each host's VPC, subnet and instance in moto, with its slots' private IPs assigned."""
    ec2 = session.client("ec2", region_name=region)
    route53 = session.client("route53", region_name=region)
    try:
        # The Route 53 zones the rotator writes each new address's forward A record into (hosts with PTR on).
        for index, zone in enumerate(sorted({h.forward_zone.rstrip(".") for h in hosts if h.forward_zone})):
            route53.create_hosted_zone(Name=zone + ".", CallerReference=f"sendhost-simulation-{index}")
        return [_build_host(ec2, host) for host in hosts]
    finally:
        ec2.close()
        route53.close()


def _build_host(ec2: Any, host: SenderHost) -> HostWorld:
    subnet = _subnet(host)
    vpc_cidr = subnet.supernet(new_prefix=16) if subnet.prefixlen > 16 else subnet
    vpc_id = ec2.create_vpc(CidrBlock=str(vpc_cidr))["Vpc"]["VpcId"]
    subnet_id = ec2.create_subnet(VpcId=vpc_id, CidrBlock=str(subnet))["Subnet"]["SubnetId"]
    instance = ec2.run_instances(ImageId=MOTO_AMI, MinCount=1, MaxCount=1, InstanceType="c5.large",
                                 SubnetId=subnet_id, PrivateIpAddress=host.primary_ip)["Instances"][0]
    eni_id = instance["NetworkInterfaces"][0]["NetworkInterfaceId"]
    slot_ips = slot_private_ips(host)
    ec2.assign_private_ip_addresses(NetworkInterfaceId=eni_id, PrivateIpAddresses=list(slot_ips))
    return HostWorld(host, instance["InstanceId"], eni_id, slot_ips)
