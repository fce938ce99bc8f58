"""Errors of the warmup package; all derive from SendhostError."""

from sendhost.errors import ConfigError, OperationFailed, SendhostError


class WarmupError(SendhostError):
    """Base of every warmup error."""


class WarmupConfigError(WarmupError, ConfigError):
    """Bad input to a warm-up operation (invalid address, future start, ambiguous rate, unknown mailbox): exit 2."""


class UnknownMailbox(WarmupConfigError):
    """The mailbox is not under the guard (never added, or Redis lost it): exit 2. The sender's agent rebuilds the
    guard's counters from its ledger when it meets one."""

    def __init__(self, address: str, fix: str) -> None:
        super().__init__(f"unknown mailbox {address!r}; {fix}")
        self.address = address


class WarmupUnavailable(WarmupError, OperationFailed):
    """Redis could not be reached for an operation that has no safe fallback (add, pause, resume): exit 1."""
