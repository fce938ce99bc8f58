"""Errors of the ippool package; all derive from SendhostError."""

from sendhost.errors import ConfigError, OperationFailed, SendhostError


class IppoolError(SendhostError):
    """Base of every ippool error."""


class PoolConfigError(IppoolError, ConfigError):
    """Bad input to a pool operation (unknown host, bad slot count, ...): exit 2."""


class PoolOperationFailed(IppoolError, OperationFailed):
    """A pool operation ran and failed (AWS refused, quota exhausted, ...): exit 1."""
