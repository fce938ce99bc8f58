"""The sender_agent role reads the inventory's mailboxes and hosts by key: every key it reads must be a field of the
model's records (`sendhost.model`), so a renamed or removed field cannot leave the role reading nothing."""

from __future__ import annotations

import re
import typing
from dataclasses import fields
from pathlib import Path

import yaml

from sendhost import model
from toolkit.inventory import GLOBAL_KEYS, HOST_KEYS

ROLE = Path(model.__file__).parent.parent / "provisioning" / "playbooks" / "roles" / "sender_agent"
# What the role's Jinja reads off one `sendhost_mailboxes` item, and off one of its services (smtp, imap).
MAILBOX_KEY = re.compile(r"\bmailbox\.([a-z_]+)\b")
SERVICE_KEY = re.compile(r"\bmailbox\[service\]\.([a-z_]+)\b")
# A host's inventory keys are its record's fields (sendhost_<field>), but for these two: its name is its key in
# `senders.hosts`, and `ansible_host` is Ansible's own.
HOST_FIELDS_WITHOUT_KEY = {"name", "ansible_host"}


def _role_text() -> str:
    files = sorted(p for p in ROLE.rglob("*") if p.is_file() and p.suffix in {".yml", ".j2"})
    assert files, f"no role files under {ROLE}"
    return "\n".join(p.read_text() for p in files)


def _defaults() -> dict[str, typing.Any]:
    loaded = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    assert isinstance(loaded, dict)
    return loaded


def _names(record: type) -> set[str]:
    return {f.name for f in fields(record)}


def _service_record(service: str) -> type:
    """The record a mailbox's `service` settings parse into (Submission for smtp, ImapSettings for imap)."""
    hints = typing.get_type_hints(model.Mailbox, vars(model))
    assert service in hints, f"the role reads mailbox service {service!r}, which is not a field of Mailbox"
    [record] = [t for t in typing.get_args(hints[service]) if t is not type(None)]
    return typing.cast(type, record)


def test_every_mailbox_key_the_role_reads_is_a_field_of_the_model() -> None:
    text = _role_text()
    read = set(MAILBOX_KEY.findall(text))
    assert "address" in read  # the pattern finds what the role reads
    assert read <= _names(model.Mailbox), f"not fields of sendhost.model.Mailbox: {read - _names(model.Mailbox)}"


def test_every_service_key_the_role_reads_is_a_field_of_its_settings_or_their_credential() -> None:
    text = _role_text()
    read = set(SERVICE_KEY.findall(text))
    assert {"password_file", "password_env"} <= read
    services = set(_defaults()["sender_agent__secret_suffix"])
    assert services == {"smtp", "imap"}
    for service in services:
        record = _service_record(service)
        known = (_names(record) - {"credential"}) | _names(model.Credential)
        assert read <= known, f"{service}: not fields of {record.__name__} or Credential: {read - known}"


def test_the_agents_inventory_carries_every_host_key_of_the_model() -> None:
    copied = set(_defaults()["sender_agent__inventory_host_keys"])
    model_keys = {f"sendhost_{name}" for name in _names(model.SenderHost) - HOST_FIELDS_WITHOUT_KEY}
    # the host copy of the inventory keeps every field the agent's own load_inventory reads, and nothing else
    assert copied == model_keys == HOST_KEYS


def test_the_agents_global_keys_are_inventory_keys() -> None:
    copied = set(_defaults()["sender_agent__inventory_global_keys"])
    assert copied <= GLOBAL_KEYS, copied - GLOBAL_KEYS

