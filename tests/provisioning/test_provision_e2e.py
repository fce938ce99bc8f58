"""`sendhost provision` end to end: the playbook runs over SSH against sshd in a network namespace."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from ippool.sender_acl import sender_password
from provisioning.runner import find_ansible_playbook, run_playbook
from tests.conftest import REPO_ROOT, run_cli
from tests.provisioning.conftest import CLI_ENV, host_vars, write_inventory
from tests.support.redis_server import RedisServer
from tests.support.sshhost import SshHost

pytestmark = pytest.mark.slow


def provision(inventory: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, dict, str]:
    result = run_cli("provision", "--inventory", str(inventory), "--format", "json", *args,
                     env={**CLI_ENV, **(env or {})}, timeout=240)
    data = json.loads(result.stdout) if result.stdout.strip() else {}
    return result.returncode, data, result.stderr


def sender_credentials(server: RedisServer, state_dir: Path, host: str = "sender-t") -> tuple[str, str]:
    """The URL provision gives `host`'s agent (its own ACL user, the password derived from the state dir's key,
    the admin URL's server and database), and that password."""
    password = sender_password((state_dir / "sender-acl.key").read_bytes(), host)
    return f"redis://sender-{host}:{password}@{server.url.removeprefix('redis://')}", password


def test_provision_binds_slots_and_second_run_changes_nothing(fresh_host: SshHost, tmp_path: Path,
                                                              redis7: RedisServer) -> None:
    files = tmp_path / "files"
    state = {"SENDHOST_STATE_DIR": str(tmp_path / "state")}
    slots = [fresh_host.slot_address(1), fresh_host.slot_address(2)]
    # A real Redis with an admin ACL user: provision reads the host's slots from its pool there and creates the
    # host's sender user; the host gets that user's URL, never the admin's, and no password reaches the output.
    client = redis7.client()
    client.flushall()
    client.acl_setuser("admin", enabled=True, passwords=["+s3cret"], keys=["*"], commands=["+@all"])
    client.close()
    redis_url = redis7.url.replace("redis://", "redis://admin:s3cret@")
    inventory = write_inventory(tmp_path / "inventory.yml", {"sender-t": host_vars(fresh_host, files, slots)},
                                redis_url=redis_url)

    rc, first, stderr = provision(inventory, env=state)
    assert rc == 0, stderr
    assert stderr == ""  # progress goes to a terminal only, never into a pipe
    [host] = first["hosts"]
    assert (host["host"], host["status"], host["failed"], host["unreachable"]) == ("sender-t", "changed", 0, 0)
    assert host["changed"] > 0
    assert fresh_host.bound_addresses() == {fresh_host.address, *slots}
    persistent = (files / "networkd" / "60-sendhost-slots.conf").read_text()  # no netplan or ifupdown here
    assert all(f"Address={slot}/24" in persistent for slot in slots)
    env_file = files / "sendhost" / "agent.env"
    assert "SENDHOST_HOST=sender-t\n" in env_file.read_text()
    sender, password = sender_credentials(redis7, tmp_path / "state")
    assert f"SENDHOST_REDIS_URL={sender}\n" in env_file.read_text()
    assert "s3cret" not in env_file.read_text()
    assert oct(env_file.stat().st_mode & 0o777) == "0o600"
    assert oct((tmp_path / "state" / "sender-acl.key").stat().st_mode & 0o777) == "0o600"
    assert password not in json.dumps(first) + stderr
    agent = redis.Redis.from_url(sender)  # the user exists with that password, and is not an admin
    try:
        assert agent.ping()
        with pytest.raises(redis.exceptions.NoPermissionError):
            agent.flushall()
    finally:
        agent.close()

    rc, second, stderr = provision(inventory, env=state)
    assert rc == 0, stderr
    assert [(h["status"], h["changed"]) for h in second["hosts"]] == [("ok", 0)]
    assert fresh_host.bound_addresses() == {fresh_host.address, *slots}


