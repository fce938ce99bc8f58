"""Schema validation of the one inventory: good files load; bad ones name file:line, key and the fix."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from sendhost.errors import ConfigError
from tests.conftest import run_cli, run_cli_process
from toolkit.inventory import load_inventory

MINIMAL = """\
all:
  vars:
    sendhost_domains:
      - name: example.com
        dkim_selectors: [s1]
    sendhost_mailboxes:
      - address: a@example.com
        domain: example.com
        start: "2026-11-30"
  children:
    senders:
      hosts:
        s1:
          sendhost_instance_id: i-0123456789abcdef0
          sendhost_region: us-east-1
          sendhost_primary_ip: 10.0.0.5
          sendhost_pool:
            slots: 2
            private_ips: [10.0.0.6, 10.0.0.7]
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "inventory.yml"
    path.write_text(text)
    return path


def test_example_inventory_loads_with_every_contract_field(example_inventory: Path) -> None:
    inventory = load_inventory(example_inventory)
    first = inventory.hosts[0]
    assert first.name == "sender-1"
    assert first.instance_id.startswith("i-")
    assert first.pool.budget == (8, 15)
    assert first.pool.park_minutes == 15
    assert first.pool.private_ips == ("10.0.1.11", "10.0.1.12")
    assert inventory.hosts[1].pool.ptr is True and inventory.hosts[1].pool.ptr_zone == "example.com"
    assert [d.name for d in inventory.domains] == ["example.com", "example.org"]
    assert inventory.mailboxes[0].timezone == "America/New_York"
    assert inventory.redis_url is None


def test_minimal_inventory_gets_defaults(tmp_path: Path) -> None:
    inventory = load_inventory(write(tmp_path, MINIMAL))
    host = inventory.hosts[0]
    assert host.ansible_host == "10.0.0.5"
    assert host.pool.budget == (8, 15) and host.pool.park_minutes == 15 and host.pool.ptr is False
    assert inventory.mailboxes[0].group == "default" and inventory.mailboxes[0].timezone == "UTC"
    assert inventory.pool_name == "sendhost"


def test_pool_name_is_read_from_the_global_vars(tmp_path: Path) -> None:
    text = MINIMAL.replace("  vars:\n", "  vars:\n    sendhost_pool_name: team-a\n")
    assert load_inventory(write(tmp_path, text)).pool_name == "team-a"


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("      - name: example.com\n", "      - name: [example.com\n", r"inventory.yml:\d+: YAML syntax error"),
        ("            slots: 2\n", "            slots: 2\n            colour: red\n",
         r"inventory.yml:19: s1.sendhost_pool.colour: unknown key"),
        ("            slots: 2\n", "            slots: two\n",
         r"inventory.yml:18: s1.sendhost_pool.slots: expected a whole number"),
        ("sendhost_primary_ip: 10.0.0.5", "sendhost_primary_ip: 10.0.0.500",
         r"inventory.yml:16: s1.sendhost_primary_ip: '10.0.0.500' is not an IPv4 address"),
        ("[10.0.0.6, 10.0.0.7]", "[10.0.0.6, 10.0.0.6]",
         r"inventory.yml:19: s1.sendhost_pool.private_ips: address 10.0.0.6 is listed twice"),
        ("[10.0.0.6, 10.0.0.7]", "[10.0.0.5, 10.0.0.7]",
         r"inventory.yml:19: s1.sendhost_pool.private_ips: slot address 10.0.0.5 is already used by s1 \(primary IP\)"),
        ("  vars:\n", "  vars:\n    sendhost_redis_url: 'http://nope'\n",
         r"inventory.yml:3: sendhost_redis_url: malformed Redis URL 'http://nope'"),
        ("  vars:\n", "  vars:\n    sendhost_colour: red\n", r"inventory.yml:3: sendhost_colour: unknown key"),
        ("sendhost_region: us-east-1", "sendhost_region: mars", r"inventory.yml:15: s1.sendhost_region: 'mars' is not"),
        ('start: "2026-11-30"', 'start: "30/11/2026"', r"inventory.yml:9: sendhost_mailboxes\[0\].start"),
        ("dkim_selectors: [s1]", "dkim_selectors: s1",
         r"inventory.yml:5: sendhost_domains\[0\].dkim_selectors: expected a list"),
        ("  vars:\n", "  vars:\n    sendhost_pool_name: 'team a'\n",
         r"inventory.yml:3: sendhost_pool_name: 'team a' is not a pool name: up to 63 letters"),
    ],
    ids=["yaml-syntax", "unknown-key", "wrong-type", "bad-ip", "duplicate-slot", "slot-is-primary",
         "malformed-redis-url", "unknown-global", "bad-region", "bad-date", "selectors-not-list", "bad-pool-name"],
)
def test_schema_error_names_file_line_and_key(tmp_path: Path, old: str, new: str, expected: str) -> None:
    assert old in MINIMAL
    with pytest.raises(ConfigError, match=expected):
        load_inventory(write(tmp_path, MINIMAL.replace(old, new, 1)))


