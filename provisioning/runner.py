"""Run the provisioning playbook through ansible-runner and reduce its events to per-host results."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from provisioning.errors import ProvisionConfigError, ProvisionFailed

# The checkout's top-level playbooks/, which the wheel ships inside this package (provisioning/playbooks links to it),
# so a plain `pip install` provisions as a checkout does.
DEFAULT_PLAYBOOK = Path(str(resources.files("provisioning") / "playbooks" / "site.yml"))
# Ansible must refuse hosts whose key it does not know, exactly as `host verify` does; never auto-add.
RUNNER_ENV = {
    "ANSIBLE_HOST_KEY_CHECKING": "True",
    "ANSIBLE_RETRY_FILES_ENABLED": "False",
    "ANSIBLE_NOCOLOR": "True",
}
_RESULT_EVENTS = {
    "runner_on_ok": "ok",
    "runner_on_failed": "failed",
    "runner_on_unreachable": "unreachable",
    "runner_on_skipped": "skipped",
}


@dataclass(frozen=True)
class HostStats:
    """Task counts for one host, as in Ansible's PLAY RECAP (`ok` includes `changed`)."""

    host: str
    ok: int = 0
    changed: int = 0
    failed: int = 0
    unreachable: int = 0
    skipped: int = 0
    message: str | None = None  # the first failure or unreachable message, for the report

    @property
    def status(self) -> str:
        if self.unreachable:
            return "unreachable"
        if self.failed:
            return "failed"
        return "changed" if self.changed else "ok"


@dataclass(frozen=True)
class ProvisionResult:
    hosts: tuple[HostStats, ...]
    rc: int
    check: bool = False

    @property
    def failed(self) -> bool:
        return any(h.status in ("failed", "unreachable") for h in self.hosts) or (self.rc != 0 and not self.hosts)


def find_ansible_playbook(env: Mapping[str, str], beside: Path = Path(sys.executable).parent) -> str:
    """Path of ansible-playbook: $SENDHOST_ANSIBLE_PLAYBOOK, else next to this Python, else on PATH."""
    named = env.get("SENDHOST_ANSIBLE_PLAYBOOK")
    if named:
        if os.access(named, os.X_OK) and Path(named).is_file():
            return named
        raise ProvisionConfigError(f"SENDHOST_ANSIBLE_PLAYBOOK={named} is not an executable file; fix or unset it")
    candidate = beside / "ansible-playbook"
    if os.access(candidate, os.X_OK):
        return str(candidate)
    found = shutil.which("ansible-playbook", path=env.get("PATH", ""))
    if found is None:
        raise ProvisionConfigError(
            "ansible-playbook not found: install ansible-core (pip install 'ansible-core>=2.16') or put it on PATH"
        )
    return found


@dataclass
class _Collector:
    """Keeps the first failure message per host and forwards one progress line per task result."""

    progress: Callable[[str], None] | None
    messages: dict[str, str] = field(default_factory=dict)

    def __call__(self, event: dict[str, Any]) -> bool:
        outcome = _RESULT_EVENTS.get(event.get("event", ""))
        data = event.get("event_data") or {}
        host = data.get("host")
        if outcome is None or not host:
            return True
        result = data.get("res") or {}
        if outcome == "ok" and result.get("changed"):
            outcome = "changed"
        if outcome in ("failed", "unreachable") and not data.get("ignore_errors"):
            self.messages.setdefault(host, _failure_text(data.get("task", ""), result))
        if self.progress is not None:
            self.progress(f"{host}: {outcome}: {data.get('task', '')}")
        return True


def _failure_text(task: str, result: Mapping[str, Any]) -> str:
    detail = result.get("msg") or result.get("stderr") or result.get("module_stderr") or "failed"
    first_line = str(detail).strip().splitlines()[0] if str(detail).strip() else "failed"
    return f"{task}: {first_line}" if task else first_line


def run_playbook(inventory: Path, *, playbook: Path = DEFAULT_PLAYBOOK, binary: str,
                 extravars: Mapping[str, Any] | None = None, limit: str | None = None,
                 tags: Sequence[str] = (), check: bool = False,
                 progress: Callable[[str], None] | None = None) -> ProvisionResult:
    """Run `playbook` against `inventory`; return per-host stats. Raises ProvisionFailed if it could not run."""
    import ansible_runner  # late: only `sendhost provision` needs it

    collector = _Collector(progress)
    with tempfile.TemporaryDirectory(prefix="sendhost-provision-") as private_dir:
        # extra vars may carry the Redis URL: a 0600 file read with -e @file, never the command line (ps shows it)
        extravars_file = Path(private_dir) / "extravars.json"
        extravars_file.touch(mode=0o600)
        extravars_file.write_text(json.dumps(dict(extravars or {})))
        cmdline = f"-e @{shlex.quote(str(extravars_file))}" + (" --check" if check else "")
        runner = ansible_runner.run(
            private_data_dir=private_dir,
            playbook=str(playbook.resolve()),
            inventory=str(inventory.resolve()),
            limit=limit,
            tags=",".join(tags) or None,
            cmdline=cmdline,
            # ansible-runner's `binary` switches to raw mode and drops the playbook: put ours first on PATH instead
            envvars={
                **RUNNER_ENV,
                # one SSH round trip per task instead of three; the caller's environment may turn it off
                "ANSIBLE_PIPELINING": os.environ.get("ANSIBLE_PIPELINING", "True"),
                "PATH": os.pathsep.join([str(Path(binary).parent), os.environ.get("PATH", "")]),
            },
            event_handler=collector,
            quiet=True,
            suppress_env_files=True,
        )
        stats = runner.stats or {}
        rc = int(runner.rc if runner.rc is not None else 1)
        if not stats.get("processed") and rc != 0:
            with runner.stdout as output:  # a fresh handle on the run's stdout file
                tail = " ".join(line.strip() for line in output.read().strip().splitlines()[-3:])
            raise ProvisionFailed(f"ansible-playbook exited {rc} before any host ran: {tail or runner.status}")
    hosts = tuple(
        HostStats(
            host=host,
            ok=stats.get("ok", {}).get(host, 0),
            changed=stats.get("changed", {}).get(host, 0),
            failed=stats.get("failures", {}).get(host, 0),
            unreachable=stats.get("dark", {}).get(host, 0),
            skipped=stats.get("skipped", {}).get(host, 0),
            message=collector.messages.get(host),
        )
        for host in sorted(stats.get("processed", {}))
    )
    return ProvisionResult(hosts=hosts, rc=rc, check=check)
