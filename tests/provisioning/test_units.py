"""Pure pieces of provisioning: ssh-argument parsing, finding ansible-playbook, plans, stats, time-sync answers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from provisioning.errors import ProvisionConfigError, ProvisionFailed
from provisioning.plan import ProvisionPlan, SlotAddress, check_plan, resolve_plan, slot_extravars
from provisioning.runner import HostStats, ProvisionResult, _Collector, find_ansible_playbook, run_playbook
from provisioning.ssh import CommandResult
from provisioning.targets import known_hosts_from_ssh_args
from provisioning.verify import ntp_status


@pytest.mark.parametrize(("args", "expected"), [
    ("-o UserKnownHostsFile=/k/hosts -o StrictHostKeyChecking=yes", "/k/hosts"),
    ("-oUserKnownHostsFile=/k/a", "/k/a"),
    ("-o 'UserKnownHostsFile /k/b /k/c'", "/k/b"),
    ("-o userknownhostsfile=/k/d", "/k/d"),
    ("-o StrictHostKeyChecking=yes", None),
    ("", None),
])
def test_known_hosts_file_is_read_from_ssh_args(args: str, expected: str | None) -> None:
    found = known_hosts_from_ssh_args(args)
    assert (str(found) if found else None) == expected


def executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_ansible_playbook_is_found_beside_python_then_on_path(tmp_path: Path) -> None:
    beside = executable(tmp_path / "venv" / "ansible-playbook")
    on_path = executable(tmp_path / "usr" / "ansible-playbook")

    assert find_ansible_playbook({"PATH": str(on_path.parent)}, beside=beside.parent) == str(beside)
    assert find_ansible_playbook({"PATH": str(on_path.parent)}, beside=tmp_path / "empty") == str(on_path)


def test_missing_ansible_playbook_says_what_to_install(tmp_path: Path) -> None:
    with pytest.raises(ProvisionConfigError, match=r"ansible-playbook not found: install ansible-core"):
        find_ansible_playbook({"PATH": str(tmp_path)}, beside=tmp_path)


def test_named_ansible_playbook_must_be_executable(tmp_path: Path) -> None:
    plain = tmp_path / "ansible-playbook"
    plain.write_text("")
    os.chmod(plain, 0o644)
    with pytest.raises(ProvisionConfigError, match="is not an executable file"):
        find_ansible_playbook({"SENDHOST_ANSIBLE_PLAYBOOK": str(plain)}, beside=tmp_path)


def test_plan_takes_the_slots_and_elastic_ips_from_the_pool() -> None:
    pool = {"sender-1": [SlotAddress("10.0.1.21", "198.51.100.1"), SlotAddress("10.0.1.22", "198.51.100.2")]}

    plan = resolve_plan("sender-1", None, "10.0.1.0/24", pool.get)

    assert (plan.slot_addresses, plan.elastic_ips) == (("10.0.1.21", "10.0.1.22"), ("198.51.100.1", "198.51.100.2"))


def test_plan_refuses_a_host_without_a_pool_never_guessing() -> None:
    with pytest.raises(ProvisionConfigError, match=r"^sender-2: no IP pool for this host in Redis, and only its pool "
                                                   r"says which slot addresses to bind: run `sendhost pool create "
                                                   r"sender-2` first$"):
        resolve_plan("sender-2", "eth0", "10.0.1.0/24", {"sender-1": [SlotAddress("10.0.1.21")]}.get)
    with pytest.raises(ProvisionConfigError, match=r"^sender-1: its IP pool holds no slot addresses: run "):
        resolve_plan("sender-1", "eth0", "10.0.1.0/24", {"sender-1": []}.get)


def test_plan_refuses_a_slot_outside_the_subnet() -> None:
    with pytest.raises(ProvisionConfigError, match=r"sender-1: slot address 10\.0\.2\.5 of its IP pool is outside .* "
                                                   r"10\.0\.1\.0/24; fix sendhost_subnet, or recreate the pool"):
        check_plan(ProvisionPlan("sender-1", "eth0", "10.0.1.0/24", ("10.0.1.4", "10.0.2.5")))


def test_plan_prefix_and_extravars() -> None:
    plans = [ProvisionPlan("a", "eth0", "10.0.1.0/26", ("10.0.1.5",)), ProvisionPlan("b", "ens5", None, ())]

    assert [p.prefix for p in plans] == [26, 32]
    assert slot_extravars(plans) == {"sendhost_slot_addresses": {"a": ["10.0.1.5"], "b": []}}


@pytest.mark.parametrize(("stats", "status"), [
    (HostStats("h", ok=5), "ok"),
    (HostStats("h", ok=5, changed=2), "changed"),
    (HostStats("h", ok=5, changed=2, failed=1), "failed"),
    (HostStats("h", unreachable=1), "unreachable"),
])
def test_host_status_ranks_unreachable_over_failed_over_changed(stats: HostStats, status: str) -> None:
    assert stats.status == status
    assert ProvisionResult(hosts=(stats,), rc=0).failed == (status in ("failed", "unreachable"))


def test_collector_keeps_the_first_failure_and_reports_progress() -> None:
    lines: list[str] = []
    collector = _Collector(lines.append)
    events = [
        {"event": "runner_on_ok", "event_data": {"host": "h", "task": "Bind", "res": {"changed": True}}},
        {"event": "runner_on_failed", "event_data": {"host": "h", "task": "Write", "res": {"msg": "bad\nmore"}}},
        {"event": "runner_on_failed", "event_data": {"host": "h", "task": "Later", "res": {"msg": "second"}}},
        {"event": "playbook_on_stats", "event_data": {}},
    ]
    for event in events:
        assert collector(event) is True

    assert lines == ["h: changed: Bind", "h: failed: Write", "h: failed: Later"]
    assert collector.messages == {"h": "Write: bad"}


class FakeSession:
    """FAKE SSH session: answers commands from a table, standing in for hosts running each time-sync tool."""

    def __init__(self, answers: dict[str, CommandResult]) -> None:
        self.answers = answers

    def run(self, command: str, timeout: float = 20.0) -> CommandResult:
        return self.answers.get(command.split()[0], CommandResult(127, "", f"{command.split()[0]}: not found"))


@pytest.mark.parametrize(("answers", "status", "source"), [
    ({"timedatectl": CommandResult(0, "yes\n", "")}, "synchronised", "timedatectl"),
    ({"timedatectl": CommandResult(0, "no\n", "")}, "not synchronised", "timedatectl"),
    ({"timedatectl": CommandResult(1, "", "System has not been booted with systemd"),
      "chronyc": CommandResult(0, "Reference ID    : 0A\nLeap status     : Normal\n", "")}, "synchronised", "chronyc"),
    ({"chronyc": CommandResult(0, "Leap status     : Not synchronised\n", "")}, "not synchronised", "chronyc"),
    ({"ntpstat": CommandResult(0, "synchronised to NTP server\n", "")}, "synchronised", "ntpstat"),
    ({"ntpstat": CommandResult(1, "unsynchronised\n", "")}, "not synchronised", "ntpstat"),
    ({"ntpstat": CommandResult(2, "", "cannot contact ntpd")}, "unknown", None),
    ({}, "unknown", None),
])
def test_time_sync_is_read_from_whichever_tool_exists(answers: dict[str, CommandResult], status: str,
                                                      source: str | None) -> None:
    ntp = ntp_status(FakeSession(answers))

    assert (ntp.status, ntp.source) == (status, source)
    assert ntp.ok == (status != "not synchronised")


def test_a_playbook_that_cannot_run_raises_with_ansibles_reason(tmp_path: Path) -> None:
    playbook = tmp_path / "site.yml"
    playbook.write_text("- hosts: senders\n  tasks:\n    - no.such.module: {}\n")
    inventory = tmp_path / "inventory.yml"
    inventory.write_text("all:\n  children:\n    senders:\n      hosts:\n        sender-1:\n")

    with pytest.raises(ProvisionFailed, match=r"ansible-playbook exited \d+ before any host ran: .*no\.such\.module"):
        run_playbook(inventory, playbook=playbook, binary=find_ansible_playbook({"PATH": ""}))
