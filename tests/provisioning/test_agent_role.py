"""The sender_agent role end to end against sshd in a network namespace: sendhost installed in a venv from the wheel
`sendhost provision` builds (or from an index), the agent's environment file in full, and the systemd unit
rendered and checked with `systemd-analyze verify`.

The namespace shares this machine's filesystem but has no network: every file the role writes goes under the test's
`files` directory, and the venv takes its dependencies from the system Python (see the role's defaults).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from provisioning.agent_package import build_wheel, checkout_root, controller_version
from provisioning.runner import find_ansible_playbook, run_playbook
from tests.conftest import run_cli
from tests.provisioning.conftest import CLI_ENV, UNUSED_REDIS_URL, host_vars, write_inventory
from tests.support.net import on_ci
from tests.support.sshhost import SshHost
from toolkit.inventory import load_inventory

pytestmark = pytest.mark.slow

SYSTEMD_ANALYZE = shutil.which("systemd-analyze") or "/usr/bin/systemd-analyze"
DATABASE_URL = "postgresql://sender:ledger-pw@db.internal:5432/sendhost"
# An unprivileged system user and group every Debian system has (systemd-analyze warns about `nobody`): the unit's
# User=/Group= must be the role's, not root.
AGENT_USER, AGENT_GROUP = "daemon", "daemon"


@pytest.fixture(scope="module")
def systemd_analyze() -> str:
    if not Path(SYSTEMD_ANALYZE).exists() and not on_ci():
        pytest.skip("the unit is checked with systemd-analyze: apt-get install systemd")
    return SYSTEMD_ANALYZE


def provision(inventory: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, dict[str, Any], str]:
    result = run_cli("provision", "--inventory", str(inventory), "--format", "json", "--tags", "sender_agent", *args,
                     env={**CLI_ENV, **(env or {})}, timeout=240)
    return result.returncode, json.loads(result.stdout) if result.stdout.strip() else {}, result.stderr


def agent_vars(host: SshHost, files: Path, **overrides: Any) -> dict[str, Any]:
    """Host vars that write and verify the unit (under `files`) but never touch this machine's systemd."""
    settings: dict[str, Any] = {
        "sendhost_database_url": DATABASE_URL, "sender_agent__unit_install": True,
        "sender_agent__service_manage": False, "sender_agent__user": AGENT_USER, "sender_agent__group": AGENT_GROUP,
    }
    return host_vars(host, files, [], **{**settings, **overrides})


def venv_python(files: Path) -> Path:
    return files / "opt-sendhost" / "venv" / "bin" / "python"


def run_in_venv(files: Path, code: str) -> str:
    """Run `code` with the host's venv Python, its dependencies taken from this test's environment (the namespace
    venv holds sendhost alone: it was installed with --no-deps)."""
    done = subprocess.run([str(venv_python(files)), "-c", code], capture_output=True, text=True, check=True,
                          env={"PYTHONPATH": sysconfig.get_paths()["purelib"]}, cwd=files, timeout=60)
    return done.stdout.strip()


def expected_unit(files: Path, venv: Path) -> str:
    return (
        "# Ansible managed (role sender_agent)\n"
        "[Unit]\n"
        "Description=sendhost sender agent (sender-t)\n"
        "Wants=network-online.target time-sync.target\n"
        "After=network-online.target time-sync.target\n"
        "\n"
        "[Service]\n"
        f"User={AGENT_USER}\n"
        f"Group={AGENT_GROUP}\n"
        f"EnvironmentFile={files}/sendhost/agent.env\n"
        f"ExecStart={venv}/bin/sendhost-sender --host sender-t\n"
        "Restart=on-failure\n"
        "RestartSec=5\n"
        "StandardError=journal\n"
        "SyslogIdentifier=sendhost-sender\n"
        "NoNewPrivileges=true\n"
        "PrivateTmp=true\n"
        "\n"
        "[Install]\n"
        "WantedBy=multi-user.target\n"
    )


