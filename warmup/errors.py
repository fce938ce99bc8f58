"""Errors of the warmup package; all derive from SendhostError."""

from sendhost.errors import ConfigError, OperationFailed, SendhostError


class WarmupError(SendhostError):
    """Base of every warmup error."""


class WarmupConfigError(WarmupError, ConfigError):
    """Bad input to a warm-up operation (invalid address, future start, ambiguous rate, unknown mailbox): exit 2."""


class WarmupUnavailable(WarmupError, OperationFailed):
    """Redis could not be reached for an operation that has no safe fallback (add, pause, resume): exit 1."""
