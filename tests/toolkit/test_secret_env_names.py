"""Environment names are ours to choose: a mailbox's `password_env` must match ^SENDHOST_SECRET_[A-Z0-9_]+$, so an
inventory can never name a variable the agent, Python or the dynamic loader reads, and the sender_agent role writes
the agent's own settings after the secrets (the later assignment wins in systemd) and each name once."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sendhost.model import SECRET_ENV_PATTERN, SECRET_ENV_PREFIX
from tests.conftest import REPO_ROOT, run_cli

ROLE = REPO_ROOT / "playbooks" / "roles" / "sender_agent"
REFUSED = ["SENDHOST_REDIS_URL", "SENDHOST_DATABASE_URL", "SENDHOST_INVENTORY", "REDIS_URL", "LD_PRELOAD",
           "LD_LIBRARY_PATH", "PATH", "HTTPS_PROXY", "https_proxy", "PYTHONPATH", "PYTHONSTARTUP", "SSL_CERT_FILE",
           "AWS_ENDPOINT_URL", "ANA_PASSWORD", "SENDHOST_SECRET_", "SENDHOST_SECRETX", "sendhost_secret_ana",
           "SENDHOST_SECRET_ANA-1", "SENDHOST_SECRET_ANA PW"]
MAILBOX = """      - address: ana@example.com
        domain: example.com
        start: "2026-11-02"
        smtp:
          host: smtp.example.com
          username: ana@example.com
          {smtp}
        imap:
          host: imap.example.com
          {imap}
"""


def _inventory(tmp_path: Path, smtp_env: str, imap_env: str = "SENDHOST_SECRET_ANA_IMAP") -> tuple[Path, int]:
    """The example inventory with one mailbox naming these variables; (its path, the smtp password_env's line)."""
    text = (REPO_ROOT / "inventory.example.yml").read_text()
    head, marker, tail = text.partition("    sendhost_mailboxes:\n")
    assert marker, "the example inventory lists sendhost_mailboxes"
    entry = MAILBOX.format(smtp=f"password_env: {json.dumps(smtp_env)}", imap=f"password_env: {json.dumps(imap_env)}")
    path = tmp_path / "inventory.yml"
    path.write_text(head + marker + entry + tail)
    line = (head + marker + entry).count("\n") - 3  # the smtp password_env line, three lines above the entry's end
    assert json.dumps(smtp_env) in path.read_text().splitlines()[line - 1]
    return path, line


@pytest.mark.parametrize("name", REFUSED)
def test_inventory_check_refuses_a_variable_name_that_is_not_a_secrets(tmp_path: Path, name: str) -> None:
    path, line = _inventory(tmp_path, name)
    result = run_cli("inventory", "check", "--offline", str(path))
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith(f"error: {path}:{line}: sendhost_mailboxes[0].smtp.password_env: "
                                    f"{name!r} is not a secret's variable name: it must match "
                                    f"^{SECRET_ENV_PATTERN}$"), result.stderr
    assert "rename it, e.g. SENDHOST_SECRET_ANA_EXAMPLE_COM_PASSWORD" in result.stderr


def test_the_imap_variable_is_held_to_the_same_names(tmp_path: Path) -> None:
    path, line = _inventory(tmp_path, "SENDHOST_SECRET_ANA_SMTP", imap_env="LD_PRELOAD")
    result = run_cli("inventory", "check", "--offline", str(path))
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: {path}:{line + 3}: sendhost_mailboxes[0].imap.password_env: "
                                    "'LD_PRELOAD' is not a secret's variable name"), result.stderr


def test_a_secrets_name_passes_and_the_example_inventory_stays_valid(tmp_path: Path) -> None:
    path, _ = _inventory(tmp_path, "SENDHOST_SECRET_ANA_SMTP")
    assert run_cli("inventory", "check", "--offline", str(path)).returncode == 0
    example = run_cli("inventory", "check", "--offline", str(REPO_ROOT / "inventory.example.yml"))
    assert example.returncode == 0, example.stderr


def _names_read_by_the_code() -> set[str]:
    """Every SENDHOST_* / REDIS_URL name spelled in a string anywhere in the packages and the role."""
    packages = ("sendhost", "toolkit", "ippool", "warmup", "dns_audit", "provisioning", "simulation", "sender")
    sources = [path for package in packages for path in (REPO_ROOT / package).rglob("*.py")]
    sources += [path for path in ROLE.rglob("*") if path.is_file()]
    found = set()
    for path in sources:
        found |= set(re.findall(r"\b(SENDHOST_[A-Z0-9_]*[A-Z0-9]|REDIS_URL)\b", path.read_text()))
    return found


def test_no_name_sendhost_reads_is_a_secrets_name() -> None:
    read = _names_read_by_the_code()
    assert {"SENDHOST_REDIS_URL", "SENDHOST_DATABASE_URL", "SENDHOST_STATE_DIR", "SENDHOST_HOST"} <= read
    assert sorted(name for name in read if name.startswith(SECRET_ENV_PREFIX)) == []
    assert not [name for name in read if re.fullmatch(SECRET_ENV_PATTERN, name)]


