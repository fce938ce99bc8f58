"""The one choke point to AWS: the only module that imports boto3 (and botocore).

Every request of the adapter (`ippool.aws.adapter.Ec2Adapter`) goes through `AwsClient._call`, which paces the
mutating EIP actions with a client-side token bucket, retries their throttling with jittered backoff (reads get
botocore's `standard` retries: throttling, 5xx and connection errors), reports each attempt
to an `on_call` hook (as its IAM action name, so a test can hold the calls against `docs/iam-policy.json`), and
turns AWS error codes into `ippool.errors`. Clients are created on first use, never at import, so moto can start
first.

Endpoints: with no `endpoint_url` given, botocore resolves each service's own, in its documented order:
`AWS_ENDPOINT_URL_<SERVICE>` (`..._EC2`, `..._ROUTE_53`, `..._SERVICE_QUOTAS`), then `AWS_ENDPOINT_URL`, then the
profile's `services` section and `endpoint_url`, then AWS's public endpoint of the region. An explicit
`endpoint_url` overrides all of them, for every service of the adapter.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol, Self

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
    UnknownRegionError,
)

from ippool import errors
from ippool.aws.errors import RETRYABLE_CODES, map_aws_error
from ippool.aws.pacing import Backoff, TokenBucket


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

# Reads are safe to repeat: botocore's `standard` retry mode retries them on throttling, 5xx and connection errors
# (with its own jittered backoff and retry quota). Mutating calls get one botocore attempt: a repeated Allocate or
# Associate after a lost answer could act twice, so only AWS's throttling codes are retried, here, paced.
READ_PREFIXES = ("Describe", "List", "Get")
READ_MAX_ATTEMPTS = 4


def is_read(operation: str) -> bool:
    """True for the calls that only read (Describe*, List*, Get*), which botocore may retry on its own."""
    return operation.startswith(READ_PREFIXES)


# Credentials that exist but cannot be loaded (expired SSO session, broken credential_process, half-set keys).
_CREDENTIAL_LOAD_ERRORS = (CredentialRetrievalError, PartialCredentialsError, SSOError, TokenRetrievalError)


def default_session_factory(profile: str | None = None) -> SessionFactory:
    """A factory of real boto3 sessions (standard credential chain, optional named profile)."""
    return lambda: boto3.Session(profile_name=profile)


def partition_of(region: str) -> str:
    """The AWS partition of `region` from botocore's endpoint data: `aws`, `aws-cn` for cn-*, `aws-us-gov` for
    us-gov-*, ... ARNs name it. ValueError for a region botocore places in no partition."""
    try:
        return str(boto3.Session().get_partition_for_region(region))
    except UnknownRegionError:
        raise ValueError(f"region {region!r} is in no AWS partition this botocore knows") from None


class AwsClient:
    """The plumbing every AWS call of the pool shares, for one region.

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
        self._clock = clock  # polls of slow AWS changes (PTR, Route 53) measure their deadline on it
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

    def _client(self, service: str, reads: bool = False) -> Any:
        with self._clients_lock:
            return self._client_locked(service, reads)

    def _client_locked(self, service: str, reads: bool) -> Any:
        key = f"{service}:reads" if reads else service
        if key not in self._clients:
            if self._session is None:
                self._session = self._session_factory()
            # Reads: botocore's standard mode retries throttling, 5xx and connection errors. Mutations: one attempt;
            # we retry throttling here, with our bucket and jitter, and count every attempt.
            attempts = READ_MAX_ATTEMPTS if reads else 1
            config = Config(region_name=self.region, retries={"mode": "standard", "total_max_attempts": attempts},
                            connect_timeout=5, read_timeout=30)
            kwargs: dict[str, Any] = {"config": config}
            if self._endpoint_url:
                kwargs["endpoint_url"] = self._endpoint_url
            self._clients[key] = self._session.client(service, **kwargs)
        return self._clients[key]

    def require_credentials(self, profile: str | None = None) -> None:
        """AwsCredentialsError (exit 2) naming this region and `profile` when the credential chain finds none or
        cannot load them: a command checks this before it changes anything, so it never stops halfway for want
        of credentials."""
        with self._clients_lock:
            if self._session is None:
                self._session = self._session_factory()
            session = self._session
        get_credentials = getattr(session, "get_credentials", None)
        if get_credentials is None:  # a test's stubbed-client factory: it holds no credentials to resolve
            return
        named = f"profile {profile!r} (AWS_PROFILE)" if profile else "the default credential chain"
        try:
            credentials = get_credentials()
        except _CREDENTIAL_LOAD_ERRORS as exc:
            raise errors.AwsCredentialsError(
                f"region {self.region}: could not load AWS credentials from {named} ({type(exc).__name__}): log in "
                f"again (e.g. `aws sso login`) or fix AWS_PROFILE") from None
        if credentials is None:
            raise errors.AwsCredentialsError(
                f"region {self.region}: no AWS credentials found in {named}: set AWS_PROFILE or "
                f"AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (see docs/iam-policy.json for the permissions needed)")

    def close(self) -> None:
        """Close the HTTP connections of every client made so far."""
        for client in self._clients.values():
            close = getattr(client, "close", None)
            if close is not None:
                close()
        self._clients.clear()

    def __enter__(self) -> Self:
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
            # A read got here after botocore's retries; a mutating call is not retried: it may have happened. An
            # EIP is tagged in the allocating call, so `pool reconcile` finds it by its tags either way.
            raise errors.AwsRequestFailed(f"{operation} on {subject} could not reach AWS: {exc}") from exc

    def _call_with_retries(self, service: str, operation: str, subject: str,
                           params: dict[str, Any]) -> dict[str, Any]:
        reads = is_read(operation)
        method = getattr(self._client(service, reads), xform_name(operation))
        paced = service == "ec2" and operation in EIP_BUCKET_OPERATIONS
        # A read has had botocore's retries when it fails here; one more round of ours would only multiply them.
        attempts = 1 if reads else self.backoff.max_attempts
        for retry in range(attempts):
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
                if code in RETRYABLE_CODES and retry + 1 < attempts:
                    self._sleep(self.backoff.delay(retry, self._rng))
                    continue
                raise map_aws_error(code, str(error.get("Message", "")), operation=operation, subject=subject,
                                    region=self.region, attempts=retry + 1) from exc
        raise AssertionError("unreachable: the last attempt returns or raises")  # pragma: no cover

