"""How to reach each sender host over SSH, read from the inventory the way Ansible reads it.

Ansible's own inventory loader is used so group vars, host vars and templated values resolve exactly as they do for
`ansible-playbook`: `sendhost provision` and `sendhost host verify` connect to the same address with the same key
and trust the same known_hosts file. The result is the model's record of it, `sendhost.model.SshTarget`.
"""

from __future__ import annotations

import getpass
import shlex
from pathlib import Path
from typing import Any

from provisioning.errors import ProvisionConfigError
from sendhost.model import DEFAULT_KNOWN_HOSTS, SSH_PORT, SshTarget

SENDER_GROUP = "senders"


def require_connectable(target: SshTarget) -> None:
    """Raise ProvisionConfigError naming the missing inventory variable when the host cannot be reached."""
    if not target.address:
        raise ProvisionConfigError(
            f"{target.name}: no address: set ansible_host in the inventory (the address SSH reaches it on)"
        )
    if target.key_file is None:
        raise ProvisionConfigError(
            f"{target.name}: no SSH key: set ansible_ssh_private_key_file in the inventory"
        )
    if not target.key_file.is_file():
        raise ProvisionConfigError(
            f"{target.name}: SSH key {target.key_file} does not exist; fix ansible_ssh_private_key_file"
        )


def load_targets(inventory: Path, limit: str | None = None, group: str = SENDER_GROUP) -> list[SshTarget]:
    """The hosts of `group` (narrowed by an Ansible `--limit` pattern) with their resolved connection variables."""
    from ansible.errors import AnsibleError  # late: ansible is slow to import and only these commands need it
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar
    from ansible.vars.manager import VariableManager

    loader = DataLoader()
    try:
        manager = InventoryManager(loader=loader, sources=[str(inventory)])
        if limit:
            manager.subset(limit)
        hosts = manager.get_hosts(pattern=group)
        variables = VariableManager(loader=loader, inventory=manager)
        targets = []
        for host in hosts:
            host_vars = variables.get_vars(host=host, include_hostvars=False)
            templar = Templar(loader=loader, variables=host_vars)
            targets.append(_target(host.name, lambda key, hv=host_vars, t=templar: _value(hv, t, key)))
    except AnsibleError as exc:
        raise ProvisionConfigError(f"{inventory}: Ansible cannot read it: {exc.message}") from None
    if not targets:
        where = f" matching --limit {limit!r}" if limit else ""
        raise ProvisionConfigError(f"{inventory}: no host in group {group}{where}; check the inventory or --limit")
    return targets


def _value(host_vars: dict[str, Any], templar: Any, key: str) -> Any:
    value = host_vars.get(key)
    return None if value is None else templar.template(value)


def _target(name: str, value: Any) -> SshTarget:
    key_file = value("ansible_ssh_private_key_file") or value("ansible_private_key_file")
    ssh_args = " ".join(str(value(k) or "") for k in ("ansible_ssh_common_args", "ansible_ssh_extra_args"))
    port = value("ansible_port") or value("ansible_ssh_port") or SSH_PORT
    try:
        port = int(port)
    except (TypeError, ValueError):
        raise ProvisionConfigError(f"{name}: ansible_port {port!r} is not a port number") from None
    return SshTarget(
        name=name,
        address=str(value("ansible_host") or "") or None,
        port=port,
        user=str(value("ansible_user") or value("ansible_ssh_user") or getpass.getuser()),  # as Ansible does
        key_file=Path(str(key_file)).expanduser() if key_file else None,
        known_hosts=(known_hosts_from_ssh_args(ssh_args) or DEFAULT_KNOWN_HOSTS).expanduser(),
    )


def known_hosts_from_ssh_args(ssh_args: str) -> Path | None:
    """The `UserKnownHostsFile` an OpenSSH argument string names, if any (first file only, as ssh reads it)."""
    words = shlex.split(ssh_args)
    for index, word in enumerate(words):
        option = word[2:] if word.startswith("-o") and len(word) > 2 else None
        if word == "-o" and index + 1 < len(words):
            option = words[index + 1]
        if option is None:
            continue
        name, _, setting = option.replace("=", " ", 1).partition(" ")
        if name.lower() == "userknownhostsfile" and setting.strip():
            return Path(setting.split()[0])
    return None