@pytest.mark.service
def test_check_command_exits_2_with_one_line_and_no_traceback(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL.replace("slots: 2", "slots: -1"))
    result = run_cli_process("inventory", "check", str(path))
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "inventory.yml:18: s1.sendhost_pool.slots: -1 is out of range 1..50" in lines[0]
    assert "Traceback" not in result.stderr


@pytest.mark.service
def test_an_alias_bomb_in_the_inventory_exits_2_naming_its_line(tmp_path: Path) -> None:
    # A key of nested aliases used to be written out whole: 1.5 GB and more than 20 s before this check.
    bomb = "".join(f"    {name}: &{name} [{', '.join([f'*{previous}'] * 9)}]\n"
                   for previous, name in zip("abcdefgh", "bcdefghi", strict=True))
    text = MINIMAL.replace("  vars:\n", "  vars:\n    a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + bomb
                           + "    ? *i\n    : boom\n", 1)
    result = run_cli_process("inventory", "check", str(write(tmp_path, text)))
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        f"error: {tmp_path / 'inventory.yml'}:8: the aliases in this file stand for more than 100,000 values; "
        "write the repeated settings out, or alias whole blocks fewer times"]


@pytest.mark.service
def test_check_with_verbose_shows_the_traceback(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL.replace("slots: 2", "slots: -1"))
    result = run_cli_process("-v", "inventory", "check", str(path))
    assert result.returncode == 2
    assert "Traceback" in result.stderr


@pytest.mark.service
def test_check_reports_unreachable_redis_url_with_line(tmp_path: Path) -> None:
    from tests.support.net import free_port

    text = MINIMAL.replace("  vars:\n", f"  vars:\n    sendhost_redis_url: redis://127.0.0.1:{free_port()}/0\n", 1)
    result = run_cli("inventory", "check", str(write(tmp_path, text)))
    assert result.returncode == 2
    assert "inventory.yml:3: sendhost_redis_url: cannot reach redis://127.0.0.1:" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_check_reaches_a_live_redis_url(tmp_path: Path, redis_url: str) -> None:
    text = MINIMAL.replace("  vars:\n", f"  vars:\n    sendhost_redis_url: {redis_url}\n", 1)
    result = run_cli("inventory", "check", str(write(tmp_path, text)), "--format", "json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "inventory": str(tmp_path / "inventory.yml"), "valid": True, "hosts": 1, "slots": 2, "domains": 1,
        "mailboxes": 1,
    }


@pytest.mark.service
def test_example_is_also_a_valid_ansible_inventory(example_inventory: Path) -> None:
    ansible_inventory = shutil.which("ansible-inventory") or str(Path(__import__("sys").executable).parent /
                                                                 "ansible-inventory")
    result = subprocess.run([ansible_inventory, "-i", str(example_inventory), "--list"],
                            capture_output=True, text=True, check=False, timeout=120)
    assert result.returncode == 0, result.stderr
    listed = json.loads(result.stdout)
    assert sorted(listed["senders"]["hosts"]) == ["sender-1", "sender-2"]
    assert listed["_meta"]["hostvars"]["sender-1"]["sendhost_pool"]["slots"] == 2
    assert "[WARNING]" not in result.stderr


IMAP = """        start: "2026-11-30"
        smtp: {host: smtp.gmail.com, username: a@example.com, password_env: SENDHOST_SECRET_A_SMTP}
        imap: {host: IMAP_HOSTAUTHSERV}
"""


@pytest.mark.parametrize(("host", "written", "expected"), [
    ("imap.gmail.com", "", "mx.google.com"),  # the provider preset
    ("IMAP.Gmail.com.", "", "mx.google.com"),
    ("imap.gmail.com", ", authserv_id: mx-eu.google.example", "mx-eu.google.example"),  # written wins
    ("outlook.office365.com", "", None),  # Microsoft writes no authserv-id: no verdict
    ("imap.example.net", ", authserv_id: mx.example.net", "mx.example.net"),
])
def test_imap_authserv_id_is_read_or_preset(tmp_path: Path, host: str, written: str, expected: str | None) -> None:
    text = MINIMAL.replace('        start: "2026-11-30"\n',
                           IMAP.replace("IMAP_HOST", host).replace("AUTHSERV", written), 1)
    (mailbox,) = load_inventory(write(tmp_path, text)).mailboxes
    assert mailbox.imap is not None and mailbox.imap.authserv_id == expected


def test_a_bad_authserv_id_names_the_key_and_the_fix(tmp_path: Path) -> None:
    text = MINIMAL.replace('        start: "2026-11-30"\n',
                           IMAP.replace("IMAP_HOST", "imap.gmail.com").replace("AUTHSERV", ', authserv_id: "mx; x"'), 1)
    with pytest.raises(ConfigError, match=r"inventory.yml:\d+: sendhost_mailboxes\[0\].imap.authserv_id: 'mx; x' is "
                                          r"not an authserv-id; write the name the provider puts first"):
        load_inventory(write(tmp_path, text))
