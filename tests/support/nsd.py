"""A real NSD authoritative server on loopback, started for tests with its own config in a temp dir."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import dns.message
import dns.query
import dns.rcode

from tests.support.net import free_port

NSD_CONF = """server:
    ip-address: {host}@{port}
    port: {port}
    do-ip6: no
    server-count: 1
    username: ""
    chroot: ""
    zonesdir: "{dir}"
    pidfile: "{dir}/nsd.pid"
    database: ""
    zonelistfile: "{dir}/zone.list"
    xfrdfile: "{dir}/xfrd.state"
    xfrdir: "{dir}"
    logfile: "{dir}/nsd.log"
    verbosity: 1
    hide-version: yes
    tcp-count: 64
    reuseport: no
remote-control:
    control-enable: no
"""


def nsd_available() -> bool:
    return shutil.which("nsd") is not None or Path("/usr/sbin/nsd").exists()


def nsd_binary() -> str:
    return shutil.which("nsd") or "/usr/sbin/nsd"


@dataclass
class NsdServer:
    host: str
    port: int
    directory: Path
    process: subprocess.Popen[bytes]

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def log(self) -> str:
        path = self.directory / "nsd.log"
        return path.read_text(errors="replace") if path.exists() else ""


def write_config(directory: Path, zones: dict[str, str], host: str, port: int) -> Path:
    text = NSD_CONF.format(host=host, port=port, dir=directory)
    for origin, body in zones.items():
        (directory / f"{origin}.zone").write_text(body)
        text += f"zone:\n    name: {origin}\n    zonefile: {origin}.zone\n"
    config = directory / "nsd.conf"
    config.write_text(text)
    return config


def _answers(host: str, port: int, origin: str) -> bool:
    query = dns.message.make_query(origin, "SOA")
    try:
        response = dns.query.udp(query, host, port=port, timeout=0.2)
    except (OSError, dns.exception.Timeout):
        return False
    return response.rcode() == dns.rcode.NOERROR and bool(response.answer)


@contextmanager
def nsd_server(directory: Path, zones: dict[str, str], host: str = "127.0.0.1", port: int | None = None,
               prefix: tuple[str, ...] = ()) -> Iterator[NsdServer]:
    """Start `nsd -d` serving `zones` ({origin: zone text}) on host:port; stop it on exit.

    `prefix` runs it under another command, e.g. `ip netns exec NS` for a server inside a network namespace.
    """
    port = port or free_port(host)
    directory.mkdir(parents=True, exist_ok=True)
    config = write_config(directory, zones, host, port)
    check = subprocess.run(["nsd-checkconf", str(config)], capture_output=True, text=True, check=False)
    if check.returncode != 0:
        raise RuntimeError(f"nsd-checkconf: {check.stdout}{check.stderr}")
    process = subprocess.Popen([*prefix, nsd_binary(), "-d", "-c", str(config)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    server = NsdServer(host, port, directory, process)
    try:
        first = next(iter(zones))
        deadline = time.monotonic() + 30
        while not _answers(host, port, first):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"nsd did not start (exit {process.poll()}): {server.log()[-2000:]}")
            time.sleep(0.05)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