def test_check_mode_changes_nothing(fresh_host: SshHost, tmp_path: Path, redis_url: str) -> None:
    files = tmp_path / "files"
    inventory = write_inventory(tmp_path / "inventory.yml", {
        "sender-t": host_vars(fresh_host, files, [fresh_host.slot_address(1), fresh_host.slot_address(2)])},
        redis_url=redis_url)

    rc, data, stderr = provision(inventory, "--check")

    assert rc == 0, stderr
    assert data["check"] is True
    assert [h["failed"] for h in data["hosts"]] == [0]
    assert data["hosts"][0]["changed"] > 0  # it reports what a real run would change
    assert fresh_host.bound_addresses() == {fresh_host.address}
    assert not files.exists() or not [p for p in files.rglob("*") if p.is_file()]


def test_removing_a_slot_unbinds_only_its_address(fresh_host: SshHost, tmp_path: Path, redis_url: str) -> None:
    files = tmp_path / "files"
    one, two = fresh_host.slot_address(1), fresh_host.slot_address(2)
    # an address somebody else bound (no sendhost label) must survive: the role removes only what it added
    foreign = fresh_host.slot_address(9)
    fresh_host.ip("addr", "add", f"{foreign}/24", "dev", fresh_host.interface)
    inventory = tmp_path / "inventory.yml"
    write_inventory(inventory, {"sender-t": host_vars(fresh_host, files, [one, two])}, redis_url=redis_url)
    rc, _, stderr = provision(inventory)
    assert rc == 0, stderr

    write_inventory(inventory, {"sender-t": host_vars(fresh_host, files, [one])}, redis_url=redis_url)
    rc, data, stderr = provision(inventory)

    assert rc == 0, stderr
    assert data["hosts"][0]["status"] == "changed"
    assert fresh_host.bound_addresses() == {fresh_host.address, one, foreign}
    persistent = (files / "networkd" / "60-sendhost-slots.conf").read_text()
    assert f"Address={one}/24" in persistent
    assert two not in persistent


def test_unreachable_host_is_reported_and_exits_1(sender_host: SshHost, tmp_path: Path, redis_url: str) -> None:
    inventory = write_inventory(tmp_path / "inventory.yml", {
        "sender-t": host_vars(sender_host, tmp_path / "files", [sender_host.slot_address(1)], ansible_port=2299)},
        redis_url=redis_url)

    result = run_cli("provision", "--inventory", str(inventory), env=CLI_ENV, timeout=120)

    assert result.returncode == 1, result.stderr
    assert "sender-t" in result.stdout and "unreachable" in result.stdout
    assert "error: provisioning failed on sender-t (unreachable)" in result.stderr


def test_ansible_refuses_a_host_whose_key_is_not_known(sender_host: SshHost, tmp_path: Path, redis_url: str) -> None:
    empty_known_hosts = tmp_path / "known_hosts"
    empty_known_hosts.write_text("")
    args = f"-o UserKnownHostsFile={empty_known_hosts} -o StrictHostKeyChecking=yes"
    inventory = write_inventory(tmp_path / "inventory.yml", {
        "sender-t": host_vars(sender_host, tmp_path / "files", [sender_host.slot_address(1)],
                              ansible_ssh_common_args=args)}, redis_url=redis_url)

    # no shared SSH master: an earlier test's authenticated connection would skip the host key check
    result = run_cli("provision", "--inventory", str(inventory), "--format", "json",
                     env={"ANSIBLE_SSH_ARGS": "-o ControlMaster=no"}, timeout=120)
    data = json.loads(result.stdout)

    assert result.returncode == 1
    assert data["hosts"][0]["status"] == "unreachable"
    assert "No ED25519 host key is known" in (data["hosts"][0]["message"] or "")
    assert empty_known_hosts.read_text() == ""  # never auto-added


