"""Bad input to `sendhost provision` and `host verify`: one clear line, exit 2, nothing run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli
from tests.provisioning.conftest import seed_pools, write_inventory


def sender(tmp_path: Path, **overrides: Any) -> dict[str, Any]:
    key = tmp_path / "id_test"
    key.write_text("not used: nothing connects in these tests\n")
    variables: dict[str, Any] = {
        "ansible_host": "10.0.1.10",
        "ansible_ssh_private_key_file": str(key),
        "sendhost_instance_id": "i-0123456789abcdef0",
        "sendhost_region": "us-east-1",
        "sendhost_primary_ip": "10.0.1.10",
        "sendhost_subnet": "10.0.1.0/24",
        "sendhost_pool": {"slots": 2, "private_ips": ["10.0.1.11", "10.0.1.12"]},
    }
    variables.update(overrides)
    return {k: v for k, v in variables.items() if v is not None}


def provision(inventory: Path, *args: str, env: dict[str, str] | None = None) -> Any:
    return run_cli("provision", "--inventory", str(inventory), *args, env=env)


def test_host_without_an_address_is_refused(tmp_path: Path) -> None:
    inventory = write_inventory(tmp_path / "inv.yml", {"sender-1": sender(tmp_path, ansible_host=None)})

    result = provision(inventory)

    assert result.returncode == 2
    assert result.stderr == ("error: sender-1: no address: set ansible_host in the inventory "
                             "(the address SSH reaches it on)\n")


def test_host_without_a_key_is_refused(tmp_path: Path) -> None:
    inventory = write_inventory(tmp_path / "inv.yml", {"sender-1": sender(tmp_path, ansible_ssh_private_key_file=None)})

    result = provision(inventory)

    assert result.returncode == 2
    assert result.stderr == "error: sender-1: no SSH key: set ansible_ssh_private_key_file in the inventory\n"


def test_host_whose_key_file_is_missing_is_refused(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    inventory = write_inventory(tmp_path / "inv.yml", {
        "sender-1": sender(tmp_path, ansible_ssh_private_key_file=str(missing))})

    result = provision(inventory)

    assert result.returncode == 2
    assert f"sender-1: SSH key {missing} does not exist" in result.stderr


def test_slot_address_outside_the_subnet_is_refused(tmp_path: Path, redis_url: str) -> None:
    inventory = write_inventory(tmp_path / "inv.yml", {"sender-1": sender(tmp_path)}, redis_url=redis_url)
    seed_pools(redis_url, inventory, {"sender-1": ["10.0.1.11", "10.0.9.12"]})  # the pool disagrees with the subnet

    result = provision(inventory)

    assert result.returncode == 2
    assert "10.0.9.12 of its IP pool is outside the host's subnet 10.0.1.0/24" in result.stderr
    assert result.stderr.count("\n") == 1


def test_a_host_without_a_pool_is_refused_though_the_inventory_lists_private_ips(tmp_path: Path,
                                                                                  redis_url: str) -> None:
    inventory = write_inventory(tmp_path / "inv.yml", {"sender-1": sender(tmp_path)}, redis_url=redis_url)
    seed_pools(redis_url, inventory, {"sender-1": []})  # Redis reachable, no pool for the host

    result = provision(inventory, env={"SENDHOST_ANSIBLE_PLAYBOOK": str(tmp_path / "never-run")})

    assert result.returncode == 2
    assert result.stderr == ("error: sender-1: no IP pool for this host in Redis, and only its pool says which slot "
                             "addresses to bind: run `sendhost pool create sender-1` first\n")


def test_without_a_configured_redis_provision_says_where_the_slots_come_from(tmp_path: Path) -> None:
    inventory = write_inventory(tmp_path / "inv.yml", {"sender-1": sender(tmp_path)})

    result = provision(inventory, env={"SENDHOST_ANSIBLE_PLAYBOOK": str(tmp_path / "never-run")})

    assert result.returncode == 2
    assert result.stderr == (
        "error: sender-1: slot addresses come from the host's IP pool in Redis, and no Redis is configured: set "
        "SENDHOST_REDIS_URL (or sendhost_redis_url in the inventory's all.vars) to the pool's Redis, and run "
        "`sendhost pool create sender-1` if the host has no pool yet\n")


def test_a_run_that_binds_no_slots_needs_no_pool(tmp_path: Path) -> None:
    inventory = write_inventory(tmp_path / "inv.yml", {"sender-1": sender(tmp_path)})
    missing = tmp_path / "bin" / "ansible-playbook"

    result = provision(inventory, "--tags", "sender_agent", env={"SENDHOST_ANSIBLE_PLAYBOOK": str(missing)})

    # past the slot addresses, as far as looking for ansible-playbook
    assert result.stderr == f"error: SENDHOST_ANSIBLE_PLAYBOOK={missing} is not an executable file; fix or unset it\n"


def test_missing_ansible_playbook_is_refused(tmp_path: Path, redis_url: str) -> None:
    inventory = write_inventory(tmp_path / "inv.yml", {"sender-1": sender(tmp_path)}, redis_url=redis_url)
    missing = tmp_path / "bin" / "ansible-playbook"

    result = provision(inventory, env={"SENDHOST_ANSIBLE_PLAYBOOK": str(missing)})

    assert result.returncode == 2
    assert result.stderr == f"error: SENDHOST_ANSIBLE_PLAYBOOK={missing} is not an executable file; fix or unset it\n"


def test_limit_matching_no_host_is_refused(tmp_path: Path) -> None:
    inventory = write_inventory(tmp_path / "inv.yml", {"sender-1": sender(tmp_path)})

    result = provision(inventory, "--limit", "sender-9")

    assert result.returncode == 2
    assert "no host in group senders matching --limit 'sender-9'" in result.stderr


def test_limit_skips_checks_of_hosts_it_leaves_out(tmp_path: Path, redis_url: str) -> None:
    inventory = write_inventory(tmp_path / "inv.yml", {
        "sender-1": sender(tmp_path),
        "sender-2": sender(tmp_path, ansible_host="10.0.1.20", ansible_ssh_private_key_file=None,
                           sendhost_primary_ip="10.0.1.20",
                           sendhost_pool={"slots": 1, "private_ips": ["10.0.1.21"]}),
    }, redis_url=redis_url)

    left_out = provision(inventory, "--limit", "sender-1", "--check",
                         env={"SENDHOST_ANSIBLE_PLAYBOOK": str(tmp_path / "absent")})
    included = provision(inventory)

    # with sender-2 left out the run gets as far as looking for ansible-playbook
    assert "SENDHOST_ANSIBLE_PLAYBOOK" in left_out.stderr
    assert included.returncode == 2
    assert "sender-2: no SSH key" in included.stderr


@pytest.mark.parametrize("args", [["--probe", "nowhere"], ["--probe", "10.0.0.1:0"]])
def test_verify_with_a_bad_probe_is_refused(tmp_path: Path, args: list[str]) -> None:
    inventory = write_inventory(tmp_path / "inv.yml", {"sender-1": sender(tmp_path)})

    result = run_cli("--inventory", str(inventory), "host", "verify", "sender-1", *args)

    assert result.returncode == 2
    assert "--probe" in result.stderr and "expected HOST:PORT" in result.stderr


def test_verify_of_an_unknown_host_is_refused(tmp_path: Path) -> None:
    inventory = write_inventory(tmp_path / "inv.yml", {"sender-1": sender(tmp_path)})

    result = run_cli("--inventory", str(inventory), "host", "verify", "sender-7")

    assert result.returncode == 2
    assert "no host 'sender-7' in group senders (known: sender-1)" in result.stderr


def test_verify_with_a_missing_known_hosts_file_says_how_to_trust(tmp_path: Path, redis_url: str) -> None:
    inventory = write_inventory(tmp_path / "inv.yml", {"sender-1": sender(tmp_path)}, redis_url=redis_url)
    absent = tmp_path / "known_hosts"

    result = run_cli("--inventory", str(inventory), "host", "verify", "sender-1", "--known-hosts", str(absent))

    assert result.returncode == 2
    assert f"known hosts file {absent} does not exist" in result.stderr
    assert f"ssh-keyscan 10.0.1.10 >> {absent}" in result.stderr
    assert not absent.exists()


def test_verify_of_a_host_without_a_pool_is_refused_though_the_inventory_lists_private_ips(
        tmp_path: Path, redis_url: str) -> None:
    inventory = write_inventory(tmp_path / "inv.yml", {"sender-1": sender(tmp_path)}, redis_url=redis_url)
    seed_pools(redis_url, inventory, {"sender-1": []})

    result = run_cli("--inventory", str(inventory), "host", "verify", "sender-1")

    assert result.returncode == 2
    assert result.stderr == ("error: sender-1: no IP pool for this host in Redis, and only its pool says which slot "
                             "addresses to bind: run `sendhost pool create sender-1` first\n")


def test_verify_without_a_configured_redis_is_refused(tmp_path: Path) -> None:
    inventory = write_inventory(tmp_path / "inv.yml", {"sender-1": sender(tmp_path)})

    result = run_cli("--inventory", str(inventory), "host", "verify", "sender-1")

    assert result.returncode == 2
    assert result.stderr.startswith("error: sender-1: slot addresses come from the host's IP pool in Redis, and no "
                                    "Redis is configured: set SENDHOST_REDIS_URL")


def test_expect_public_without_a_probe_is_refused(tmp_path: Path) -> None:
    inventory = write_inventory(tmp_path / "inv.yml", {"sender-1": sender(tmp_path)})

    result = run_cli("--inventory", str(inventory), "host", "verify", "sender-1", "--expect-public")

    assert result.returncode == 2
    assert result.stderr == ("error: --expect-public compares what a probe sees: add --probe HOST:PORT, a "
                             "`sendhost host probe` outside the VPC\n")
