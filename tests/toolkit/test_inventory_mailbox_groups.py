"""`sendhost_mailbox_groups`: the warm-up groups a sender host sends for. Unset, every group of the inventory's
mailboxes; set, each must be a group some mailbox is in, and the host's Redis user writes only their keys."""

from __future__ import annotations

from pathlib import Path

import pytest

from ippool.sender_acl import sender_acl_command
from sendhost.errors import ConfigError
from tests.conftest import REPO_ROOT, run_cli
from toolkit.inventory import load_inventory

EXAMPLE = (REPO_ROOT / "inventory.example.yml").read_text()
SUBNET = "          sendhost_subnet: 10.0.1.0/24"


def with_groups(tmp_path: Path, groups: str, *, carol_group: str = "default") -> Path:
    text = EXAMPLE.replace(SUBNET, f"{SUBNET}\n          sendhost_mailbox_groups: {groups}", 1)
    carol = "        timezone: UTC\n        group: "
    text = text.replace(f"{carol}default", f"{carol}{carol_group}")
    path = tmp_path / "inventory.yml"
    path.write_text(text)
    return path


def test_unset_a_host_serves_every_group_of_the_mailboxes(tmp_path: Path) -> None:
    inventory = load_inventory(with_groups(tmp_path, "[org]", carol_group="org"))
    first, second = inventory.hosts
    assert (first.mailbox_groups, second.mailbox_groups) == (("org",), None)
    assert inventory.mailbox_groups_of(first) == ("org",)
    assert inventory.mailbox_groups_of(second) == ("default", "org")


def test_a_group_no_mailbox_is_in_is_refused_at_its_line(tmp_path: Path) -> None:
    path = with_groups(tmp_path, "[default, defualt]")
    line = next(n for n, text in enumerate(path.read_text().splitlines(), 1) if "sendhost_mailbox_groups" in text)
    with pytest.raises(ConfigError) as caught:
        load_inventory(path)
    assert str(caught.value) == (
        f"{path}:{line}: sender-1.sendhost_mailbox_groups: no mailbox in sendhost_mailboxes is in group 'defualt' "
        "(groups: default); name a mailbox's group, or leave the key out for every group")


def test_the_cli_prints_the_grant_of_the_hosts_groups(tmp_path: Path) -> None:
    path = with_groups(tmp_path, "[org]", carol_group="org")
    printed = run_cli("--inventory", str(path), "pool", "sender-acl", "sender-1")
    assert (printed.returncode, printed.stdout.strip()) == (0, sender_acl_command("sender-1", ["org"])), printed.stderr
    assert "{org}" in printed.stdout and "{default}" not in printed.stdout and "{*}" not in printed.stdout
    every = run_cli("--inventory", str(path), "pool", "sender-acl", "sender-2")
    assert every.stdout.strip() == sender_acl_command("sender-2", ["default", "org"])
    flag = run_cli("--inventory", str(path), "pool", "sender-acl", "sender-1", "--group", "x", "--group", "y")
    assert flag.stdout.strip() == sender_acl_command("sender-1", ["x", "y"])
    bad = run_cli("pool", "sender-acl", "sender-1", "--group", "a}b")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "mailbox group 'a}b'" in bad.stderr
