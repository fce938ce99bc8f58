"""The persistent slot configuration for each network stack, written over SSH into the namespace host, in full.

The auto-detected stack on the test machine is covered by test_provision_e2e; here each stack is forced, and each
file is checked by the stack's own tool from Debian: `netplan generate` (netplan.io) renders it, and `ifquery` /
`ifup --no-act` (ifupdown) parse it; the role's own `validate:` uses the same tools. systemd-networkd has no offline
checker for .network files (`systemd-analyze verify` reads units only), so its drop-in is asserted line by line.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from provisioning.runner import find_ansible_playbook, run_playbook
from tests.provisioning.conftest import CLI_ENV, host_vars, write_inventory
from tests.support.net import on_ci
from tests.support.sshhost import SshHost

pytestmark = pytest.mark.slow

HEADER = "# Ansible managed (role sender_addresses)"


def need(tool: str, package: str) -> str:
    found = shutil.which(tool) or (f"/usr/sbin/{tool}" if Path(f"/usr/sbin/{tool}").exists() else None)
    if found is None:
        if on_ci():
            pytest.fail(f"{tool} missing on CI: .ci/run must install {package}")
        pytest.skip(f"the real {tool} validator needs `apt-get install {package}`")
    return found


def provision_stack(host: SshHost, tmp_path: Path, stack: str, slots: list[str],
                    monkeypatch: pytest.MonkeyPatch, **overrides: object) -> Path:
    files = tmp_path / "files"
    inventory = write_inventory(tmp_path / "inventory.yml", {"sender-t": host_vars(
        host, files, slots, sender_addresses__stack=stack, **overrides)})
    for name, value in CLI_ENV.items():
        monkeypatch.setenv(name, value)
    result = run_playbook(inventory, binary=find_ansible_playbook({"PATH": ""}), tags=["sender_addresses"])
    assert not result.failed, result
    return files


def netplan_generate(netplan: str, root: Path, files: dict[str, str]) -> str:
    """Render `files` (name -> YAML) in a scratch root with the real netplan; the .network files it writes."""
    (root / "etc" / "netplan").mkdir(parents=True)
    for name, text in files.items():
        path = root / "etc" / "netplan" / name
        path.write_text(text)
        path.chmod(0o600)
    subprocess.run([netplan, "generate", "--root-dir", str(root)], check=True, capture_output=True, text=True)
    return "".join(p.read_text() for p in sorted((root / "run" / "systemd" / "network").glob("*.network")))


def cloud_init_netplan(interface: str, secondaries: list[str]) -> str:
    """The netplan file cloud-init's EC2 datasource writes: DHCP for the primary address, and with
    apply_full_imds_network_config (its default) every secondary private IP from instance metadata as well."""
    addresses = f"      addresses: [{', '.join(f'{a}/24' for a in secondaries)}]\n" if secondaries else ""
    return ("network:\n  version: 2\n  ethernets:\n"
            f"    {interface}:\n      match:\n        macaddress: '02:00:00:00:00:01'\n"
            f"      set-name: {interface}\n      dhcp4: true\n{addresses}")


def test_netplan_file_lists_each_slot_with_its_label(fresh_host: SshHost, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    netplan = need("netplan", "netplan.io")
    slots = [fresh_host.slot_address(1), fresh_host.slot_address(2)]
    interface, label = fresh_host.interface, f"{fresh_host.interface}:sh"

    files = provision_stack(fresh_host, tmp_path, "netplan", slots, monkeypatch)

    written = files / "netplan" / "60-sendhost-slots.yaml"
    assert written.read_text() == (
        f"{HEADER}: slot addresses, merged with the interface's own configuration\n"
        "network:\n  version: 2\n  ethernets:\n"
        f"    {interface}:\n      addresses:\n"
        f'        - "{slots[0]}/24":\n            label: "{label}"\n'
        f'        - "{slots[1]}/24":\n            label: "{label}"\n')
    assert oct(written.stat().st_mode & 0o777) == "0o600"
    assert fresh_host.bound_addresses() == {fresh_host.address, *slots}
    # netplan itself, merging the file with the one cloud-init writes once the role's drop-in is in place
    # (primary address by DHCP only): each slot once, with its label
    network = netplan_generate(netplan, tmp_path / "root", {
        "50-cloud-init.yaml": cloud_init_netplan(interface, []), "60-sendhost-slots.yaml": written.read_text()})
    assert network.count("\nAddress=") == 2
    assert f"[Address]\nAddress={slots[0]}/24\nLabel={label}\n" in network
    assert f"[Address]\nAddress={slots[1]}/24\nLabel={label}\n" in network
    assert "DHCP=ipv4" in network


def test_cloud_init_rendering_every_secondary_would_duplicate_the_slots(fresh_host: SshHost, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Why the role's cloud-init drop-in exists: with apply_full_imds_network_config left on, netplan merges an
    unlabelled copy of each slot address beside the role's labelled one."""
    netplan = need("netplan", "netplan.io")
    slots = [fresh_host.slot_address(1)]
    files = provision_stack(fresh_host, tmp_path, "netplan", slots, monkeypatch)

    network = netplan_generate(netplan, tmp_path / "root", {
        "50-cloud-init.yaml": cloud_init_netplan(fresh_host.interface, slots),
        "60-sendhost-slots.yaml": (files / "netplan" / "60-sendhost-slots.yaml").read_text()})

    assert network.count(f"Address={slots[0]}/24") == 2  # the duplicate the drop-in prevents


