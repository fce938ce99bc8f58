"""`sendhost host verify` end to end: SSH into the namespace host, probe from each slot to the root namespace."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from provisioning.plan import ProvisionPlan
from provisioning.probe import Probe
from provisioning.ssh import open_session
from provisioning.targets import load_targets
from provisioning.verify import verify_host
from tests.conftest import run_cli
from tests.provisioning.conftest import CLI_ENV, elastic_ip, host_vars, seed_pools, write_inventory
from tests.support.nat import elastic_ip_nat, nft_missing, routable_elastic_ip
from tests.support.net import on_ci
from tests.support.redis_server import RedisServer
from tests.support.sshhost import SshHost

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def provisioned(sender_host: SshHost, tmp_path_factory: pytest.TempPathFactory,
                redis_service: RedisServer) -> Iterator[tuple[SshHost, Path]]:
    """The namespace host provisioned once with the two slots of its pool; yields it and its inventory."""
    workdir = tmp_path_factory.mktemp("verify")
    sender_host.reset_addresses()
    inventory = write_inventory(workdir / "inventory.yml", {"sender-t": host_vars(
        sender_host, workdir / "files", [sender_host.slot_address(1), sender_host.slot_address(2)])},
        redis_url=redis_service.url)
    result = run_cli("provision", "--inventory", str(inventory), env=CLI_ENV, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    yield sender_host, inventory
    sender_host.reset_addresses()


@pytest.fixture(autouse=True)
def pool(provisioned: tuple[SshHost, Path], redis_service: RedisServer) -> None:
    """The host's pool as provisioned, again for each test (another test's fixtures may have emptied Redis)."""
    seed_pools(redis_service.url, provisioned[1])


@pytest.fixture
def probe(provisioned: tuple[SshHost, Path]) -> Iterator[str]:
    """A probe in the root namespace on the veth peer address, as the sender host sees it."""
    host, _ = provisioned
    with Probe(host.root_address, 0) as server:
        address, port = server.address
        yield f"{address}:{port}"


@pytest.fixture
def routed_elastic_ips(provisioned: tuple[SshHost, Path], redis_service: RedisServer) -> list[str]:
    """The pool's two slots with Elastic IPs the root namespace can route back to the host (for `elastic_ip_nat`);
    the next test's `pool` fixture puts the default ones back."""
    if nft_missing() and not on_ci():  # on CI .ci/run installs nftables: a missing nft fails there
        pytest.skip("modelling AWS's Elastic IP NAT needs nft: apt-get install nftables")
    host, inventory = provisioned
    public = [routable_elastic_ip(host, 0), routable_elastic_ip(host, 1)]
    seed_pools(redis_service.url, inventory, elastic_ips={"sender-t": public})
    return public


