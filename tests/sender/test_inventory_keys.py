"""The sender agent's inventory keys: settings read, secrets kept out, bad values named with file:line."""

from __future__ import annotations

from pathlib import Path

import pytest

from sendhost.errors import ConfigError
from toolkit.inventory import load_inventory

HOSTS = "  children:\n    senders:\n      hosts: {}\n"


def _inventory(tmp_path: Path, global_vars: str = "", mailbox: str = "") -> Path:
    path = tmp_path / "inventory.yml"
    path.write_text("all:\n  vars:\n" + global_vars +
                    "    sendhost_mailboxes:\n      - address: a@ex.com\n        domain: ex.com\n"
                    "        start: '2026-11-01'\n" + mailbox + HOSTS)
    return path


def test_sender_settings_are_read(tmp_path: Path) -> None:
    inventory = load_inventory(_inventory(
        tmp_path,
        "    sendhost_database_url: postgresql://sendhost@db.internal/sendhost\n"
        "    sendhost_unsubscribe_base_url: https://u.ex.com/\n",
        "        min_gap_s: 0\n        jitter_s: [5, 30]\n"
        "        smtp: {host: smtp.gmail.com, security: starttls, username: a@ex.com,\n"
        "               password_env: SENDHOST_SECRET_A_PW}\n"))
    (mailbox,) = inventory.mailboxes
    assert inventory.database_url == "postgresql://sendhost@db.internal/sendhost"
    assert inventory.unsubscribe_base_url == "https://u.ex.com"
    assert (mailbox.min_gap_s, mailbox.jitter_s) == (0.0, (5.0, 30.0))
    assert mailbox.smtp is not None
    assert (mailbox.smtp.port, mailbox.smtp.credential.password_env) == (587, "SENDHOST_SECRET_A_PW")


@pytest.mark.parametrize(("mailbox", "expected"), [
    ("        smtp: {host: smtp.gmail.com, username: a@ex.com, password: hunter2}\n",
     "never put a password in the inventory"),
    ("        smtp: {host: smtp.gmail.com, security: none, username: a@ex.com, password_env: SENDHOST_SECRET_X}\n",
     "allowed only for a loopback host"),
    ("        smtp: {host: smtp.gmail.com, username: a@ex.com}\n", "exactly one of password_file or password_env"),
    ("        auth: xoauth2\n", "auth: xoauth2 needs token_file"),
    ("        jitter_s: [30, 5]\n", "0 <= low <= high"),
    ("        min_gap_s: -1\n", "below 0"),
])
def test_bad_mailbox_settings_are_named(tmp_path: Path, mailbox: str, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected) as raised:
        load_inventory(_inventory(tmp_path, mailbox=mailbox))
    assert str(raised.value).startswith(f"{tmp_path / 'inventory.yml'}:")


@pytest.mark.parametrize(("global_vars", "expected"), [
    ("    sendhost_database_url: mysql://x\n", "it is not a PostgreSQL URL; use postgresql://"),
    ("    sendhost_database_url: postgresql://u:hun@ter2@db/x\n", "percent-encode them"),
    ("    sendhost_unsubscribe_base_url: http://u.ex.com\n", "expected an https:// URL"),
])
def test_bad_global_settings_are_named(tmp_path: Path, global_vars: str, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        load_inventory(_inventory(tmp_path, global_vars))