def test_service_unit_is_skipped_visibly_without_systemd(fresh_host: SshHost, tmp_path: Path, agent_wheel: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    files = tmp_path / "files"
    inventory = write_inventory(tmp_path / "inventory.yml", {"sender-t": host_vars(fresh_host, files, [])})
    lines: list[str] = []
    for name, value in CLI_ENV.items():
        monkeypatch.setenv(name, value)

    result = run_playbook(inventory, binary=find_ansible_playbook({"PATH": ""}), tags=["sender_agent"],
                          extravars={"sendhost_agent_wheel": str(agent_wheel)}, progress=lines.append)

    assert not result.failed, result
    # the namespace host runs no systemd: the unit is not installed and the run says so
    assert "sender-t: ok: Report the service unit skipped (no systemd)" in lines
    assert "sender-t: skipped: Install the sender service unit" in lines
    assert not (files / "systemd").exists()


def test_progress_is_shown_per_task_on_a_terminal_without_secrets(fresh_host: SshHost, tmp_path: Path,
                                                                  redis7: RedisServer) -> None:
    inventory = write_inventory(tmp_path / "inventory.yml", {"sender-t": host_vars(fresh_host, tmp_path / "f", [])})
    controller, terminal = pty.openpty()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SENDHOST_")}
    # a Redis URL from the environment beats the inventory's and reaches the host as an extra var
    client = redis7.client()
    client.acl_setuser("agent", enabled=True, passwords=["+pa55word"], keys=["*"], commands=["+@all"])
    client.close()
    redis_url = redis7.url.replace("redis://", "redis://agent:pa55word@")
    env.update(CLI_ENV, PYTHONPATH=str(REPO_ROOT), SENDHOST_REDIS_URL=redis_url,
               SENDHOST_STATE_DIR=str(tmp_path / "state"))
    try:
        try:
            process = subprocess.run(
                [sys.executable, "-m", "toolkit", "provision", "--inventory", str(inventory), "--tags", "sender_agent"],
                stdout=subprocess.PIPE, stderr=terminal, env=env, cwd=REPO_ROOT, timeout=240, check=False, text=True)
        finally:
            os.close(terminal)
        shown = b""
        with contextlib.suppress(OSError):  # EIO once the terminal's writer is gone
            while chunk := os.read(controller, 65536):
                shown += chunk
    finally:
        os.close(controller)

    assert process.returncode == 0, shown
    lines = shown.decode().replace("\r\n", "\n").splitlines()
    assert "sender-t: ok: Write the sender environment file" in lines or \
        "sender-t: changed: Write the sender environment file" in lines
    assert "sender-t: ok: Report the service unit skipped (no systemd)" in lines
    assert "sender-t" in process.stdout  # the table still goes to stdout
    sender, password = sender_credentials(redis7, tmp_path / "state")
    assert "pa55word" not in shown.decode() + process.stdout
    assert password not in shown.decode() + process.stdout
    env_file = tmp_path / "f" / "sendhost" / "agent.env"
    assert f"SENDHOST_REDIS_URL={sender}\n" in env_file.read_text()


def test_check_mode_before_the_service_group_exists_does_not_fail(fresh_host: SshHost, tmp_path: Path) -> None:
    files = tmp_path / "files"
    # sender_base would create this group in a real run; check mode must preview the agent files without it
    inventory = write_inventory(tmp_path / "inventory.yml", {"sender-t": host_vars(
        fresh_host, files, [], sender_agent__group="sendhost-test-no-such-group")})

    rc, data, stderr = provision(inventory, "--check", "--tags", "sender_agent")

    assert rc == 0, stderr + json.dumps(data)
    assert data["hosts"][0]["changed"] > 0
    assert not files.exists()


def test_a_real_run_with_a_missing_service_group_fails_naming_it(fresh_host: SshHost, tmp_path: Path) -> None:
    inventory = write_inventory(tmp_path / "inventory.yml", {"sender-t": host_vars(
        fresh_host, tmp_path / "files", [], sender_agent__group="sendhost-test-no-such-group")})

    rc, data, _ = provision(inventory, "--tags", "sender_agent")

    assert rc == 1
    assert data["hosts"][0]["status"] == "failed"
    assert "sendhost-test-no-such-group" in (data["hosts"][0]["message"] or "")


def test_check_mode_reports_a_missing_address_without_binding_it(fresh_host: SshHost, tmp_path: Path,
                                                                redis_url: str) -> None:
    one, two = fresh_host.slot_address(1), fresh_host.slot_address(2)
    inventory = write_inventory(tmp_path / "inventory.yml",
                                {"sender-t": host_vars(fresh_host, tmp_path / "f", [one, two])}, redis_url=redis_url)
    rc, _, stderr = provision(inventory, "--tags", "sender_addresses")
    assert rc == 0, stderr
    fresh_host.ip("addr", "del", f"{two}/24", "dev", fresh_host.interface)  # the files still list it

    rc, data, stderr = provision(inventory, "--check", "--tags", "sender_addresses")

    assert rc == 0, stderr
    assert data["hosts"][0]["changed"] == 1  # only the binding would change
    assert fresh_host.bound_addresses() == {fresh_host.address, one}