def verify(inventory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli("--inventory", str(inventory), "host", "verify", "sender-t", *args, timeout=60)


def test_verify_proves_every_slot_presents_its_own_address(provisioned: tuple[SshHost, Path], probe: str) -> None:
    host, inventory = provisioned

    result = verify(inventory, "--probe", probe, "--format", "json")

    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["ok"] is True
    assert [(s["address"], s["status"], s["bound_on"], s["seen"]) for s in report["slots"]] == [
        (host.slot_address(1), "ok", host.interface, host.slot_address(1)),
        (host.slot_address(2), "ok", host.interface, host.slot_address(2)),
    ]


def test_verify_table_names_each_slot_and_time_sync(provisioned: tuple[SshHost, Path], probe: str) -> None:
    host, inventory = provisioned

    result = verify(inventory, "--probe", probe)

    assert result.returncode == 0, result.stderr
    assert f"probe saw {host.slot_address(2)}" in result.stdout
    assert "time sync: " in result.stdout


def test_verify_fails_when_a_slot_address_is_missing(provisioned: tuple[SshHost, Path], probe: str) -> None:
    host, inventory = provisioned
    missing = host.slot_address(2)
    host.ip("addr", "del", f"{missing}/24", "dev", host.interface)
    try:
        result = verify(inventory, "--probe", probe)
    finally:
        host.ip("addr", "add", f"{missing}/24", "dev", host.interface, "label", f"{host.interface}:sh")

    assert result.returncode == 1
    assert f"error: sender-t: verification failed: slot 1 {missing}: not bound on {host.interface}" in result.stderr


def test_verify_fails_when_the_probe_sees_another_address(provisioned: tuple[SshHost, Path], probe: str) -> None:
    host, inventory = provisioned
    [target] = load_targets(inventory)
    plan = ProvisionPlan("sender-t", host.interface, host.subnet, (host.slot_address(1),))
    probe_host, probe_port = probe.rsplit(":", 1)

    with open_session(target) as session:
        report = verify_host(session, plan, (probe_host, int(probe_port)),
                             expected_seen={host.slot_address(1): "203.0.113.7"})

    assert not report.ok
    assert report.slots[0].seen == host.slot_address(1)
    assert report.slots[0].detail == f"probe saw {host.slot_address(1)}, expected its Elastic IP 203.0.113.7"


def test_verify_checks_the_pools_slots_not_the_inventorys(provisioned: tuple[SshHost, Path],
                                                          redis_service: RedisServer) -> None:
    host, inventory = provisioned  # the inventory lists slot addresses 1 and 2, both bound
    seed_pools(redis_service.url, inventory, {"sender-t": [host.slot_address(1), host.slot_address(3)]})

    result = verify(inventory, "--format", "json")

    assert result.returncode == 1
    assert [(s["address"], s["status"]) for s in json.loads(result.stdout)["slots"]] == [
        (host.slot_address(1), "ok"), (host.slot_address(3), "failed")]
    assert f"slot 1 {host.slot_address(3)}: not bound on {host.interface}" in result.stderr


def test_expect_public_fails_a_slot_the_probe_sees_without_its_elastic_ip(provisioned: tuple[SshHost, Path],
                                                                         probe: str) -> None:
    host, inventory = provisioned  # no NAT here: the probe sees each slot's private address, not its Elastic IP

    result = verify(inventory, "--probe", probe, "--expect-public")

    assert result.returncode == 1
    assert (f"slot 0 {host.slot_address(1)}: probe saw {host.slot_address(1)}, expected its Elastic IP "
            f"{elastic_ip(0)}; slot 1 {host.slot_address(2)}: probe saw {host.slot_address(2)}, expected its "
            f"Elastic IP {elastic_ip(1)}") in result.stderr


def test_expect_public_passes_when_each_slot_arrives_from_its_elastic_ip(
        provisioned: tuple[SshHost, Path], probe: str, routed_elastic_ips: list[str]) -> None:
    host, inventory = provisioned
    private = [host.slot_address(1), host.slot_address(2)]

    with elastic_ip_nat(host, dict(zip(private, routed_elastic_ips, strict=True))):
        public = verify(inventory, "--probe", probe, "--expect-public", "--format", "json")
        private_expected = verify(inventory, "--probe", probe)

    assert public.returncode == 0, public.stderr
    report = json.loads(public.stdout)
    assert report["ok"] is True
    assert [(s["address"], s["status"], s["seen"]) for s in report["slots"]] == [
        (private[0], "ok", routed_elastic_ips[0]), (private[1], "ok", routed_elastic_ips[1])]
    # the same NAT without --expect-public fails: the flag is what accepts the Elastic IP in place of the address
    assert private_expected.returncode == 1
    assert (f"slot 0 {private[0]}: probe saw {routed_elastic_ips[0]}, expected {private[0]}; slot 1 {private[1]}: "
            f"probe saw {routed_elastic_ips[1]}, expected {private[1]}") in private_expected.stderr


def test_expect_public_fails_only_the_slot_that_arrives_without_its_elastic_ip(
        provisioned: tuple[SshHost, Path], probe: str, routed_elastic_ips: list[str]) -> None:
    host, inventory = provisioned
    natted, bare = host.slot_address(1), host.slot_address(2)

    with elastic_ip_nat(host, {natted: routed_elastic_ips[0]}):  # slot 1's Elastic IP is not associated
        result = verify(inventory, "--probe", probe, "--expect-public", "--format", "json")

    assert result.returncode == 1
    assert [(s["address"], s["status"], s["seen"]) for s in json.loads(result.stdout)["slots"]] == [
        (natted, "ok", routed_elastic_ips[0]), (bare, "failed", bare)]
    assert result.stderr.endswith(f"error: sender-t: verification failed: slot 1 {bare}: probe saw {bare}, expected "
                                  f"its Elastic IP {routed_elastic_ips[1]}\n")


def test_without_sendhost_interface_slots_are_checked_on_the_default_route_interface(
        provisioned: tuple[SshHost, Path], probe: str, tmp_path: Path, redis_service: RedisServer) -> None:
    host, _ = provisioned
    slots = [host.slot_address(1), host.slot_address(2)]
    inventory = write_inventory(tmp_path / "inventory.yml", {"sender-t": host_vars(
        host, tmp_path / "files", slots, sendhost_interface=None)}, redis_url=redis_service.url)
    host.ip("route", "add", "default", "via", host.root_address)  # as an instance has: it names the interface
    try:
        found = verify(inventory, "--probe", probe, "--format", "json")
    finally:
        host.ip("route", "del", "default")
    missing = verify(inventory)

    assert found.returncode == 0, found.stderr
    report = json.loads(found.stdout)
    assert report["interface"] == host.interface  # a name like shpNNNNn: no guess (eth0) would match it
    assert [s["bound_on"] for s in report["slots"]] == [host.interface, host.interface]
    assert missing.returncode == 2
    assert missing.stderr == ("error: sender-t: the host has no default route to tell its interface: set "
                              "sender-t.sendhost_interface in the inventory\n")


def test_verify_fails_when_the_probe_is_unreachable(provisioned: tuple[SshHost, Path]) -> None:
    host, inventory = provisioned

    result = verify(inventory, "--probe", f"{host.root_address}:9")  # nothing listens on discard

    assert result.returncode == 1
    assert f"probe {host.root_address}:9 not reached" in result.stderr


def test_verify_refuses_a_changed_host_key(provisioned: tuple[SshHost, Path], tmp_path: Path) -> None:
    host, inventory = provisioned
    other = tmp_path / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    wrong = tmp_path / "known_hosts"
    wrong.write_text(f"[{host.address}]:{host.port} {' '.join(Path(f'{other}.pub').read_text().split()[:2])}\n")

    result = verify(inventory, "--known-hosts", str(wrong))

    assert result.returncode == 1
    assert "host key CHANGED" in result.stderr
    assert f"ssh-keygen -R '[{host.address}]:{host.port}' -f {wrong}" in result.stderr
    assert wrong.read_text().count("\n") == 1  # nothing added


def test_verify_refuses_an_unknown_host_key(provisioned: tuple[SshHost, Path], tmp_path: Path) -> None:
    host, inventory = provisioned
    empty = tmp_path / "known_hosts"
    empty.write_text("")

    result = verify(inventory, "--known-hosts", str(empty))

    assert result.returncode == 2
    assert "host key unknown" in result.stderr
    assert f"ssh-keyscan -p {host.port} {host.address} >> {empty}" in result.stderr
    assert empty.read_text() == ""  # never auto-added


def test_verify_reports_an_unreachable_port(provisioned: tuple[SshHost, Path], tmp_path: Path,
                                            redis_service: RedisServer) -> None:
    host, _ = provisioned
    inventory = write_inventory(tmp_path / "inventory.yml", {"sender-t": host_vars(
        host, tmp_path / "files", [host.slot_address(1)], ansible_port=2299)}, redis_url=redis_service.url)

    result = verify(inventory)

    assert result.returncode == 1
    assert f"error: sender-t ({host.address}:2299): unreachable:" in result.stderr
    assert "Traceback" not in result.stderr
