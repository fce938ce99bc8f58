"""A real SSH host for provisioning tests: `sshd` inside a network namespace reached over a veth pair.

The namespace has its own network stack (addresses, routes, net.* sysctls) but shares the machine's filesystem,
so tests must point every file a role writes at a temporary directory (see `SshHost.role_overrides`).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

SSHD = "/usr/sbin/sshd"


def missing_tools() -> list[str]:
    """Debian packages to install before these tests can run (empty when all is there)."""
    missing = []
    if shutil.which("ip") is None:
        missing.append("iproute2")
    if not Path(SSHD).exists() or shutil.which("ssh-keygen") is None:
        missing.append("openssh-server")
    return missing


def can_make_namespaces() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


@dataclass
class SshHost:
    """Connection facts and helpers for the sender host living in namespace `netns`."""

    netns: str
    address: str  # the namespace side of the veth pair, where sshd listens
    root_address: str  # the root-namespace side: where a probe listens, as seen from the host
    subnet: str
    interface: str  # the namespace-side interface name (sendhost_interface)
    port: int
    key_file: Path
    known_hosts: Path
    host_public_key: str  # "ssh-ed25519 AAAA..."
    workdir: Path
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def ip(self, *args: str) -> str:
        """Run `ip ARGS` inside the namespace and return its output."""
        return subprocess.run(["ip", "-n", self.netns, *args], check=True, capture_output=True, text=True).stdout

    def bound_addresses(self) -> set[str]:
        """IPv4 addresses bound on the host's interface right now."""
        out = self.ip("-o", "-4", "addr", "show", "dev", self.interface)
        return {line.split()[3].split("/")[0] for line in out.splitlines() if line.strip()}

    def slot_address(self, n: int) -> str:
        return self.address.rsplit(".", 1)[0] + f".{10 + n}"

    def reset_addresses(self) -> None:
        """Remove every address except the interface's own, as a freshly booted host would have."""
        for address in self.bound_addresses() - {self.address}:
            self.ip("addr", "del", f"{address}/{self.subnet.split('/')[1]}", "dev", self.interface)

    def role_overrides(self, files: Path) -> dict[str, object]:
        """Role variables that keep a run inside the namespace and `files`: nothing on the real machine changes."""
        return {
            "sender_base__packages": [],  # installing packages would change the machine, not the namespace
            "sender_base__create_user": False,  # /etc/passwd is shared with the machine
            "sender_base__sysctl_file": str(files / "sysctl.d" / "60-sendhost.conf"),  # net.* are per-namespace
            "sender_addresses__netplan_file": str(files / "netplan" / "60-sendhost-slots.yaml"),
            "sender_addresses__networkd_file": str(files / "networkd" / "60-sendhost-slots.conf"),
            "sender_addresses__ifupdown_file": str(files / "interfaces.d" / "60-sendhost-slots"),
            # the machine may have netplan.io and ifupdown installed (CI does, for their validators): auto-detection
            # looks under `files`, where neither is, so the stack stays networkd unless a test picks one
            "sender_addresses__netplan_dir": str(files / "netplan-not-installed"),
            "sender_addresses__ifupdown_interfaces": str(files / "ifupdown-not-installed"),
            "sender_addresses__cloud_init_dir": str(files / "cloud.cfg.d"),  # a test creates it to stand for cloud-init
            "sender_base__chrony_sources_file": str(files / "chrony" / "sendhost-amazon-time-sync.sources"),
            "sender_agent__env_file": str(files / "sendhost" / "agent.env"),
            "sender_agent__unit_file": str(files / "systemd" / "sendhost-sender.service"),
            # sendhost's venv and wheel under `files`; the namespace has no network, so the venv takes the
            # dependencies from the system Python and the wheel goes in alone (see the role's defaults)
            "sender_agent__home": str(files / "opt-sendhost"),
            "sender_agent__packages": [],
            "sender_agent__venv_system_site_packages": True,
            "sender_agent__pip_no_deps": True,
            "sender_agent__user": "root",
            "sender_agent__group": "root",
            # the namespace runs no init of its own; never reload or enable units on the machine's systemd
            "sender_base__service_mgr": "none (test namespace)",
            "sender_agent__service_mgr": "none (test namespace)",
        }

    def known_hosts_line(self) -> str:
        return f"[{self.address}]:{self.port} {self.host_public_key}"