def test_networkd_drop_in_labels_each_address(fresh_host: SshHost, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    slots = [fresh_host.slot_address(1), fresh_host.slot_address(2)]
    interface, label = fresh_host.interface, f"{fresh_host.interface}:sh"

    files = provision_stack(fresh_host, tmp_path, "networkd", slots, monkeypatch)

    assert (files / "networkd" / "60-sendhost-slots.conf").read_text() == (
        f"{HEADER}: slot addresses for {interface}\n"
        f"[Address]\nAddress={slots[0]}/24\nLabel={label}\n"
        f"[Address]\nAddress={slots[1]}/24\nLabel={label}\n")
    assert fresh_host.bound_addresses() == {fresh_host.address, *slots}


def test_ifupdown_file_adds_each_slot_when_the_interface_comes_up(fresh_host: SshHost, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    ifup = need("ifup", "ifupdown")
    need("ifquery", "ifupdown")  # the role's validator
    slots = [fresh_host.slot_address(3), fresh_host.slot_address(4)]
    interface, label = fresh_host.interface, f"{fresh_host.interface}:sh"

    files = provision_stack(fresh_host, tmp_path, "ifupdown", slots, monkeypatch)

    written = files / "interfaces.d" / "60-sendhost-slots"
    assert written.read_text() == (
        f"{HEADER}: slot addresses for {interface},\n"
        "# added when the interface comes up (ifupdown merges several stanzas for one interface)\n"
        f"iface {interface} inet manual\n"
        f"    up ip addr replace {slots[0]}/24 dev {interface} label {label}\n"
        f"    down ip addr del {slots[0]}/24 dev {interface} || true\n"
        f"    up ip addr replace {slots[1]}/24 dev {interface} label {label}\n"
        f"    down ip addr del {slots[1]}/24 dev {interface} || true\n")
    assert fresh_host.bound_addresses() == {fresh_host.address, *slots}
    # what ifupdown itself would run when the interface comes up, without running it (it prints on stderr)
    state = tmp_path / "ifstate"
    state.mkdir()
    planned = subprocess.run([ifup, "--no-act", "--no-scripts", "--state-dir", str(state), "-i", str(written),
                              interface], check=True, capture_output=True, text=True)
    commands = [line for line in planned.stderr.splitlines() if line.startswith("ip addr")]
    assert commands == [f"ip addr replace {slot}/24 dev {interface} label {label}" for slot in slots]

    # Beside the stanza cloud-init writes (interfaces.d/50-cloud-init, DHCP), ifupdown merges both and binds the
    # slots after the DHCP address, which so stays the interface's primary one (the kernel's default source).
    etc = tmp_path / "etc-network"
    (etc / "interfaces.d").mkdir(parents=True)
    (etc / "interfaces.d" / "50-cloud-init").write_text(f"auto {interface}\niface {interface} inet dhcp\n")
    shutil.copy(written, etc / "interfaces.d" / "60-sendhost-slots")
    (etc / "interfaces").write_text(f"source {etc}/interfaces.d/*\n")
    planned = subprocess.run([ifup, "--no-act", "--no-scripts", "--state-dir", str(state), "-i",
                              str(etc / "interfaces"), interface], check=True, capture_output=True, text=True)
    lines = planned.stderr.splitlines()
    dhcp_at = next(i for i, line in enumerate(lines) if "dhclient" in line)
    slots_at = [i for i, line in enumerate(lines) if line.startswith("ip addr replace")]
    assert len(slots_at) == 2 and dhcp_at < min(slots_at)


def test_a_file_its_validator_rejects_is_not_written(fresh_host: SshHost, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    need("netplan", "netplan.io")
    files = tmp_path / "files"
    # an address netplan refuses: its real validator stops the write, before anything is bound
    bad = fresh_host.slot_address(1).rsplit(".", 1)[0] + ".999"
    inventory = write_inventory(tmp_path / "inventory.yml", {"sender-t": host_vars(
        fresh_host, files, [bad], sender_addresses__stack="netplan")})
    for name, value in CLI_ENV.items():
        monkeypatch.setenv(name, value)

    result = run_playbook(inventory, binary=find_ansible_playbook({"PATH": ""}), tags=["sender_addresses"])

    assert result.failed
    assert "failed to validate" in (result.hosts[0].message or "")
    assert not (files / "netplan" / "60-sendhost-slots.yaml").exists()
    assert fresh_host.bound_addresses() == {fresh_host.address}  # nothing bound after a failed config write
