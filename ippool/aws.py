"""The AWS adapter: the only module that imports boto3, wrapping exactly the calls an Elastic IP pool needs.

Every call goes through `Ec2Adapter._call`, which paces the mutating EIP actions with a client-side token bucket,
retries throttling with jittered backoff, reports each attempt to an `on_call` hook (as its IAM action name, so a
test can hold the calls against `docs/iam-policy.json`), and turns AWS error codes into `ippool.errors`.
Clients are created on first use, never at import, so moto can start first.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

import boto3
from botocore import xform_name
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    CredentialRetrievalError,
    NoCredentialsError,
    PartialCredentialsError,
    SSOError,
    TokenRetrievalError,
)

from ippool import errors
from ippool.aws_errors import RETRYABLE_CODES, map_aws_error
from ippool.aws_models import (
    EIP_QUOTA_CODE,
    EIP_QUOTA_SERVICE,
    TAG_HOST,
    TAG_POOL,
    TAG_SLOT,
    TAG_STATE,
    Address,
    Instance,
    NetworkInterface,
)
from ippool.aws_pacing import Backoff, TokenBucket


class SessionLike(Protocol):
    """What the adapter needs from a session: `boto3.Session` fits, and so does a test's stubbed-client factory."""

    def client(self, service_name: str, **kwargs: Any) -> Any: ...


SessionFactory = Callable[[], SessionLike]

# boto3 service name -> IAM action prefix (the `on_call` hook reports "prefix:Operation").
IAM_PREFIX = {"ec2": "ec2", "route53": "route53", "service-quotas": "servicequotas"}

# The actions AWS meters from one per-account bucket (50 tokens, 5/s). Reset is metered with Modify: we pace it too.
EIP_BUCKET_OPERATIONS = frozenset({
    "AllocateAddress", "AssociateAddress", "DisassociateAddress", "ReleaseAddress",
    "ModifyAddressAttribute", "ResetAddressAttribute",
})

# Credentials that exist but cannot be loaded (expired SSO session, broken credential_process, half-set keys).
_CREDENTIAL_LOAD_ERRORS = (CredentialRetrievalError, PartialCredentialsError, SSOError, TokenRetrievalError)


def default_session_factory(profile: str | None = None) -> SessionFactory:
    """A factory of real boto3 sessions (standard credential chain, optional named profile)."""
    return lambda: boto3.Session(profile_name=profile)


