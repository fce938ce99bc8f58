"""Values that reach files on the sender hosts are checked: host names, interfaces, and no control characters.

A newline in a host name or a Redis URL used to pass the inventory check and render an extra line into the agent's
env file (`HTTPS_PROXY=…`); every inventory string is now refused at its line if it holds a control character.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from sendhost.errors import ConfigError
from tests.conftest import REPO_ROOT, run_cli
from toolkit.inventory import load_inventory

EXAMPLE = (REPO_ROOT / "inventory.example.yml").read_text()


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "inventory.yml"
    path.write_text(text)
    return path


def line_of(text: str, fragment: str) -> int:
    return next(number for number, line in enumerate(text.splitlines(), 1) if fragment in line)


@pytest.mark.parametrize(("old", "new"), [
    ("        sender-1:", '        "sender-1\\nHTTPS_PROXY=http://evil.example:3128":'),
    ("  vars:\n", '  vars:\n    sendhost_redis_url: "redis://:s3cret@redis.internal:6379/0\\nHTTPS_PROXY=http://e:1"\n'),
    ("ansible_user: ubuntu", 'ansible_user: "ubuntu\\rroot"'),
    ("group: default", 'group: "default\\tx"'),
    ("timezone: UTC", 'timezone: "UTC\\u2028x"'),
    ("ansible_user: ubuntu", 'ansible_user: "ubuntu\\x1b[2J"'),
    ("        sender-1:", '        "sender-1\\u0085":'),
], ids=["host-name-newline", "redis-url-newline", "ansible-var-cr", "tab", "line-separator", "escape", "nel"])
def test_a_control_character_anywhere_is_refused_at_its_line(tmp_path: Path, old: str, new: str) -> None:
    text = EXAMPLE.replace(old, new, 1)
    assert text != EXAMPLE
    path = write(tmp_path, text)
    result = run_cli("inventory", "check", "--offline", str(path))
    assert result.returncode == 2, result.stderr
    line = line_of(text, new.strip().splitlines()[-1][:20])
    assert result.stderr.startswith(f"error: {path}:{line}: a value holds the control character "), result.stderr
    assert len(result.stderr.splitlines()) == 1 and "s3cret" not in result.stderr


@pytest.mark.parametrize("name", ["sender 1", "sender{1}", "sender/1", "-sender", "s" * 64, "sender;rm", "sendér"])
def test_host_names_outside_their_character_set_are_refused(tmp_path: Path, name: str) -> None:
    text = EXAMPLE.replace("        sender-1:", f'        "{name}":', 1)
    with pytest.raises(ConfigError) as caught:
        load_inventory(write(tmp_path, text))
    assert str(caught.value) == (
        f"{tmp_path / 'inventory.yml'}:{line_of(text, name[:20])}: senders.hosts: {name!r} is not a host name: "
        "up to 63 letters, digits, '.', '_' or '-', starting alphanumeric"
    )


@pytest.mark.parametrize("name", ["sender-1", "mail.example.com", "s_1", "S1", "10.0.1.10"])
def test_ordinary_host_names_load(tmp_path: Path, name: str) -> None:
    text = EXAMPLE.replace("        sender-1:", f"        {name}:", 1)
    assert load_inventory(write(tmp_path, text)).hosts[0].name == name


def test_an_underscore_is_refused_where_the_host_name_becomes_a_ptr_record(tmp_path: Path) -> None:
    text = EXAMPLE.replace("        sender-2:", "        sender_2:", 1)
    with pytest.raises(ConfigError, match=r"sender_2.sendhost_pool.ptr: the forward record sender_2-N.example.com "
                                          r"would not be a valid host name"):
        load_inventory(write(tmp_path, text))


@pytest.mark.parametrize("interface", ["eth0 up", "eth0;reboot", "eth0/1", "eth0:1", "a" * 16, "", "-eth0"])
def test_interfaces_outside_their_character_set_are_refused(tmp_path: Path, interface: str) -> None:
    text = EXAMPLE.replace("          sendhost_subnet: 10.0.1.0/24",
                           f'          sendhost_subnet: 10.0.1.0/24\n          sendhost_interface: "{interface}"', 1)
    with pytest.raises(ConfigError) as caught:
        load_inventory(write(tmp_path, text))
    assert str(caught.value).startswith(
        f"{tmp_path / 'inventory.yml'}:{line_of(text, 'sendhost_interface')}: sender-1.sendhost_interface: "
        f"{interface!r} is not a network interface name like eth0 or ens5")


@pytest.mark.parametrize("interface", ["eth0", "ens5", "enp0s3", "veth-a1", "bond0.100", "a" * 15])
def test_real_interface_names_load(tmp_path: Path, interface: str) -> None:
    text = EXAMPLE.replace("          sendhost_subnet: 10.0.1.0/24",
                           f"          sendhost_subnet: 10.0.1.0/24\n          sendhost_interface: {interface}", 1)
    assert load_inventory(write(tmp_path, text)).hosts[0].interface == interface


def test_without_sendhost_interface_the_host_names_its_default_route_interface(tmp_path: Path) -> None:
    # never a literal eth0: Nitro instances call it ens5; the role reads facts, `host verify` asks `ip route`
    assert [h.interface for h in load_inventory(write(tmp_path, EXAMPLE)).hosts] == [None, None]


def strings_of(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [s for field in dataclasses.fields(value) for s in strings_of(getattr(value, field.name))]
    if isinstance(value, tuple | list):
        return [s for item in value for s in strings_of(item)]
    return []


def test_every_string_of_the_example_inventory_is_free_of_control_characters() -> None:
    strings = strings_of(load_inventory(REPO_ROOT / "inventory.example.yml"))
    assert len(strings) > 20
    assert not [s for s in strings if any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in s)]


def test_provision_refuses_an_injected_env_line_before_ansible_runs(tmp_path: Path) -> None:
    text = EXAMPLE.replace("  vars:\n", '  vars:\n    sendhost_redis_url: "redis://r.internal:6379/0\\nHTTPS_PROXY=http://e:1"\n',
                           1)
    path = write(tmp_path, text)
    result = run_cli("provision", "--inventory", str(path), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == (f"error: {path}:10: a value holds the control character '\\n' at character 26; remove "
                             "it: inventory values are written into files on the sender hosts, where a newline would "
                             "start a new setting\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["inventory.yml"], "nothing written, Ansible never ran"
