"""Errors of the provisioning package; all derive from SendhostError."""

from sendhost.errors import ConfigError, OperationFailed, SendhostError


class ProvisionError(SendhostError):
    """Base of every provisioning error."""


class ProvisionConfigError(ProvisionError, ConfigError):
    """Bad input: a host without an address or key, a slot outside its subnet, ansible-playbook missing: exit 2."""


class ProvisionFailed(ProvisionError, OperationFailed):
    """The playbook or a verification ran and failed (a host unreachable, a key changed, ...): exit 1."""