def test_agent_is_installed_from_the_built_wheel_and_a_second_run_changes_nothing(
        fresh_host: SshHost, tmp_path: Path, systemd_analyze: str) -> None:
    files = tmp_path / "files"
    inventory = write_inventory(tmp_path / "inventory.yml", {"sender-t": agent_vars(
        fresh_host, files, sendhost_unsubscribe_base_url="https://unsub.example.com")})

    rc, first, stderr = provision(inventory)

    assert rc == 0, stderr + json.dumps(first)
    assert [(h["status"], h["failed"]) for h in first["hosts"]] == [("changed", 0)]
    venv = files / "opt-sendhost" / "venv"
    [wheel] = (files / "opt-sendhost" / "wheels").glob("sendhost-*.whl")
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert (venv / ".sendhost-source").read_text() == f"wheel {wheel.name} sha256:{digest}\n"
    # the venv runs its own copy of sendhost, not this checkout
    module = run_in_venv(files, "import toolkit.cli; print(toolkit.cli.__file__)")
    assert module.startswith(str(venv / "lib")), module
    assert (venv / "bin" / "sendhost-sender").stat().st_mode & 0o111  # the unit's ExecStart

    env_file = files / "sendhost" / "agent.env"
    assert env_file.read_text() == (
        "# Ansible managed (role sender_agent): read by the sender service\n"
        f"SENDHOST_DATABASE_URL={DATABASE_URL}\n"
        "SENDHOST_HOST=sender-t\n"
        "SENDHOST_INSTANCE_ID=i-0123456789abcdef0\n"
        f"SENDHOST_INVENTORY={files}/sendhost/inventory.yml\n"
        f"SENDHOST_PRIMARY_IP={fresh_host.address}\n"
        f"SENDHOST_REDIS_URL={UNUSED_REDIS_URL}\n"
        "SENDHOST_REGION=us-east-1\n"
        "SENDHOST_UNSUBSCRIBE_BASE_URL=https://unsub.example.com\n"
    )
    assert oct(env_file.stat().st_mode & 0o777) == "0o600"
    assert (env_file.stat().st_uid, env_file.stat().st_gid) == (0, 0)

    # the agent's own inventory is one sendhost reads: this host, and no URL (those are in the 0600 env file)
    agent_inventory = load_inventory(files / "sendhost" / "inventory.yml")
    assert [(h.name, h.primary_ip, h.instance_id) for h in agent_inventory.hosts] == [
        ("sender-t", fresh_host.address, "i-0123456789abcdef0")]
    assert agent_inventory.redis_url is None

    unit = files / "systemd" / "sendhost-sender.service"
    assert unit.read_text() == expected_unit(files, venv)
    verified = subprocess.run([systemd_analyze, "verify", str(unit)], capture_output=True, text=True, timeout=60)
    assert (verified.returncode, verified.stdout + verified.stderr) == (0, "")

    rc, second, stderr = provision(inventory)
    assert rc == 0, stderr
    assert [(h["status"], h["changed"]) for h in second["hosts"]] == [("ok", 0)]


def test_a_changed_wheel_of_the_same_version_is_reinstalled(fresh_host: SshHost, tmp_path: Path,
                                                           agent_wheel: Path, systemd_analyze: str) -> None:
    files = tmp_path / "files"
    inventory = write_inventory(tmp_path / "inventory.yml", {"sender-t": agent_vars(fresh_host, files)})
    rc, _, stderr = provision(inventory, env={"SENDHOST_AGENT_WHEEL": str(agent_wheel)})
    assert rc == 0, stderr
    # the same version built from a changed tree: a checkout after a commit
    source = checkout_root()
    assert source is not None
    changed_tree = tmp_path / "changed"
    shutil.copytree(source, changed_tree,
                    ignore=shutil.ignore_patterns(".git", ".venv", "tests", "__pycache__", ".*cache"))
    (changed_tree / "provisioning" / "agent_build_marker.py").write_text('MARK = "second build"\n')
    changed_wheel = build_wheel(changed_tree, tmp_path / "wheel")
    assert changed_wheel.name == agent_wheel.name

    rc, data, stderr = provision(inventory, env={"SENDHOST_AGENT_WHEEL": str(changed_wheel)})

    assert rc == 0, stderr
    assert data["hosts"][0]["status"] == "changed"
    assert run_in_venv(files, "import provisioning.agent_build_marker as m; print(m.MARK)") == "second build"


