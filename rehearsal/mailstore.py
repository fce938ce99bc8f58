"""Putting a message into a sandbox mailbox's folder: an IMAP APPEND to the sandbox's dovecot, logged in as that
mailbox with its sandbox password, as a provider's own delivery would leave it.

Through IMAP rather than into the Maildir on disk: as root the Maildirs belong to dovecot's mail user, and
dovecot's indexes stay its own business. Where dovecot runs is in `imap.json` of the sandbox directory, written
when it starts and absent when dovecot is not installed.
"""

from __future__ import annotations

import imaplib
import json
import ssl
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from email.message import Message
from email.utils import getaddresses
from pathlib import Path

from rehearsal.errors import SandboxConfigError

ADDRESS_FILE = "imap.json"
USERS_FILE = "smtp-users.json"  # the sandbox's mailboxes and their passwords, the same for submission and IMAP
TIMEOUT_S = 10.0
# Where a delivered message names its recipient; Delivered-To and X-Original-To first, as an MTA writes them.
RECIPIENT_HEADERS = ("Delivered-To", "X-Original-To", "To", "Cc")


@dataclass(frozen=True)
class ImapAddress:
    host: str
    port: int
    ca_file: Path

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


def write_address(root: Path, address: ImapAddress) -> None:
    text = json.dumps({"host": address.host, "port": address.port, "ca_file": str(address.ca_file)})
    (root / ADDRESS_FILE).write_text(text)


def read_address(root: Path) -> ImapAddress | None:
    """Where the sandbox's dovecot listens (IMAPS), or None when it has none."""
    try:
        parsed = json.loads((root / ADDRESS_FILE).read_text())
        return ImapAddress(str(parsed["host"]), int(parsed["port"]), Path(parsed["ca_file"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def read_users(root: Path) -> dict[str, str]:
    try:
        parsed = json.loads((root / USERS_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return {str(k).lower(): str(v) for k, v in parsed.items()} if isinstance(parsed, dict) else {}


def sandbox_recipients(message: Message, users: Iterable[str]) -> list[str]:
    """The sandbox mailboxes `message` is addressed to, in header order, each once."""
    known = {user.lower() for user in users}
    found: list[str] = []
    for header in RECIPIENT_HEADERS:
        for _name, address in getaddresses([str(value) for value in message.get_all(header, [])]):
            address = address.strip().lower()
            if address in known and address not in found:
                found.append(address)
    return found


def append(address: ImapAddress, users: Mapping[str, str], user: str, folder: str, raw: bytes) -> None:
    """Store `raw` in `user`'s `folder`; SandboxConfigError naming the mailbox when dovecot refuses or is away."""
    context = ssl.create_default_context(cafile=str(address.ca_file))
    try:
        with imaplib.IMAP4_SSL(address.host, address.port, ssl_context=context, timeout=TIMEOUT_S) as imap:
            imap.login(user, users[user.lower()])
            status, detail = imap.append(f'"{folder}"', "", imaplib.Time2Internaldate(time.time()), raw)
    except (OSError, imaplib.IMAP4.error, KeyError) as exc:
        raise SandboxConfigError(f"could not store a message in {user}'s {folder} at the sandbox's IMAP "
                                 f"({address}): {exc}") from exc
    if status != "OK":
        raise SandboxConfigError(f"the sandbox's IMAP ({address}) refused a message for {user}'s {folder}: "
                                 f"{detail!r}")
