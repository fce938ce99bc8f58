"""The one choke point to AWS: the only module that imports boto3 (and botocore).

Every request of the adapter (`ippool.aws.adapter.Ec2Adapter`) goes through `AwsClient._call`, which paces the
mutating EIP actions with a client-side token bucket, retries throttling with jittered backoff, reports each attempt
to an `on_call` hook (as its IAM action name, so a test can hold the calls against `docs/iam-policy.json`), and
turns AWS error codes into `ippool.errors`. Clients are created on first use, never at import, so moto can start
first.
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

# Credentials that exist but cannot be loaded (expired SSO session, broken credential_process, half-set keys).
_CREDENTIAL_LOAD_ERRORS = (CredentialRetrievalError, PartialCredentialsError, SSOError, TokenRetrievalError)


def default_session_factory(profile: str | None = None) -> SessionFactory:
    """A factory of real boto3 sessions (standard credential chain, optional named profile)."""
    return lambda: boto3.Session(profile_name=profile)


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

