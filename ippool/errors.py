"""Errors of the ippool package; all derive from SendhostError."""

from sendhost.errors import ConfigError, OperationFailed, SendhostError


class IppoolError(SendhostError):
    """Base of every ippool error."""


class PoolConfigError(IppoolError, ConfigError):
    """Bad input to a pool operation (unknown host, bad slot count, ...): exit 2."""


class PoolOperationFailed(IppoolError, OperationFailed):
    """A pool operation ran and failed (AWS refused, quota exhausted, ...): exit 1."""


# --- AWS adapter errors (ippool/aws/errors.py maps AWS error codes to these) ---


class AwsCredentialsError(PoolConfigError):
    """AWS refused our credentials or our permissions (AuthFailure, ExpiredToken, UnauthorizedOperation): exit 2."""


class UnknownInstance(PoolConfigError):
    """The instance id does not exist in the region (InvalidInstanceID.NotFound/Malformed): exit 2."""


class SlotLimitExceeded(PoolConfigError):
    """More slots than the instance type has private IPs per interface (PrivateIpAddressLimitExceeded): exit 2."""


class HostedZoneNotFound(PoolConfigError):
    """The Route 53 hosted zone the inventory names does not exist in the account: exit 2."""


class AddressQuotaExceeded(PoolOperationFailed):
    """The region's Elastic IP quota is used up (AddressLimitExceeded): exit 1; the message names the quota."""


class AddressGone(PoolOperationFailed):
    """The EIP or its association no longer exists (InvalidAllocationID/InvalidAssociationID/InvalidAddress.NotFound).

    Release and disassociate treat it as already done; anything else that meets it should re-read AWS.
    """


class AddressInUse(PoolOperationFailed):
    """AWS says the address is still in use (InvalidIPAddress.InUse): associated, or carrying reverse DNS."""


class PtrStillSet(PoolOperationFailed):
    """AWS still holds the EIP's reverse DNS (InvalidAddress.PtrSet): after a reset it refuses release for minutes.

    Not a failure: the reaper retries on its next cycle and `pool destroy` waits."""


class ReverseDnsFailed(PoolOperationFailed):
    """AWS reported the EIP's PTR update FAILED (or it stayed PENDING past the wait): the address must not serve."""


class AddressAlreadyAssociated(PoolOperationFailed):
    """The slot's private IP already holds an EIP (Resource.AlreadyAssociated), ours or a stranger's."""


class AwsThrottled(PoolOperationFailed):
    """AWS kept answering RequestLimitExceeded after every retry: exit 1; try again later."""


class AwsRequestFailed(PoolOperationFailed):
    """Any other AWS refusal or unreachable endpoint: exit 1; the message carries AWS's code and text."""

    def __init__(self, message: str, code: str = "") -> None:
        super().__init__(message)
        self.code = code  # AWS's error code, "" when AWS could not be reached


class AddressNotOurs(PoolOperationFailed):
    """An EIP or private IP that Redis named is not this pool's in AWS (another pool's, host's or slot's tags, or a
    private IP that is not a secondary IP of the host's interface): refused before any change, exit 1.

    Redis is not an authority over AWS: any host holding the Redis URL can write a slot hash."""
