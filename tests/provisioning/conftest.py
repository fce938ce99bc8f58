"""Fixtures for provisioning tests: a real SSH host in a network namespace and inventories pointing at it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml

from ippool.pool import Pool
from provisioning.agent_package import build_wheel, checkout_root
from tests.support.net import on_ci
from tests.support.shared import made_once
from tests.support.sshhost import SshHost, can_make_namespaces, missing_tools, ssh_host
from toolkit.inventory import load_inventory

# Ansible's persistent SSH masters must not outlive the test session's namespace: keep them for seconds, not 60 s.
CLI_ENV = {"ANSIBLE_SSH_ARGS": "-o ControlMaster=auto -o ControlPersist=5s"}
# The agent role refuses empty Redis and database URLs. Tests that run no agent name these: nothing connects to them.
# The Redis one goes in host vars, where the role reads it but sendhost's own configuration (all.vars) does not, so
# `sendhost provision` does not ask it for a pool.
UNUSED_REDIS_URL = "redis://redis.invalid:6379/0"
UNUSED_DATABASE_URL = "postgresql://sender@ledger.invalid:5432/sendhost"


@pytest.fixture(scope="session")
def agent_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """sendhost's wheel, built from this checkout as `sendhost provision` builds it, for runs that bypass the CLI
    (once per run: the pytest-xdist workers share it)."""
    source = checkout_root()
    assert source is not None, "the tests run from a checkout"
    return made_once(tmp_path_factory, "agent-wheel", lambda folder: build_wheel(source, folder))


@pytest.fixture(scope="session")
def sender_host() -> Iterator[SshHost]:
    """sshd in a fresh network namespace, reachable over a veth pair, with a test key and known_hosts."""
    missing = missing_tools()
    if (missing or not can_make_namespaces()) and not on_ci():
        need = f"apt-get install {' '.join(missing)}" if missing else "root (to create network namespaces)"
        pytest.skip(f"an SSH host in a network namespace needs {need}")
    with ssh_host() as host:
        yield host


@pytest.fixture
def fresh_host(sender_host: SshHost, tmp_path: Path) -> Iterator[SshHost]:
    """The SSH host with no slot addresses bound, as a new instance would be; reset again afterwards."""
    sender_host.reset_addresses()
    yield sender_host
    sender_host.reset_addresses()


def host_vars(host: SshHost, files: Path, slots: list[str], **overrides: Any) -> dict[str, Any]:
    """Inventory variables for the namespace host; every file a role writes lands under `files`."""
    variables: dict[str, Any] = {
        "ansible_host": host.address,
        "ansible_port": host.port,
        "ansible_user": "root",
        "ansible_ssh_private_key_file": str(host.key_file),
        "ansible_ssh_common_args": f"-o UserKnownHostsFile={host.known_hosts} -o StrictHostKeyChecking=yes",
        "ansible_python_interpreter": "/usr/bin/python3",
        "sendhost_instance_id": "i-0123456789abcdef0",
        "sendhost_region": "us-east-1",
        "sendhost_primary_ip": host.address,
        "sendhost_subnet": host.subnet,
        "sendhost_interface": host.interface,
        "sendhost_pool": {"slots": max(len(slots), 1), "private_ips": slots} if slots else {"slots": 1},
        "sendhost_database_url": UNUSED_DATABASE_URL,
        **host.role_overrides(files),
    }
    variables.update(overrides)
    return {k: v for k, v in variables.items() if v is not None}


def write_inventory(path: Path, hosts: dict[str, dict[str, Any]], redis_url: str | None = None) -> Path:
    """An inventory with `hosts` in group senders (the same file shape as inventory.example.yml). With `redis_url`
    (the pool's Redis, in all.vars) each host's pool is put there as `pool create` leaves it (`seed_pools`)."""
    if not redis_url:
        hosts = {name: {"sendhost_redis_url": UNUSED_REDIS_URL, **variables} for name, variables in hosts.items()}
    inventory: dict[str, Any] = {"all": {"children": {"senders": {"hosts": hosts}}}}
    if redis_url:
        inventory["all"]["vars"] = {"sendhost_redis_url": redis_url}
    path.write_text(yaml.safe_dump(inventory, sort_keys=False))
    if redis_url:
        seed_pools(redis_url, path)
    return path


def elastic_ip(slot: int) -> str:
    """The Elastic IP `seed_pools` gives slot n (TEST-NET-2: routed nowhere, as no probe here sees it)."""
    return f"198.51.100.{slot + 1}"


def seed_pools(redis_url: str, inventory: Path, slots: dict[str, list[str]] | None = None,
               elastic_ips: dict[str, list[str]] | None = None) -> None:
    """Each host's pool in Redis as `sendhost pool create` leaves it for the inventory's private_ips (slot n on
    private_ips[n], with `elastic_ip(n)`), or on `slots[host]` when given; a host with neither gets no pool.
    `elastic_ips[host][n]`, when given, is slot n's Elastic IP instead of `elastic_ip(n)`."""
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    pool = Pool(client)
    try:
        for host in load_inventory(inventory).hosts:
            if host.name in pool.hosts():
                pool.slots.forget_host(host.name)
            addresses = (slots or {}).get(host.name, list(host.pool.private_ips))
            if not addresses:
                continue
            pool.register_host(host.name, host.primary_ip)
            public_ips = (elastic_ips or {}).get(host.name, [elastic_ip(n) for n in range(len(addresses))])
            for n, (address, public_ip) in enumerate(zip(addresses, public_ips, strict=True)):
                pool.put_address(host.name, n, private_ip=address, public_ip=public_ip,
                                 allocation_id=f"eipalloc-{n + 1:04d}")
    finally:
        client.close()