def test_the_role_checks_the_same_pattern() -> None:
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    assert defaults["sender_agent__secret_env_pattern"] == f"^{SECRET_ENV_PATTERN}$"
    assert not [name for name in defaults["sender_agent__environment"] if name.startswith(SECRET_ENV_PREFIX)]


PLAYBOOK = """
- hosts: localhost
  connection: local
  gather_facts: false
  vars_files: [{role}/defaults/main.yml]
  tasks:
    - ansible.builtin.import_tasks: {role}/tasks/check.yml
    - name: Render the environment file as the role does
      ansible.builtin.template:
        src: {role}/templates/agent.env.j2
        dest: {out}
        mode: '0600'
      check_mode: false
"""


def _role_run(tmp_path: Path, smtp_env: str, imap_env: str,
              values: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], Path]:
    """The role's checks (check mode) and its environment file's template, on this machine, for one mailbox whose
    smtp and imap password_env are these (`values` set where the playbook runs)."""
    out = tmp_path / "agent.env"
    playbook = tmp_path / "play.yml"
    playbook.write_text(PLAYBOOK.format(role=ROLE, out=out))
    mailbox = {"address": "ana@example.com", "domain": "example.com", "start": "2026-11-02",
               **{service: {"host": f"{service}.example.com", "username": "ana@example.com", "password_env": name}
                  for service, name in (("smtp", smtp_env), ("imap", imap_env))}}
    extravars = tmp_path / "vars.json"
    extravars.write_text(json.dumps({
        "sendhost_mailboxes": [mailbox], "sendhost_redis_url": "redis://sender@redis.internal:6379/0",
        "sendhost_database_url": "postgresql://sender@db.internal/sendhost", "sendhost_agent_wheel": "/x.whl"}))
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "ANSIBLE_LOCALHOST_WARNING": "false",
           "ANSIBLE_INVENTORY_UNPARSED_WARNING": "false", "ANSIBLE_NOCOLOR": "1", "HOME": str(tmp_path),
           **values}
    result = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "--check", "-i", "localhost,",
                             "-e", f"@{extravars}", str(playbook)], capture_output=True, text=True, env=env,
                            timeout=180, check=False)
    return result, out


@pytest.mark.service  # runs ansible-playbook on this machine (local connection, nothing changed but a temp file)
def test_the_role_refuses_a_variable_name_that_is_not_a_secrets(tmp_path: Path) -> None:
    result, out = _role_run(tmp_path, "SENDHOST_REDIS_URL", "SENDHOST_SECRET_ANA_IMAP",
                            {"SENDHOST_REDIS_URL": "redis://admin:s3cret@redis.internal:6379/0",
                             "SENDHOST_SECRET_ANA_IMAP": "imap-pw"})
    assert result.returncode != 0
    assert ("a mailbox password_env must match ^SENDHOST_SECRET_[A-Z0-9_]+$" in result.stdout
            and "ana@example.com (smtp: SENDHOST_REDIS_URL)" in result.stdout), result.stdout
    assert not out.exists()


@pytest.mark.service
def test_the_role_writes_the_agents_settings_after_the_secrets_and_each_name_once(tmp_path: Path) -> None:
    # smtp and imap log in with the same password, named twice
    result, out = _role_run(tmp_path, "SENDHOST_SECRET_ANA", "SENDHOST_SECRET_ANA", {"SENDHOST_SECRET_ANA": "ana-pw"})
    assert result.returncode == 0, result.stdout + result.stderr
    lines = [line for line in out.read_text().splitlines() if line and not line.startswith("#")]
    names = [line.partition("=")[0] for line in lines]
    assert len(names) == len(set(names)), names
    assert names[0] == "SENDHOST_SECRET_ANA" and lines[0] == "SENDHOST_SECRET_ANA=ana-pw"
    assert names.index("SENDHOST_REDIS_URL") > names.index("SENDHOST_SECRET_ANA")


@pytest.mark.service  # runs the task's own validate command in sh
@pytest.mark.parametrize(("content", "accepted"), [
    ("# managed\nSENDHOST_SECRET_ANA=pw\nSENDHOST_REDIS_URL=redis://h/0\nSENDHOST_DATABASE_URL=postgresql://h/d\n",
     True),
    ("SENDHOST_REDIS_URL=redis://sender@h/0\nSENDHOST_DATABASE_URL=postgresql://h/d\n"
     "SENDHOST_REDIS_URL=redis://admin@h/0\n", False),
    ("SENDHOST_REDIS_URL=\n", False),
    ("SENDHOST_REDIS_URL=redis://h/0\nnot a setting\n", False),
])
def test_the_environment_file_is_refused_when_a_name_is_set_twice(tmp_path: Path, content: str,
                                                                   accepted: bool) -> None:
    tasks = yaml.safe_load((ROLE / "tasks" / "environment.yml").read_text())
    [task] = [task for task in tasks if task["name"] == "Write the sender environment file"]
    candidate = tmp_path / "agent.env"
    candidate.write_text(content)
    command = task["ansible.builtin.template"]["validate"].replace("%s", str(candidate))
    assert (subprocess.run(command, shell=True, check=False).returncode == 0) is accepted
