"""Why Postmaster Tools could not be read: a refusal only a person can fix (exit 2), or a failure to try again later
(exit 1)."""

from __future__ import annotations

from sender.errors import SenderConfigError, SenderError
from sendhost.errors import OperationFailed


class PostmasterRefused(SenderConfigError):
    """Google refused the credentials (401) or the access to a domain (403): the message names the domain and the
    fix. Exit 2."""


class PostmasterUnavailable(SenderError, OperationFailed):
    """Postmaster Tools could not be read now: unreachable, a server error, rate limited past the wait we allow,
    or an answer that is not its JSON. Exit 1."""

    exit_code = 1
