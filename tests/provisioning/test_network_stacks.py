"""The persistent slot configuration for each network stack, written over SSH into the namespace host.

The auto-detected stack on the test machine is covered by test_provision_e2e; here each stack is forced. netplan
and ifupdown are not installed on the test machine, so their own validators are swapped for stand-ins (named as
such) that parse the file; what is tested is the file the role writes and the live binding next to it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from provisioning.runner import DEFAULT_PLAYBOOK, find_ansible_playbook, run_playbook
from tests.provisioning.conftest import CLI_ENV, host_vars, write_inventory
from tests.support.sshhost import SshHost

pytestmark = pytest.mark.slow

ROLE_DEFAULTS = yaml.safe_load((DEFAULT_PLAYBOOK.parent / "roles/sender_addresses/defaults/main.yml").read_text())
STAND_IN_VALIDATORS = {
    **ROLE_DEFAULTS["sender_addresses__validate"],  # networkd keeps its real validator
    # stand-in for `netplan generate`: the file must be YAML with network.ethernets
    "netplan": f"{sys.executable} -c 'import sys, yaml; yaml.safe_load(open(sys.argv[1]))"
               f"[\"network\"][\"ethernets\"]' %s",
    # stand-in for `ifquery`: only iface stanzas with up/down commands
    "ifupdown": "sh -c '! grep -Evq \"^(#.*|iface .*|    (up|down) .*)?$\" \"$1\"' validate %s",
}


def provision_stack(host: SshHost, tmp_path: Path, stack: str, slots: list[str],
                    monkeypatch: pytest.MonkeyPatch) -> Path:
    files = tmp_path / "files"
    inventory = write_inventory(tmp_path / "inventory.yml", {"sender-t": host_vars(
        host, files, slots, sender_addresses__stack=stack, sender_addresses__validate=STAND_IN_VALIDATORS)})
    for name, value in CLI_ENV.items():
        monkeypatch.setenv(name, value)
    result = run_playbook(inventory, binary=find_ansible_playbook({"PATH": ""}), tags=["sender_addresses"])
    assert not result.failed, result
    return files


def test_netplan_file_lists_each_slot_with_its_label(fresh_host: SshHost, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    slots = [fresh_host.slot_address(1), fresh_host.slot_address(2)]

    files = provision_stack(fresh_host, tmp_path, "netplan", slots, monkeypatch)

    config = yaml.safe_load((files / "netplan" / "60-sendhost-slots.yaml").read_text())
    addresses = config["network"]["ethernets"][fresh_host.interface]["addresses"]
    assert addresses == [{f"{slot}/24": {"label": f"{fresh_host.interface}:sh"}} for slot in slots]
    assert oct((files / "netplan" / "60-sendhost-slots.yaml").stat().st_mode & 0o777) == "0o600"
    assert fresh_host.bound_addresses() == {fresh_host.address, *slots}


def test_ifupdown_file_adds_each_slot_when_the_interface_comes_up(fresh_host: SshHost, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    slot = fresh_host.slot_address(3)

    files = provision_stack(fresh_host, tmp_path, "ifupdown", [slot], monkeypatch)

    text = (files / "interfaces.d" / "60-sendhost-slots").read_text()
    assert f"iface {fresh_host.interface} inet manual\n" in text
    assert (f"    up ip addr replace {slot}/24 dev {fresh_host.interface} label {fresh_host.interface}:sh\n"
            in text)
    assert fresh_host.bound_addresses() == {fresh_host.address, slot}


def test_a_file_its_validator_rejects_is_not_written(fresh_host: SshHost, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    files = tmp_path / "files"
    inventory = write_inventory(tmp_path / "inventory.yml", {"sender-t": host_vars(
        fresh_host, files, [fresh_host.slot_address(1)], sender_addresses__stack="networkd",
        sender_addresses__validate={**STAND_IN_VALIDATORS, "networkd": "false %s"})})
    for name, value in CLI_ENV.items():
        monkeypatch.setenv(name, value)

    result = run_playbook(inventory, binary=find_ansible_playbook({"PATH": ""}), tags=["sender_addresses"])

    assert result.failed
    assert "failed to validate" in (result.hosts[0].message or "")
    assert not (files / "networkd" / "60-sendhost-slots.conf").exists()
    assert fresh_host.bound_addresses() == {fresh_host.address}  # nothing bound after a failed config write
