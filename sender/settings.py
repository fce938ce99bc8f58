"""What the agent needs to know about each mailbox: warm-up settings and how it submits. Secrets are read at each
connection from a file or an environment variable, never kept in the inventory."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date

from sender.errors import SenderConfigError


@dataclass(frozen=True)
class Submission:
    """A provider's submission server: 587 STARTTLS or 465 TLS, authenticated as the mailbox."""

    host: str
    port: int
    security: str  # starttls | tls | none (loopback only)
    username: str
    password_file: str | None = None
    password_env: str | None = None
    ca_file: str | None = None
    auth: str = "password"  # password | xoauth2
    token_file: str | None = None  # xoauth2 access token, re-read at each connection

    def secret(self, env: Mapping[str, str] | None = None) -> str:
        """The password (or, for xoauth2, the access token); SenderConfigError naming the missing source."""
        if self.auth == "xoauth2":
            return _read(self.token_file, "token_file")
        if self.password_env:
            value = (env if env is not None else os.environ).get(self.password_env)
            if not value:
                raise SenderConfigError(f"environment variable {self.password_env} (password_env of {self.username})"
                                        " is not set; set it or use password_file")
            return value
        return _read(self.password_file, "password_file")


def _read(path: str | None, what: str) -> str:
    if not path:
        raise SenderConfigError(f"no {what} configured; add it to the mailbox's smtp settings")
    try:
        with open(path, encoding="utf-8") as handle:
            value = handle.read().strip()
    except OSError as exc:
        raise SenderConfigError(f"{what} {path}: {exc.strerror}; write the secret there (mode 0600)") from None
    if not value:
        raise SenderConfigError(f"{what} {path} is empty; write the secret there (mode 0600)")
    return value


@dataclass(frozen=True)
class MailboxSettings:
    address: str
    group: str
    start: date
    submission: Submission
    timezone: str = "UTC"
    domain: str | None = None
    min_gap_s: float = 420.0
    jitter_s: tuple[float, float] = (0.0, 90.0)


@dataclass(frozen=True)
class AgentSettings:
    """Everything `Agent` needs that is not a client: the host it sends from, its mailboxes, the unsubscribe URL."""

    host: str
    primary_ip: str | None
    mailboxes: tuple[MailboxSettings, ...]
    unsubscribe_base_url: str
    smtp_timeout_s: float = 30.0
    lease_ttl_s: float | None = None  # default: long enough for every SMTP timeout of one conversation
    retry_delay_s: float = 1800.0
    sweep_after_s: float = 1800.0
    groups: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if not self.mailboxes:
            raise SenderConfigError("no mailboxes with smtp settings to send from; add smtp: to sendhost_mailboxes")
        if not self.unsubscribe_base_url.startswith(("https://", "http://127.", "http://localhost")):
            raise SenderConfigError(f"unsubscribe base URL {self.unsubscribe_base_url!r} must be https:// "
                                    "(RFC 8058); set sendhost_unsubscribe_base_url")

    @property
    def lease_ttl(self) -> float:
        # connect, EHLO, STARTTLS, EHLO, AUTH, MAIL, RCPT, DATA, end of data: each may wait one timeout.
        return self.lease_ttl_s if self.lease_ttl_s is not None else 9 * self.smtp_timeout_s + 30

    def by_group(self) -> dict[str, list[MailboxSettings]]:
        grouped: dict[str, list[MailboxSettings]] = {}
        for mailbox in self.mailboxes:
            grouped.setdefault(mailbox.group, []).append(mailbox)
        return grouped