def _run(*args: str) -> None:
    subprocess.run(list(args), check=True, capture_output=True)


def _keygen(path: Path) -> str:
    _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "sendhost-test", "-f", str(path))
    return path.with_suffix(".pub").read_text().strip()


def _wait_for_port(address: str, port: int, process: subprocess.Popen[bytes], timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"sshd exited with {process.returncode}: {process.stderr and process.stderr.read()!r}")
        with suppress(OSError), socket.create_connection((address, port), timeout=0.5):
            return
        time.sleep(0.05)
    raise RuntimeError(f"sshd did not listen on {address}:{port} within {timeout}s")


def _kill_namespace_processes(netns: str) -> None:
    listed = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True, check=False)
    for pid in listed.stdout.split():
        with suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), 15)


def _free_octet() -> int:
    """An x of 10.213.x.0/24 that no interface of the machine is on: another session's or worker's host has one
    (the pid picks where to start looking, so two processes starting at once start apart)."""
    shown = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True, check=False).stdout
    used = {int(octet) for octet in re.findall(r"\binet 10\.213\.(\d+)\.", shown)}
    start = os.getpid() % 250
    for step in range(250):
        octet = (start + step) % 250 + 1
        if octet not in used:
            return octet
    raise RuntimeError("every 10.213.x.0/24 is in use: stale test namespaces? (ip netns list)")


@contextmanager
def ssh_host() -> Iterator[SshHost]:
    """Create the namespace, veth pair and sshd; tear all of it down afterwards."""
    tag = f"{os.getpid() % 100000}"  # per process: each pytest-xdist worker (a process) makes a host of its own
    netns = f"sendhost-prov-{tag}"
    root_if, ns_if = f"shp{tag}r", f"shp{tag}n"
    octet = _free_octet()  # 10.213.x.0/24: private, used only between this namespace and its veth peer
    subnet = f"10.213.{octet}.0/24"
    root_address, address = f"10.213.{octet}.1", f"10.213.{octet}.2"
    workdir = Path(tempfile.mkdtemp(prefix="sendhost-sshhost-"))
    process: subprocess.Popen[bytes] | None = None
    try:
        _run("ip", "netns", "add", netns)
        _run("ip", "link", "add", root_if, "type", "veth", "peer", "name", ns_if, "netns", netns)
        _run("ip", "addr", "add", f"{root_address}/24", "dev", root_if)
        _run("ip", "link", "set", root_if, "up")
        _run("ip", "-n", netns, "addr", "add", f"{address}/24", "dev", ns_if)
        _run("ip", "-n", netns, "link", "set", ns_if, "up")
        _run("ip", "-n", netns, "link", "set", "lo", "up")

        host_public_key = " ".join(_keygen(workdir / "ssh_host_ed25519_key").split()[:2])
        client_public_key = _keygen(workdir / "id_test")
        (workdir / "authorized_keys").write_text(client_public_key + "\n")
        port = 2222
        config = workdir / "sshd_config"
        config.write_text(
            f"Port {port}\nListenAddress {address}\nHostKey {workdir / 'ssh_host_ed25519_key'}\n"
            f"PidFile {workdir / 'sshd.pid'}\nAuthorizedKeysFile {workdir / 'authorized_keys'}\n"
            # root login with the test key only; no PAM or strict modes, which need a real login setup
            "PermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
            "UsePAM no\nStrictModes no\nSubsystem sftp internal-sftp\nLogLevel ERROR\n"
        )
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege-separation directory
        process = subprocess.Popen(
            ["ip", "netns", "exec", netns, SSHD, "-D", "-e", "-f", str(config)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        _wait_for_port(address, port, process)
        known_hosts = workdir / "known_hosts"
        host = SshHost(netns=netns, address=address, root_address=root_address, subnet=subnet, interface=ns_if,
                       port=port, key_file=workdir / "id_test", known_hosts=known_hosts,
                       host_public_key=host_public_key, workdir=workdir, process=process)
        known_hosts.write_text(host.known_hosts_line() + "\n")
        yield host
    finally:
        _kill_namespace_processes(netns)  # sessions sshd forked for clients outlive the listener
        if process is not None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            if process.stderr:
                process.stderr.close()
        subprocess.run(["ip", "link", "del", root_if], capture_output=True, check=False)
        subprocess.run(["ip", "netns", "del", netns], capture_output=True, check=False)
        shutil.rmtree(workdir, ignore_errors=True)
