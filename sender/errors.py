"""The sender's errors: bad input exits 2, a service that failed exits 1 (see `sendhost.errors`)."""

from sendhost.errors import ConfigError, OperationFailed, SendhostError


class SenderError(SendhostError):
    """Base of the sender package's errors."""


class SenderConfigError(SenderError, ConfigError):
    """Bad input or configuration: a CSV row, a group, a secret file, a database URL. Exit 2."""


class LedgerUnavailable(SenderError, OperationFailed):
    """The ledger's PostgreSQL could not be reached or failed. Exit 1."""

    exit_code = 1
