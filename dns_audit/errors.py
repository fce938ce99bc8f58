"""dns_audit's errors: the audit could not run (bad input, no resolver answering) -> exit 2."""

from __future__ import annotations

from sendhost.errors import ConfigError


class AuditError(ConfigError):
    """The audit itself could not run; the message names the input and what to fix (exit 2)."""


class BadDomain(AuditError):
    """A domain name that is not a valid (IDNA) host name."""


class ZoneFileError(AuditError):
    """A zone file that does not parse; the message carries file:line."""


class NoResolverAnswer(AuditError):
    """Not a single DNS query got an answer: the nameserver is unreachable or wrong."""
