"""What the AWS adapter returns: small frozen dataclasses, and the tag vocabulary that makes AWS the durable record.

No boto3 here: callers (rotator, parking, reconcile, the EC2 stand-in) import these without touching AWS.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from ippool.states import EipState, PtrStatus

TAG_POOL = "sendhost:pool"
TAG_HOST = "sendhost:host"
TAG_SLOT = "sendhost:slot"
TAG_STATE = "sendhost:state"
TAG_PARKED_UNTIL = "sendhost:parked_until"

# Service Quotas code of "EC2-VPC Elastic IPs" (default 5 per region): the one place it is written.
EIP_QUOTA_SERVICE = "ec2"
EIP_QUOTA_CODE = "L-0263D0A3"
EIP_QUOTA_NAME = f"Service Quotas {EIP_QUOTA_SERVICE}/{EIP_QUOTA_CODE} (EC2-VPC Elastic IPs)"


def format_parked_until(epoch_s: float) -> str:
    """Render a parking deadline as the tag value: ISO 8601 UTC to the second, readable by on-call in the console."""
    return datetime.fromtimestamp(int(epoch_s), tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_parked_until(value: str) -> float | None:
    """Parse a `sendhost:parked_until` tag value back to epoch seconds; None when it is not a deadline we wrote."""
    try:
        return datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None


def pool_tags(pool: str, host: str, slot: int, state: EipState, parked_until: float | None = None) -> dict[str, str]:
    """The tags an EIP of ours carries; `parked_until` (epoch seconds) only while parked."""
    if state not in tuple(EipState):
        raise ValueError(f"EIP state must be one of {', '.join(EipState)}, not {state!r}")
    tags = {TAG_POOL: pool, TAG_HOST: host, TAG_SLOT: str(slot), TAG_STATE: str(state)}
    if parked_until is not None:
        tags[TAG_PARKED_UNTIL] = format_parked_until(parked_until)
    return tags


@dataclass(frozen=True)
class Address:
    """One Elastic IP as AWS reports it; association fields are None while it is unattached."""

    allocation_id: str
    public_ip: str
    association_id: str | None = None
    network_interface_id: str | None = None
    private_ip: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict, hash=False)

    @property
    def pool(self) -> str | None:
        return self.tags.get(TAG_POOL)

    @property
    def host(self) -> str | None:
        return self.tags.get(TAG_HOST)

    @property
    def slot(self) -> int | None:
        value = self.tags.get(TAG_SLOT)
        return int(value) if value is not None and value.isdigit() else None

    @property
    def state(self) -> EipState | None:
        """The `sendhost:state` tag; None when absent or not one of ours."""
        value = self.tags.get(TAG_STATE)
        return EipState(value) if value in tuple(EipState) else None

    @property
    def parked_until(self) -> float | None:
        """Parking deadline in epoch seconds, or None when not parked (or the tag is unreadable)."""
        value = self.tags.get(TAG_PARKED_UNTIL)
        return parse_parked_until(value) if value is not None else None

    @property
    def associated(self) -> bool:
        return self.association_id is not None


@dataclass(frozen=True)
class NetworkInterface:
    """An ENI: its primary private IP and the secondary ones that back the pool's slots (in AWS's order)."""

    eni_id: str
    subnet_id: str
    primary_private_ip: str
    secondary_private_ips: tuple[str, ...] = ()


@dataclass(frozen=True)
class Instance:
    """An EC2 instance with its primary ENI (device index 0), where the pool's slots live."""

    instance_id: str
    instance_type: str
    state: str
    primary_interface: NetworkInterface


@dataclass(frozen=True)
class InterfaceNetwork:
    """Where an ENI sits (subnet, VPC) and the public address of its primary private IP, if any."""

    eni_id: str
    subnet_id: str
    vpc_id: str
    primary_private_ip: str
    public_ip: str | None = None
    allocation_id: str | None = None  # set when the public address is an Elastic IP, None when auto-assigned


@dataclass(frozen=True)
class Route:
    """One route of a route table: its destination, where it goes (igw-…, nat-…, eni-…, "local") and its state."""

    destination: str
    target: str
    state: str  # active | blackhole (the target is gone)


@dataclass(frozen=True)
class RouteTable:
    """The route table in effect for a subnet: its own association, else the VPC's main table."""

    route_table_id: str
    main: bool  # True when the subnet has no table of its own and the VPC's main table applies
    routes: tuple[Route, ...] = ()

    def route_to(self, destination: str) -> Route | None:
        return next((r for r in self.routes if r.destination == destination), None)


@dataclass(frozen=True)
class ReverseDns:
    """An EIP's reverse DNS as AWS reports it: the PTR it serves now, and the state of the last update asked for."""

    allocation_id: str
    ptr_record: str | None = None  # the PTR served now (without the trailing dot), None when none
    update_value: str | None = None  # the name the last ModifyAddressAttribute asked for
    update_status: PtrStatus | None = None  # None when no update is in flight or AWS reports none
    reason: str = ""  # AWS's reason when the update failed

    def serves(self, domain_name: str) -> bool:
        """True when AWS now serves `domain_name` as this EIP's PTR."""
        return self.ptr_record is not None and self.ptr_record.rstrip(".").lower() == domain_name.rstrip(".").lower()