def test_first_check_run_on_a_fresh_systemd_host_changes_nothing_and_does_not_fail(
        fresh_host: SshHost, tmp_path: Path, systemd_analyze: str) -> None:
    files = tmp_path / "files"
    # as on a real host: systemd manages services, so the role would enable the unit, which does not exist yet;
    # check mode changes nothing, so this machine's systemd is never asked to do anything
    inventory = write_inventory(tmp_path / "inventory.yml", {"sender-t": agent_vars(
        fresh_host, files, sender_agent__service_mgr="systemd", sender_agent__service_manage=True,
        sender_agent__service_enabled=True, sender_agent__user="sendhost-test-no-such-user",
        sender_agent__group="sendhost-test-no-such-group")})

    rc, data, stderr = provision(inventory, "--check")

    assert rc == 0, stderr + json.dumps(data)
    [host] = data["hosts"]
    assert (host["failed"], host["unreachable"]) == (0, 0), host["message"]
    assert host["changed"] > 0  # it previews the venv, the wheel, the env file and the unit
    assert not files.exists() or not [p for p in files.rglob("*") if p.is_file()]


@pytest.mark.parametrize(("setting", "named"), [
    ({"sendhost_redis_url": ""}, "sendhost_redis_url is empty"),
    ({"sendhost_database_url": ""}, "sendhost_database_url is empty"),
])
def test_an_empty_redis_or_database_url_is_refused_and_nothing_is_written(
        fresh_host: SshHost, tmp_path: Path, setting: dict[str, str], named: str) -> None:
    files = tmp_path / "files"
    inventory = write_inventory(tmp_path / "inventory.yml", {"sender-t": agent_vars(fresh_host, files, **setting)})

    rc, data, _ = provision(inventory)

    assert rc == 1
    assert data["hosts"][0]["status"] == "failed"
    assert named in (data["hosts"][0]["message"] or "")
    assert not files.exists()


