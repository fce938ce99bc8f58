"""AWS error codes -> `ippool.errors`: one place that knows what each code means for a pool and what to do.

No boto3 here: the adapter hands over the code and message of a refusal (botocore's ClientError).
"""

from __future__ import annotations

from ippool import errors
from ippool.aws.models import EIP_QUOTA_NAME

RETRYABLE_CODES = frozenset({
    "RequestLimitExceeded", "Throttling", "ThrottlingException", "TooManyRequestsException",
    "PriorRequestNotComplete",
})
CREDENTIAL_CODES = frozenset({
    "AuthFailure", "ExpiredToken", "ExpiredTokenException", "UnauthorizedOperation", "InvalidClientTokenId",
    "AccessDenied", "AccessDeniedException", "SignatureDoesNotMatch",
})
NOT_FOUND_CODES = frozenset({
    "InvalidAllocationID.NotFound", "InvalidAssociationID.NotFound", "InvalidAddress.NotFound",
})
UNKNOWN_INSTANCE_CODES = frozenset({"InvalidInstanceID.NotFound", "InvalidInstanceID.Malformed"})


def map_aws_error(code: str, message: str, *, operation: str, subject: str, region: str,
                  attempts: int) -> errors.IppoolError:
    """The `ippool.errors` exception for AWS's refusal `code` of `operation` on `subject` (after `attempts` tries)."""
    if code in RETRYABLE_CODES:
        return errors.AwsThrottled(
            f"AWS throttled {operation} on {subject} ({code}) {attempts} times in a row: "
            f"retry later; every tool in the account shares the EC2 Elastic IP request bucket")
    if code == "AddressLimitExceeded":
        return errors.AddressQuotaExceeded(
            f"{region}: no Elastic IP left for {subject} (AddressLimitExceeded): request an increase of "
            f"{EIP_QUOTA_NAME} in {region}")
    if code in CREDENTIAL_CODES:
        return errors.AwsCredentialsError(
            f"AWS refused {operation} on {subject} ({code}): refresh the credentials if they expired, and make "
            f"sure the policy in docs/iam-policy.json is attached to them")
    if code in UNKNOWN_INSTANCE_CODES:
        return errors.UnknownInstance(
            f"{subject} does not exist in {region} ({code}): check sendhost_instance_id and "
            f"sendhost_region in the inventory")
    if code == "PrivateIpAddressLimitExceeded":
        return errors.SlotLimitExceeded(
            f"{subject}: more private IPs than its instance type allows (PrivateIpAddressLimitExceeded): "
            f"lower sendhost_pool_size or move the host to a larger instance type")
    if code in NOT_FOUND_CODES:
        return errors.AddressGone(f"{subject} is already gone ({code})")
    if code == "InvalidIPAddress.InUse":
        return errors.AddressInUse(
            f"{subject}: AWS says the address is still in use (InvalidIPAddress.InUse): disassociate it and "
            f"reset its reverse DNS first")
    if code == "InvalidAddress.PtrSet":
        return errors.PtrStillSet(
            f"{subject}: AWS still holds its reverse DNS (InvalidAddress.PtrSet); after a reset this lasts "
            f"minutes: retried later")
    if code == "Resource.AlreadyAssociated":
        return errors.AddressAlreadyAssociated(
            f"{subject}: the private IP already holds an Elastic IP (Resource.AlreadyAssociated): run "
            f"`sendhost pool reconcile` to see which one")
    if code == "NoSuchHostedZone":
        return errors.HostedZoneNotFound(f"Route 53 hosted zone for {subject} does not exist ({code})")
    return errors.AwsRequestFailed(f"AWS refused {operation} on {subject} ({code}): {message.strip()}", code)
