"""The probe endpoint answers each connection with the peer address it saw."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from provisioning.errors import ProvisionConfigError
from provisioning.probe import Probe, parse_endpoint
from tests.conftest import REPO_ROOT, run_cli
from tests.support.net import free_port


def ask(address: str, port: int, source: str | None = None) -> str:
    with socket.create_connection((address, port), timeout=5,
                                  source_address=(source, 0) if source else None) as conn:
        return conn.makefile().readline()


@pytest.mark.service
def test_probe_answers_with_the_source_address_of_each_connection() -> None:
    with Probe("127.0.0.1", 0) as probe:
        host, port = probe.address
        # two different loopback sources, so the answer cannot be a constant
        assert ask(host, port, "127.0.0.1") == "127.0.0.1\n"
        assert ask(host, port, "127.0.0.2") == "127.0.0.2\n"


@pytest.mark.service
def test_probe_command_serves_until_stopped(tmp_path: Path) -> None:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "toolkit", "host", "probe", "--listen", f"127.0.0.1:{port}"],
        cwd=REPO_ROOT, env={"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin"},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert process.stderr is not None
        assert process.stderr.readline() == f"probe listening on 127.0.0.1:{port} (Ctrl-C to stop)\n"
        assert ask("127.0.0.1", port, "127.0.0.3") == "127.0.0.3\n"
    finally:
        process.terminate()
        process.communicate(timeout=10)


@pytest.mark.parametrize("text", ["7070", "host:", ":7070", "host:port", "10.0.0.1:70000"])
def test_a_bad_endpoint_is_refused_naming_the_option(text: str) -> None:
    with pytest.raises(ProvisionConfigError, match=r"--listen .*expected HOST:PORT"):
        parse_endpoint(text)


def test_probe_command_with_bad_listen_exits_2() -> None:
    result = run_cli("host", "probe", "--listen", "nowhere")

    assert result.returncode == 2
    assert result.stderr == "error: --listen 'nowhere': expected HOST:PORT, e.g. 10.0.1.5:7070\n"


@pytest.mark.service
def test_probe_command_on_a_busy_port_exits_2() -> None:
    with Probe("127.0.0.1", 0) as probe:
        host, port = probe.address
        result = run_cli("host", "probe", "--listen", f"{host}:{port}")
    assert result.returncode == 2
    assert f"--listen {host}:{port}: cannot listen there" in result.stderr
