"""`host verify`'s outbound submission check, from the namespace host over real SSH to servers in the root
namespace: one port listening (reachable), one bound but not listening (refused), one network with no route."""

from __future__ import annotations

import json
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from provisioning.egress import EgressStatus, check_submission_egress, judge
from provisioning.ssh import CommandResult, open_session
from provisioning.targets import load_targets
from tests.conftest import run_cli
from tests.provisioning.conftest import host_vars, seed_pools
from tests.support.redis_server import RedisServer
from tests.support.sshhost import SshHost

pytestmark = pytest.mark.slow

NO_ROUTE = ("192.0.2.1", 465)  # TEST-NET-1: the namespace has no default route, so the host has no way there


@dataclass(frozen=True)
class Servers:
    host: str
    open_port: int  # a listening socket: the connection opens
    closed_port: int  # bound but not listening: the kernel answers with a reset


@pytest.fixture
def servers(sender_host: SshHost) -> Iterator[Servers]:
    """A listening and a non-listening port on the root-namespace address the host reaches over the veth."""
    with socket.socket() as listening, socket.socket() as closed:
        listening.bind((sender_host.root_address, 0))
        listening.listen(8)
        closed.bind((sender_host.root_address, 0))
        yield Servers(sender_host.root_address, listening.getsockname()[1], closed.getsockname()[1])


@pytest.fixture
def bound_host(fresh_host: SshHost) -> SshHost:
    """The host with its one slot address bound, so `host verify` judges only the submission check."""
    fresh_host.ip("addr", "add", f"{fresh_host.slot_address(1)}/24", "dev", fresh_host.interface, "label",
                  f"{fresh_host.interface}:sh")
    return fresh_host


def _smtp_mailbox(local: str, host: str, port: int) -> dict[str, Any]:
    return {"address": f"{local}@example.com", "domain": "example.com", "start": "2026-11-01",
            "smtp": {"host": host, "port": port, "security": "starttls", "username": f"{local}@example.com",
                     "password_env": "SENDHOST_SECRET_UNUSED_SMTP"}}


def _inventory(path: Path, host: SshHost, endpoints: list[tuple[str, int]], redis_url: str) -> Path:
    """The host with mailboxes on `endpoints`, and its pool (one slot) in the Redis at `redis_url`."""
    mailboxes = [_smtp_mailbox(f"m{i}", server, port) for i, (server, port) in enumerate(endpoints)]
    variables = host_vars(host, path.parent / "files", [host.slot_address(1)])
    path.write_text(yaml.safe_dump({"all": {"vars": {"sendhost_mailboxes": mailboxes, "sendhost_redis_url": redis_url},
                                            "children": {"senders": {"hosts": {"sender-t": variables}}}}},
                                   sort_keys=False))
    seed_pools(redis_url, path)
    return path


def _verify(inventory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli("--inventory", str(inventory), "host", "verify", "sender-t", *args, timeout=60)


def test_verify_reports_each_submission_server_reachable_or_blocked(bound_host: SshHost, servers: Servers,
                                                                    redis_service: RedisServer,
                                                                    tmp_path: Path) -> None:
    inventory = _inventory(tmp_path / "inventory.yml", bound_host, [
        (servers.host, servers.open_port), (servers.host, servers.closed_port), NO_ROUTE,
        (servers.host, servers.open_port),  # a second mailbox on the same server is one check
    ], redis_service.url)

    result = _verify(inventory, "--format", "json")

    assert result.returncode == 1
    egress = json.loads(result.stdout)["egress"]
    assert [(e["host"], e["port"], e["status"]) for e in egress] == [
        (servers.host, servers.open_port, "reachable"),
        (servers.host, servers.closed_port, "blocked"),
        (*NO_ROUTE, "blocked"),
    ]
    assert egress[1]["detail"].startswith(f"{servers.host}:{servers.closed_port} refused the connection")
    assert egress[2]["detail"].startswith("no route from the host to 192.0.2.1:465")
    assert "`sendhost pool doctor`" in egress[2]["fix"]
    assert result.stderr.startswith(f"error: sender-t: verification failed: submission {servers.host}:"
                                    f"{servers.closed_port} blocked: {servers.host}:{servers.closed_port} refused")
    assert "submission 192.0.2.1:465 blocked: no route from the host" in result.stderr
    assert "Traceback" not in result.stderr


def test_verify_passes_when_every_submission_server_is_reachable(bound_host: SshHost, servers: Servers,
                                                                 redis_service: RedisServer, tmp_path: Path) -> None:
    inventory = _inventory(tmp_path / "inventory.yml", bound_host, [(servers.host, servers.open_port)],
                           redis_service.url)

    result = _verify(inventory)

    assert result.returncode == 0, result.stderr
    lines = [line.rstrip() for line in result.stdout.splitlines()]
    assert "outbound submission from sender-t" in lines
    [row] = [[cell.strip() for cell in line.split("│")[1:-1]] for line in lines
             if line.startswith("│") and str(servers.open_port) in line]
    assert row == [servers.host, str(servers.open_port), "reachable",
                   f"TCP to {servers.host}:{servers.open_port} opened from the host", "-"]


def test_a_closed_port_is_blocked_over_a_real_session(sender_host: SshHost, servers: Servers,
                                                      redis_service: RedisServer, tmp_path: Path) -> None:
    [target] = load_targets(_inventory(tmp_path / "inventory.yml", sender_host, [], redis_service.url))
    with open_session(target) as session:
        [check] = check_submission_egress(session, [(servers.host, servers.closed_port)])
    assert check.status == EgressStatus.BLOCKED
    assert check.fix.startswith("check the mailbox's smtp.host and smtp.port against the provider's submission")


class MissingPython3Session:
    """Named fake of an SSH session on a host without python3: every command exits 127, as the shell does."""

    def run(self, command: str, timeout: float = 20.0) -> CommandResult:
        return CommandResult(127, "", f"bash: {command.split()[0]}: command not found")


def test_without_python3_on_the_host_the_check_says_it_could_not_look() -> None:
    [check] = check_submission_egress(MissingPython3Session(), [("smtp.example.com", 587)])
    assert (check.status, check.detail) == (EgressStatus.COULDNT_CHECK, "python3 not found on the host")


def test_a_silent_drop_names_the_security_group_and_acl() -> None:
    check = judge("smtp.example.com", 587, "timeout")
    assert check.status == EgressStatus.BLOCKED
    assert check.detail == "no answer from smtp.example.com:587 within 5s: something drops outbound 587"
    assert check.fix == ("allow outbound TCP 587 to smtp.example.com in the instance's security group and its "
                         "subnet's network ACL (EC2 blocks 25 by default; submission uses 587/465)")


def test_port_25_is_pointed_at_submission() -> None:
    check = judge("mx.example.com", 25, "timeout")
    assert check.fix.startswith("use the provider's submission port (587 STARTTLS or 465 TLS)")
    assert check.fix.endswith("EC2 blocks outbound 25 by default")