class Ec2Adapter:
    """Thin typed wrapper over EC2, Route 53 and Service Quotas for one region.

    `session_factory()` is called once, on first use. `sleep`, `clock` and `rng` pace and jitter retries;
    `bucket` may be shared between adapters of one process so they spend one budget together.
    `on_call(action)` is told every request attempt, e.g. "ec2:AllocateAddress".
    """

    def __init__(self, session_factory: SessionFactory, region: str, *, endpoint_url: str | None = None,
                 sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.time,
                 rng: random.Random | None = None, on_call: Callable[[str], None] | None = None,
                 bucket: TokenBucket | None = None, backoff: Backoff | None = None) -> None:
        self.region = region
        self._session_factory = session_factory
        self._session: SessionLike | None = None
        self._endpoint_url = endpoint_url
        self._sleep = sleep
        self._rng = rng if rng is not None else random.Random()
        self._on_call = on_call
        self.bucket = bucket if bucket is not None else TokenBucket(clock=clock, sleep=sleep)
        self.backoff = backoff if backoff is not None else Backoff()
        self._clients: dict[str, Any] = {}
        self._clients_lock = threading.Lock()  # boto3 sessions are not thread-safe; clients are
        self._zone_ids: dict[str, str] = {}
        # Told the operation of every throttled attempt (the worker counts them for the metrics exporter).
        self.on_throttle: Callable[[str], None] | None = None

    # --- plumbing -------------------------------------------------------------------------------------------

    def _client(self, service: str) -> Any:
        with self._clients_lock:
            return self._client_locked(service)

    def _client_locked(self, service: str) -> Any:
        if service not in self._clients:
            if self._session is None:
                self._session = self._session_factory()
            # botocore's own retries are off: we retry here, with our bucket and jitter, and count every attempt.
            config = Config(region_name=self.region, retries={"mode": "standard", "total_max_attempts": 1},
                            connect_timeout=5, read_timeout=30)
            kwargs: dict[str, Any] = {"config": config}
            if self._endpoint_url:
                kwargs["endpoint_url"] = self._endpoint_url
            self._clients[service] = self._session.client(service, **kwargs)
        return self._clients[service]

    def close(self) -> None:
        """Close the HTTP connections of every client made so far."""
        for client in self._clients.values():
            close = getattr(client, "close", None)
            if close is not None:
                close()
        self._clients.clear()

    def __enter__(self) -> Ec2Adapter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _call(self, service: str, operation: str, subject: str, **params: Any) -> dict[str, Any]:
        """Make one AWS call (with pacing and retries); `subject` names what it was about, for error messages."""
        try:
            return self._call_with_retries(service, operation, subject, params)
        except NoCredentialsError as exc:
            raise errors.AwsCredentialsError(
                f"no AWS credentials found for {operation}: set AWS_PROFILE or AWS_ACCESS_KEY_ID/"
                f"AWS_SECRET_ACCESS_KEY (see docs/iam-policy.json for the permissions needed)") from exc
        except _CREDENTIAL_LOAD_ERRORS as exc:
            raise errors.AwsCredentialsError(
                f"could not load AWS credentials for {operation} ({type(exc).__name__}): log in again "
                f"(e.g. `aws sso login`) or fix AWS_PROFILE") from exc
        except BotoCoreError as exc:
            # Not retried: a timed-out mutating call may have happened. The EIP was tagged in the same call,
            # so `pool reconcile` finds it by its tags either way.
            raise errors.AwsRequestFailed(f"{operation} on {subject} could not reach AWS: {exc}") from exc

    def _call_with_retries(self, service: str, operation: str, subject: str,
                           params: dict[str, Any]) -> dict[str, Any]:
        method = getattr(self._client(service), xform_name(operation))
        paced = service == "ec2" and operation in EIP_BUCKET_OPERATIONS
        for retry in range(self.backoff.max_attempts):
            if paced:
                self.bucket.acquire()
            if self._on_call is not None:
                self._on_call(f"{IAM_PREFIX[service]}:{operation}")
            try:
                response: dict[str, Any] = method(**params)
                return response
            except ClientError as exc:
                error = exc.response.get("Error", {})
                code = str(error.get("Code", ""))
                if code in RETRYABLE_CODES and self.on_throttle is not None:
                    self.on_throttle(operation)
                if code in RETRYABLE_CODES and retry + 1 < self.backoff.max_attempts:
                    self._sleep(self.backoff.delay(retry, self._rng))
                    continue
                raise map_aws_error(code, str(error.get("Message", "")), operation=operation, subject=subject,
                                    region=self.region, attempts=retry + 1) from exc
        raise AssertionError("unreachable: the last attempt returns or raises")  # pragma: no cover

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

    def unassign_secondary_private_ips(self, eni_id: str, private_ips: Sequence[str]) -> None:
        """Remove these secondary private IPs from the ENI."""
        self._call("ec2", "UnassignPrivateIpAddresses", f"network interface {eni_id}",
                   NetworkInterfaceId=eni_id, PrivateIpAddresses=list(private_ips))

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
        """Point the EIP at one private IP of the ENI in one call, taking it over from any EIP there; return the
        association id. `AllowReassociation` makes the swap atomic, so the slot is never without a public IP."""
        response = self._call("ec2", "AssociateAddress", f"EIP {allocation_id}",
                              AllocationId=allocation_id, NetworkInterfaceId=eni_id,
                              PrivateIpAddress=private_ip, AllowReassociation=True)
        return str(response["AssociationId"])

    def disassociate_address(self, association_id: str) -> bool:
        """Detach an EIP; False when the association was already gone (callers treat that as done)."""
        try:
            self._call("ec2", "DisassociateAddress", f"association {association_id}", AssociationId=association_id)
        except errors.AddressGone:
            return False
        return True

    def release_address(self, allocation_id: str) -> bool:
        """Give an EIP back to AWS; False when it was already released (callers treat that as done)."""
        try:
            self._call("ec2", "ReleaseAddress", f"EIP {allocation_id}", AllocationId=allocation_id)
        except errors.AddressGone:
            return False
        return True

    def create_tags(self, resource_id: str, tags: Mapping[str, str]) -> None:
        """Set (add or overwrite) tags on an EIP."""
        self._call("ec2", "CreateTags", f"EIP {resource_id}", Resources=[resource_id], Tags=_tag_list(tags))

    def delete_tags(self, resource_id: str, keys: Iterable[str]) -> None:
        """Remove tags (by key, whatever their value) from an EIP."""
        self._call("ec2", "DeleteTags", f"EIP {resource_id}", Resources=[resource_id],
                   Tags=[{"Key": key} for key in keys])

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

    def find_address(self, public_ip: str) -> Address | None:
        """The EIP holding this public address (e.g. for `pool retire --ip`), or None when the account has none."""
        try:
            response = self._call("ec2", "DescribeAddresses", f"address {public_ip}", PublicIps=[public_ip])
        except errors.AddressGone:
            return None
        found = response.get("Addresses", [])
        return _address_from(found[0]) if found else None

    # --- reverse DNS, quota, forward DNS --------------------------------------------------------------------

    def set_reverse_dns(self, allocation_id: str, domain_name: str) -> None:
        """Ask AWS to serve `domain_name` as the EIP's PTR (its A record must already resolve to the EIP)."""
        self._call("ec2", "ModifyAddressAttribute", f"EIP {allocation_id}",
                   AllocationId=allocation_id, DomainName=domain_name)

    def reset_reverse_dns(self, allocation_id: str) -> None:
        """Remove the EIP's PTR; AWS refuses to release an EIP that still has one."""
        self._call("ec2", "ResetAddressAttribute", f"EIP {allocation_id}",
                   AllocationId=allocation_id, Attribute="domain-name")

    def eip_quota(self) -> int:
        """The region's applied Elastic IP quota (Service Quotas ec2/L-0263D0A3; AWS's default is 5)."""
        response = self._call("service-quotas", "GetServiceQuota", f"quota {EIP_QUOTA_SERVICE}/{EIP_QUOTA_CODE}",
                              ServiceCode=EIP_QUOTA_SERVICE, QuotaCode=EIP_QUOTA_CODE)
        return int(response["Quota"]["Value"])

    def _zone_id(self, zone_name: str) -> str:
        wanted = zone_name.rstrip(".").lower() + "."
        if wanted not in self._zone_ids:
            response = self._call("route53", "ListHostedZonesByName", f"zone {wanted}", DNSName=wanted, MaxItems="1")
            zones = [z for z in response.get("HostedZones", []) if z["Name"].lower() == wanted]
            if not zones:
                raise errors.HostedZoneNotFound(
                    f"Route 53 has no hosted zone {wanted}: create it or fix the host's PTR zone in the inventory")
            self._zone_ids[wanted] = zones[0]["Id"].rsplit("/", 1)[-1]
        return self._zone_ids[wanted]

    def _change_a_record(self, action: str, zone_name: str, record_name: str, ip: str, ttl: int) -> None:
        zone_id = self._zone_id(zone_name)
        change = {"Action": action, "ResourceRecordSet": {
            "Name": record_name, "Type": "A", "TTL": ttl, "ResourceRecords": [{"Value": ip}]}}
        self._call("route53", "ChangeResourceRecordSets", f"record {record_name} A {ip}",
                   HostedZoneId=zone_id, ChangeBatch={"Changes": [change]})

    def upsert_a_record(self, zone_name: str, record_name: str, ip: str, ttl: int = 300) -> None:
        """Create or replace `record_name` A `ip` in the named hosted zone (the forward half of PTR)."""
        self._change_a_record("UPSERT", zone_name, record_name, ip, ttl)

    def delete_a_record(self, zone_name: str, record_name: str, ip: str, ttl: int = 300) -> bool:
        """Delete `record_name` A `ip`; False when no such record was there (callers treat that as done)."""
        try:
            self._change_a_record("DELETE", zone_name, record_name, ip, ttl)
        except errors.AwsRequestFailed as exc:
            # Route 53 says InvalidChangeBatch "... but it was not found" for a record that is already gone.
            if exc.code == "InvalidChangeBatch" and "not found" in str(exc):
                return False
            raise
        return True


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


def _interface_from(raw: Mapping[str, Any]) -> NetworkInterface:
    private = raw.get("PrivateIpAddresses", [])
    primary = next((p["PrivateIpAddress"] for p in private if p.get("Primary")), raw.get("PrivateIpAddress", ""))
    secondary = tuple(p["PrivateIpAddress"] for p in private if not p.get("Primary"))
    return NetworkInterface(eni_id=raw["NetworkInterfaceId"], subnet_id=raw.get("SubnetId", ""),
                            primary_private_ip=primary, secondary_private_ips=secondary)