@pytest.fixture
def package_index(fresh_host: SshHost, tmp_path: Path, agent_wheel: Path) -> Iterator[str]:
    """A PEP 503 simple index serving the wheel over HTTP on the namespace's own loopback (pip trusts loopback)."""
    project = tmp_path / "index" / "simple" / "sendhost"
    project.mkdir(parents=True)
    shutil.copy(agent_wheel, project / agent_wheel.name)
    (project / "index.html").write_text(f'<a href="{agent_wheel.name}">{agent_wheel.name}</a>\n')
    server = subprocess.Popen(
        ["ip", "netns", "exec", fresh_host.netns, sys.executable, "-m", "http.server", "8765",
         "--bind", "127.0.0.1", "--directory", str(tmp_path / "index")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            probe = subprocess.run(["ip", "netns", "exec", fresh_host.netns, sys.executable, "-c",
                                    "import socket; socket.create_connection(('127.0.0.1', 8765), 1)"],
                                   capture_output=True, check=False)
            if probe.returncode == 0:
                break
        yield "http://127.0.0.1:8765/simple"
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_an_inventory_index_url_installs_the_same_version_from_that_index(
        fresh_host: SshHost, tmp_path: Path, package_index: str, systemd_analyze: str) -> None:
    files = tmp_path / "files"
    inventory = write_inventory(tmp_path / "inventory.yml", {"sender-t": agent_vars(fresh_host, files)})
    text = inventory.read_text()
    inventory.write_text(text.replace("all:\n", f"all:\n  vars:\n    sendhost_package_index_url: {package_index}\n", 1))

    rc, data, stderr = provision(inventory)

    assert rc == 0, stderr + json.dumps(data)
    venv = files / "opt-sendhost" / "venv"
    version = controller_version()
    assert (venv / ".sendhost-source").read_text() == f"index {package_index} sendhost=={version}\n"
    assert not (files / "opt-sendhost" / "wheels").exists()  # nothing copied
    assert run_in_venv(files, "import importlib.metadata as m; print(m.version('sendhost'))") == version

    rc, data, stderr = provision(inventory)
    assert rc == 0, stderr
    assert [(h["status"], h["changed"]) for h in data["hosts"]] == [("ok", 0)]


def test_the_agent_inventory_names_host_copies_of_every_secret(fresh_host: SshHost, tmp_path: Path, agent_wheel: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    files = tmp_path / "files"
    password_file = tmp_path / "secrets" / "alice.pw"
    password_file.parent.mkdir()
    password_file.write_text("alice-pw\n")
    (tmp_path / "secrets" / "alice-imap.pw").write_text("alice-imap-pw\n")
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "unsub.key").write_text("unsubscribe-signing-key\n")
    (tmp_path / "keys" / "sa.json").write_text('{"type": "service_account"}\n')
    smtp = {"host": "smtp.gmail.com", "port": 587, "security": "starttls"}
    mailboxes = [
        {"address": "alice@example.com", "domain": "example.com", "start": "2026-11-02",
         "smtp": {**smtp, "username": "alice@example.com", "password_file": str(password_file)},
         "imap": {"host": "imap.gmail.com", "username": "alice@example.com", "password_file": "secrets/alice-imap.pw"}},
        {"address": "bob@example.com", "domain": "example.com", "start": "2026-11-02", "group": "b",
         "smtp": {**smtp, "username": "bob@example.com", "password_env": "SENDHOST_SECRET_TEST_BOB"},
         "imap": {"host": "imap.gmail.com", "username": "bob@example.com",
                  "password_env": "SENDHOST_SECRET_TEST_BOB_IMAP"}},
        {"address": "carol@example.com", "domain": "example.com", "start": "2026-11-02", "auth": "xoauth2",
         "token_file": "/var/lib/sendhost-tokens/carol", "smtp": {**smtp, "username": "carol@example.com"}},
    ]
    inventory = write_inventory(tmp_path / "inventory.yml", {"sender-t": agent_vars(fresh_host, files)})
    data = yaml.safe_load(inventory.read_text())
    data["all"]["vars"] = {  # the sender's inventory keys; the playbook runs without sendhost's own schema check
        "sendhost_domains": [{"name": "example.com", "dkim_selectors": ["s1"]}],
        "sendhost_mailboxes": mailboxes,
        "sendhost_unsubscribe_base_url": "https://u.example.com",
        "sendhost_unsubscribe_key_file": "keys/unsub.key",  # relative: read beside the inventory
        "sendhost_postmaster": {"service_account_key_file": "keys/sa.json", "days": 7},
    }
    inventory.write_text(yaml.safe_dump(data, sort_keys=False))
    for name, value in {**CLI_ENV, "SENDHOST_SECRET_TEST_BOB": "bob-s3cret",
                        "SENDHOST_SECRET_TEST_BOB_IMAP": "bob-imap-s3cret"}.items():
        monkeypatch.setenv(name, value)
    lines: list[str] = []

    def run() -> Any:
        return run_playbook(inventory, binary=find_ansible_playbook({"PATH": ""}), tags=["sender_agent"],
                            extravars={"sendhost_agent_wheel": str(agent_wheel)}, progress=lines.append)

    first = run()

    assert not first.failed, first
    secrets = files / "sendhost" / "secrets"
    daemon_uid = int(subprocess.run(["id", "-u", AGENT_USER], capture_output=True, text=True, check=True).stdout)
    assert (secrets.stat().st_uid, oct(secrets.stat().st_mode & 0o777)) == (daemon_uid, "0o700")
    copies = {path.name: (path.read_text(), oct(path.stat().st_mode & 0o777), path.stat().st_uid)
              for path in secrets.iterdir()}
    assert copies == {"alice@example.com.password": ("alice-pw\n", "0o600", daemon_uid),
                      "alice@example.com.imap.password": ("alice-imap-pw\n", "0o600", daemon_uid),
                      "unsubscribe.key": ("unsubscribe-signing-key\n", "0o600", daemon_uid),
                      "postmaster-sa.json": ('{"type": "service_account"}\n', "0o600", daemon_uid)}
    written = yaml.safe_load((files / "sendhost" / "inventory.yml").read_text())
    alice, bob, carol = mailboxes
    assert written == {"all": {
        "vars": {
            "sendhost_domains": [{"name": "example.com", "dkim_selectors": ["s1"]}],
            "sendhost_mailboxes": [
                {**alice, "smtp": {**alice["smtp"], "password_file": f"{secrets}/alice@example.com.password"},
                 "imap": {**alice["imap"], "password_file": f"{secrets}/alice@example.com.imap.password"}},
                bob,
                carol,  # a token file is the host's own: whatever refreshes it runs there
            ],
            "sendhost_unsubscribe_base_url": "https://u.example.com",
            "sendhost_unsubscribe_key_file": f"{secrets}/unsubscribe.key",
            "sendhost_postmaster": {"service_account_key_file": f"{secrets}/postmaster-sa.json", "days": 7},
        },
        "children": {"senders": {"hosts": {"sender-t": {
            "sendhost_instance_id": "i-0123456789abcdef0", "sendhost_region": "us-east-1",
            "sendhost_primary_ip": fresh_host.address, "sendhost_pool": {"slots": 1},
            "sendhost_subnet": fresh_host.subnet, "sendhost_interface": fresh_host.interface,
        }}}},
    }}
    # and sendhost itself reads it so: the agent's mailboxes use the host copies
    agent_inventory = load_inventory(files / "sendhost" / "inventory.yml")
    assert [(m.address, m.smtp and m.smtp.credential.password_file) for m in agent_inventory.mailboxes] == [
        ("alice@example.com", f"{secrets}/alice@example.com.password"), ("bob@example.com", None),
        ("carol@example.com", None)]
    env_lines = (files / "sendhost" / "agent.env").read_text().splitlines()
    # each password_env reaches the agent's environment, before the agent's own settings (the later line wins)
    secret_lines = ["SENDHOST_SECRET_TEST_BOB=bob-s3cret", "SENDHOST_SECRET_TEST_BOB_IMAP=bob-imap-s3cret"]
    assert [line for line in env_lines if line.startswith("SENDHOST_SECRET_")] == secret_lines
    assert env_lines.index(secret_lines[-1]) < env_lines.index(next(
        line for line in env_lines if line.startswith("SENDHOST_REDIS_URL=")))
    assert not [line for line in lines if "s3cret" in line or "alice-" in line or "signing-key" in line]

    lines.clear()
    second = run()
    assert not second.failed, second
    assert [(h.host, h.changed) for h in second.hosts] == [("sender-t", 0)], lines


def test_a_password_variable_missing_where_provision_runs_is_refused(fresh_host: SshHost, tmp_path: Path,
                                                                    agent_wheel: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    files = tmp_path / "files"
    inventory = write_inventory(tmp_path / "inventory.yml", {"sender-t": agent_vars(fresh_host, files)})
    data = yaml.safe_load(inventory.read_text())
    data["all"]["vars"] = {"sendhost_mailboxes": [{
        "address": "bob@example.com", "domain": "example.com", "start": "2026-11-02",
        "smtp": {"host": "smtp.gmail.com", "username": "bob@example.com",
                 "password_env": "SENDHOST_SECRET_TEST_UNSET"}}]}
    inventory.write_text(yaml.safe_dump(data, sort_keys=False))
    for name, value in CLI_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("SENDHOST_SECRET_TEST_UNSET", raising=False)

    result = run_playbook(inventory, binary=find_ansible_playbook({"PATH": ""}), tags=["sender_agent"],
                          extravars={"sendhost_agent_wheel": str(agent_wheel)})

    assert result.failed
    assert ("a mailbox password_env is not set where sendhost provision runs, for "
            "bob@example.com (smtp: SENDHOST_SECRET_TEST_UNSET)" in (result.hosts[0].message or ""))
    assert not files.exists()
