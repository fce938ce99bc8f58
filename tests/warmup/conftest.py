"""Fixtures for the warmup tests: a guard on a real Redis of each kind (the session's single server and the
3-node Redis Cluster the pool's tests use: `tests.support.ippool_backends`), and a fixed instant to drive `now`."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from warmup import Guard

# 2026-11-30 12:00 UTC: mid-day everywhere from Honolulu to Tokyo, so tests never straddle a day by accident.
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC).timestamp()


@pytest.fixture
def guard_client(backend_client: Any) -> Any:
    """The guard's own client (a `redis.Redis` or a `redis.cluster.RedisCluster`, clean): what a test reads the
    guard's keys with."""
    return backend_client


@pytest.fixture
def guard(guard_client: Any) -> Iterator[Guard]:
    yield Guard(guard_client)
