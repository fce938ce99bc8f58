"""The sandbox's errors: a part that cannot start, or the server extra missing, is configuration (exit 2)."""

from __future__ import annotations

from sendhost.errors import ConfigError


class SandboxConfigError(ConfigError):
    """The sandbox cannot start as configured: the message names the part, its log or the install to run."""
