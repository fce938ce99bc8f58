"""The agent's runtime settings: the host it sends from, its mailboxes (the inventory's own records, from
`sendhost.model`: warm-up settings and how each submits), the unsubscribe URL and its timeouts."""

from __future__ import annotations

from dataclasses import dataclass, field

from sender.errors import SenderConfigError
from sendhost.model import Mailbox


@dataclass(frozen=True)
class AgentSettings:
    """Everything `Agent` needs that is not a client: the host it sends from, its mailboxes, the unsubscribe URL."""

    host: str
    primary_ip: str | None
    mailboxes: tuple[Mailbox, ...]  # each with its smtp settings
    unsubscribe_base_url: str
    smtp_timeout_s: float = 30.0
    lease_ttl_s: float | None = None  # default: long enough for every SMTP timeout of one conversation
    retry_delay_s: float = 1800.0
    sweep_after_s: float = 1800.0
    groups: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if not self.mailboxes:
            raise SenderConfigError("no mailboxes with smtp settings to send from; add smtp: to sendhost_mailboxes")
        for mailbox in self.mailboxes:
            if mailbox.smtp is None:
                raise SenderConfigError(f"mailbox {mailbox.address} has no smtp settings to send with; add smtp: "
                                        "to it in sendhost_mailboxes")
        if not self.unsubscribe_base_url.startswith(("https://", "http://127.", "http://localhost")):
            raise SenderConfigError(f"unsubscribe base URL {self.unsubscribe_base_url!r} must be https:// "
                                    "(RFC 8058); set sendhost_unsubscribe_base_url")

    @property
    def lease_ttl(self) -> float:
        # connect, EHLO, STARTTLS, EHLO, AUTH, MAIL, RCPT, DATA, end of data: each may wait one timeout.
        return self.lease_ttl_s if self.lease_ttl_s is not None else 9 * self.smtp_timeout_s + 30

    def by_group(self) -> dict[str, list[Mailbox]]:
        grouped: dict[str, list[Mailbox]] = {}
        for mailbox in self.mailboxes:
            grouped.setdefault(mailbox.group, []).append(mailbox)
        return grouped
