"""Redis backends of the pool tests (a pytest plugin, listed in tests/conftest.py): every test that asks for `pool`
or `backend` (or a fixture built on them, such as the warmup tests' `guard`) runs against a single Redis and a real
3-node Redis Cluster, and is marked `redis_matrix` at collection, so the matrix is selectable (`-m redis_matrix`,
`-m "redis_matrix and not slow"`) and visible in `--markers`; its two halves are the test ids' `[single]` and
`[cluster]`."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import redis

from ippool import Pool
from tests.support.clock import FakeClock
from tests.support.redis_cluster import RedisClusterService, redis_cluster
from tests.support.redis_server import RedisServer


@dataclass(frozen=True)
class Backend:
    """Where a test's Redis lives, in a picklable form so worker processes can open their own clients."""

    kind: str  # "single" or "cluster"
    url: str | None = None
    nodes: tuple[tuple[str, int], ...] = ()

    def client(self, socket_timeout: float = 2.0) -> Any:
        if self.kind == "cluster":
            from redis.cluster import ClusterNode, RedisCluster

            return RedisCluster(startup_nodes=[ClusterNode(h, p) for h, p in self.nodes], decode_responses=True,
                                socket_timeout=socket_timeout)
        assert self.url is not None
        return redis.Redis.from_url(self.url, decode_responses=True, socket_timeout=socket_timeout)


MATRIX_FIXTURE = "backend"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark `redis_matrix` every test that runs once per Redis kind: those that use `backend`, directly or not."""
    for item in items:
        if MATRIX_FIXTURE in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.redis_matrix)


@pytest.fixture(scope="session")
def cluster_service() -> Iterator[RedisClusterService]:
    with redis_cluster() as service:
        yield service


@pytest.fixture(params=["single", "cluster"])
def backend(request: pytest.FixtureRequest, redis_service: RedisServer) -> Backend:
    """A clean Redis of each kind: the session's server (flushed), or the session's cluster (flushed)."""
    if request.param == "cluster":
        service: RedisClusterService = request.getfixturevalue("cluster_service")
        service.flush()
        return Backend("cluster", nodes=tuple(service.startup_nodes))
    client = redis_service.client()
    client.flushall()
    client.close()
    return Backend("single", url=redis_service.url)


@pytest.fixture
def backend_client(backend: Backend) -> Iterator[Any]:
    client = backend.client()
    yield client
    client.close()


@pytest.fixture
def pool(backend_client: Any, clock: FakeClock) -> Pool:
    """A Pool on a clean Redis, on the test's FakeClock, with seeded budget draws."""
    import random

    return Pool(backend_client, clock=clock, rng=random.Random(1234))


def register(pool: Pool, host: str = "sender-1", slots: int = 3, budget: tuple[int, int] = (8, 15)) -> list[str]:
    """Register `host` with `slots` addresses; return their public IPs (TEST-NET-3, never routed)."""
    pool.register_host(host, "10.0.0.10", budget=budget)
    publics = []
    for slot in range(slots):
        public_ip = f"203.0.113.{slot + 1}"
        pool.put_address(host, slot, private_ip=f"10.0.1.{slot + 1}", public_ip=public_ip,
                         allocation_id=f"eipalloc-{slot + 1:04d}")
        publics.append(public_ip)
    return publics
