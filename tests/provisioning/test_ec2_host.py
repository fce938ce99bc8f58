"""What a real EC2 host needs from the roles, run over SSH against the namespace host: the interface from facts,
fresh apt lists, the Amazon Time Sync Service, cloud-init kept off the slot addresses, and a clean rerun."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from provisioning import runner
from provisioning.runner import ProvisionResult, find_ansible_playbook, run_playbook
from tests.conftest import run_cli
from tests.provisioning.conftest import CLI_ENV, host_vars, write_inventory
from tests.support.sshhost import SshHost

pytestmark = pytest.mark.slow


@pytest.fixture
def default_route(fresh_host: SshHost) -> Iterator[SshHost]:
    """The namespace host with a default route through its interface, as an instance has (facts name it)."""
    fresh_host.ip("route", "add", "default", "via", fresh_host.root_address)
    try:
        yield fresh_host
    finally:
        fresh_host.ip("route", "del", "default")


def play(tmp_path: Path, variables: dict[str, Any], monkeypatch: pytest.MonkeyPatch, *, tags: list[str],
         check: bool = False, lines: list[str] | None = None) -> ProvisionResult:
    inventory = write_inventory(tmp_path / "inventory.yml", {"sender-t": variables})
    for name, value in CLI_ENV.items():
        monkeypatch.setenv(name, value)
    return run_playbook(inventory, binary=find_ansible_playbook({"PATH": ""}), tags=tags, check=check,
                        progress=lines.append if lines is not None else None)


def test_the_interface_is_the_default_route_one_from_facts(default_route: SshHost, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    host, files = default_route, tmp_path / "files"
    slot = host.slot_address(1)
    # no sendhost_interface: the namespace's interface is named like no guess (shpNNNNn), only facts know it
    variables = host_vars(host, files, [slot], sendhost_interface=None)

    result = play(tmp_path, variables, monkeypatch, tags=["sender_addresses"])

    assert not result.failed, result
    assert host.bound_addresses() == {host.address, slot}
    assert f"Label={host.interface}:sh\n" in (files / "networkd" / "60-sendhost-slots.conf").read_text()


def test_without_a_default_route_the_interface_must_be_named(fresh_host: SshHost, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    variables = host_vars(fresh_host, tmp_path / "files", [fresh_host.slot_address(1)], sendhost_interface=None)

    result = play(tmp_path, variables, monkeypatch, tags=["sender_addresses"])

    assert result.failed
    assert "set sendhost_interface in the inventory" in (result.hosts[0].message or "")
    assert fresh_host.bound_addresses() == {fresh_host.address}


def test_chrony_uses_the_amazon_time_sync_service(fresh_host: SshHost, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    files = tmp_path / "files"

    result = play(tmp_path, host_vars(fresh_host, files, []), monkeypatch, tags=["sender_base"])

    assert not result.failed, result
    assert (files / "chrony" / "sendhost-amazon-time-sync.sources").read_text() == (
        "# Ansible managed (role sender_base): the Amazon Time Sync Service, preferred over other sources\n"
        "server 169.254.169.123 prefer iburst minpoll 4 maxpoll 4\n"
        "server fd00:ec2::123 prefer iburst minpoll 4 maxpoll 4\n")


def test_cloud_init_leaves_secondary_addresses_to_the_role(fresh_host: SshHost, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    files = tmp_path / "files"
    (files / "cloud.cfg.d").mkdir(parents=True)  # cloud-init is installed
    interface = fresh_host.interface

    result = play(tmp_path, host_vars(fresh_host, files, [fresh_host.slot_address(1)]), monkeypatch,
                  tags=["sender_addresses"])

    assert not result.failed, result
    drop_in = (files / "cloud.cfg.d" / "60-sendhost-slots.cfg").read_text()
    assert drop_in == (
        f"# Ansible managed (role sender_addresses): the slot addresses on {interface} are\n"
        f"# written by sendhost with the label {interface}:sh. cloud-init configures the primary address by\n"
        "# DHCP only, and renders its network file at every boot, so no unlabelled copy of a slot address survives "
        "a reboot.\n"
        "datasource:\n  Ec2:\n    apply_full_imds_network_config: false\n"
        "updates:\n  network:\n    when: [boot-new-instance, boot]\n")
    assert yaml.safe_load(drop_in) == {"datasource": {"Ec2": {"apply_full_imds_network_config": False}},
                                       "updates": {"network": {"when": ["boot-new-instance", "boot"]}}}


def test_no_cloud_init_no_drop_in(fresh_host: SshHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = tmp_path / "files"

    result = play(tmp_path, host_vars(fresh_host, files, [fresh_host.slot_address(1)]), monkeypatch,
                  tags=["sender_addresses"])

    assert not result.failed, result
    assert not (files / "cloud.cfg.d").exists()


def test_packages_install_from_fresh_apt_lists(fresh_host: SshHost, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Check mode: apt finds its lists older than cache_valid_time and reports the refresh it would make, changing
    nothing; iproute2 is installed already. Read from the run's own events (a spy on the real collector)."""
    lists = Path("/var/lib/apt/lists")
    if not lists.is_dir():
        pytest.skip("this machine has no apt")
    before = lists.stat().st_mtime
    events: list[dict[str, Any]] = []

    class Recording(runner._Collector):
        def __call__(self, event: dict[str, Any]) -> bool:
            events.append(event)
            return super().__call__(event)

    monkeypatch.setattr(runner, "_Collector", Recording)
    variables = host_vars(fresh_host, tmp_path / "files", [], sender_base__packages=["iproute2"],
                          sender_base__apt_cache_valid_time=1)

    result = play(tmp_path, variables, monkeypatch, tags=["packages"], check=True)

    assert not result.failed, result
    [apt] = [e["event_data"]["res"] for e in events if e.get("event") == "runner_on_ok"
             and e["event_data"].get("task") == "Install base packages from fresh apt lists"]
    assert apt["cache_updated"] is True
    assert {k: apt["invocation"]["module_args"][k] for k in ("update_cache", "cache_valid_time")} == {
        "update_cache": True, "cache_valid_time": 1}
    assert lists.stat().st_mtime == before


def provision(inventory: Path, *args: str) -> tuple[int, dict[str, Any], str]:
    result = run_cli("provision", "--inventory", str(inventory), "--format", "json", *args, env=CLI_ENV, timeout=240)
    return result.returncode, json.loads(result.stdout) if result.stdout.strip() else {}, result.stderr


def test_a_new_host_provisions_then_reruns_with_no_change_and_check_mode_is_clean(
        default_route: SshHost, tmp_path: Path, redis_url: str) -> None:
    host = default_route
    slots = [host.slot_address(1), host.slot_address(2)]
    files = tmp_path / "files"
    (files / "cloud.cfg.d").mkdir(parents=True)
    inventory = write_inventory(tmp_path / "inventory.yml",
                                {"sender-t": host_vars(host, files, slots, sendhost_interface=None)},
                                redis_url=redis_url)

    rc, first, stderr = provision(inventory)
    assert rc == 0, stderr
    assert first["hosts"][0]["status"] == "changed"
    assert host.bound_addresses() == {host.address, *slots}
    assert (files / "cloud.cfg.d" / "60-sendhost-slots.cfg").exists()
    assert (files / "chrony" / "sendhost-amazon-time-sync.sources").exists()

    rc, second, stderr = provision(inventory)
    assert rc == 0, stderr
    assert [(h["status"], h["changed"]) for h in second["hosts"]] == [("ok", 0)]

    # a new host: nothing bound, no files, cloud-init present
    host.reset_addresses()
    fresh = tmp_path / "fresh"
    (fresh / "cloud.cfg.d").mkdir(parents=True)
    write_inventory(inventory, {"sender-t": host_vars(host, fresh, slots, sendhost_interface=None)},
                    redis_url=redis_url)
    rc, checked, stderr = provision(inventory, "--check")
    assert rc == 0, stderr + json.dumps(checked)
    assert [h["failed"] for h in checked["hosts"]] == [0]
    assert checked["hosts"][0]["changed"] > 0
    assert host.bound_addresses() == {host.address}
    assert [p for p in fresh.rglob("*") if p.is_file()] == []


def test_a_check_run_before_the_time_service_is_installed_previews_it(fresh_host: SshHost, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """On a new host the check run has not installed chrony: its service is reported as a change, not a failure
    (ignored or not). The service manager is named systemd here; no service is touched in check mode."""
    lines: list[str] = []
    variables = host_vars(fresh_host, tmp_path / "files", [], sender_base__service_mgr="systemd",
                          sender_base__time_service="sendhost-test-no-such-time-service")

    result = play(tmp_path, variables, monkeypatch, tags=["timesync"], check=True, lines=lines)

    assert not result.failed, result
    assert [line for line in lines if ": failed: " in line] == []
    assert "sender-t: skipped: Keep time synchronised" in lines
    assert "sender-t: changed: Preview the time service a real run would start" in lines
